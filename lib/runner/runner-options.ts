import type { LabConfig } from '../config/schema.ts';
import type { Arm, ServerSet } from '../study/arms.ts';
import { EPP_METRICS_PORT, eppName, replicaUrls, targetBaseUrl } from '../study/topology.ts';
import {
  apiOutageMsOf,
  DEFAULT_API_OUTAGE_MS,
  DEFAULT_RETRY_POLICY,
  type RetryPolicy,
  retryPolicyOf,
} from './call-policy.ts';
import type { StatusChecks } from './preflight.ts';

/** The first lab's runner's waits and limits; every one has a default. */
export interface RunnerOptions {
  /**
   * How long a run's Jobs may take before they are deleted and recorded as timed out.
   * @default 60 minutes
   */
  readonly jobTimeoutMs?: number;
  /**
   * How often Jobs, rollouts and pods are polled.
   * @default 5 seconds
   */
  readonly pollIntervalMs?: number;
  /**
   * How often a running Job is polled. A run's end is noticed this late at most (half of it on
   * average), so it is shorter than the other polls: one GET per Job each time.
   * @default 1 second
   */
  readonly jobPollIntervalMs?: number;
  /**
   * How long a client's pod may stay Unschedulable (no node has room for it) before its Job is
   * deleted and recorded as `unschedulable`, instead of waiting for the Job timeout. A node whose
   * earlier pods are still terminating frees up within it.
   * @default 5 minutes
   */
  readonly unschedulableTimeoutMs?: number;
  /**
   * How often a progress line is logged while waiting (status.json is written on every poll).
   * @default 1 minute
   */
  readonly progressEveryMs?: number;
  /**
   * How long a restarted front end may take to be ready (the router pip-installs at start).
   * @default 15 minutes
   */
  readonly rolloutTimeoutMs?: number;
  /**
   * How long a deleted replica pod may take to serve /v1/models again (model load).
   * @default 30 minutes
   */
  readonly podRestartTimeoutMs?: number;
  /**
   * How long the replicas may take to serve /v1/models when the study starts (first model download).
   * @default 90 minutes
   */
  readonly startupTimeoutMs?: number;
  /**
   * How long a replica may take to have no request running or waiting before its cache reset
   * (`vllm:num_requests_running` and `vllm:num_requests_waiting` both 0). A replica still busy
   * then is restarted instead of reset.
   * @default 5 minutes
   */
  readonly idleTimeoutMs?: number;
  /**
   * How long vLLM's log may take to show the outcome of a reset, and a replica's counter to show
   * the preflight's request.
   * @default 30 seconds
   */
  readonly confirmTimeoutMs?: number;
  /**
   * How long, before each run, the run's replicas may take to serve /v1/models again and its
   * front end's Deployments to be available (a replica that restarted, a front end that crashed).
   * Replicas still not serving then stop the study; a front end still down makes the run invalid.
   * @default 10 minutes
   */
  readonly readyTimeoutMs?: number;
  /**
   * Retries of the Kubernetes API and the replicas' /metrics and reset calls on 429, 5xx and
   * connection errors (call-policy.ts); `outageMs` is how long a Kubernetes API call keeps being
   * tried (`runner.retry.outageMinutes`).
   * @default 5 tries, 1 s doubling up to 30 s; API outages up to 15 minutes
   */
  readonly retry?: RetryPolicy;
  /**
   * Attempts of one run in one runner process when an attempt ends invalid for a transient cause
   * (a replica restart, a one-off Job failure, a scrape that failed): attempt-rules.ts.
   * @default 3
   */
  readonly runAttempts?: number;
  /**
   * Base URLs of a server set's replicas on a replica pair (lib/study/pairs.ts).
   * @default the headless-Service DNS names of lib/study/topology.ts
   */
  readonly replicaUrls?: (servers: ServerSet, pair: number) => readonly string[];
  /**
   * Base URL of an arm's front end on a replica pair, where the preflight sends its request.
   * @default the URL the arm's benchmark clients use (`targetBaseUrl`)
   */
  readonly frontEndUrl?: (arm: Arm, pair: number) => string;
  /**
   * Base URL of the metrics port of an EPP-family arm's Endpoint Picker on a replica pair.
   * @default `http://<eppName>.<namespace>.svc.cluster.local:9090`
   */
  readonly eppMetricsUrl?: (arm: Arm, pair: number) => string;
  /**
   * Status conditions each arm's preflight requires (the AI Gateway's HTTPRoute and Gateway).
   * @default none
   */
  readonly statusChecks?: StatusChecks;
}

export type ResolvedOptions = { readonly [K in keyof RunnerOptions]-?: NonNullable<RunnerOptions[K]> };

/** The options `runner.*` of the configuration sets: the readiness wait and the error policy with its outage limit. */
export function runnerOptionsOf(config: LabConfig): Pick<RunnerOptions, 'readyTimeoutMs' | 'retry'> {
  return {
    readyTimeoutMs: config.runner.readyTimeoutMinutes * 60_000,
    retry: { ...retryPolicyOf(config), outageMs: apiOutageMsOf(config) },
  };
}

/** The options with their defaults. */
export function resolveOptions(config: LabConfig, options: RunnerOptions): ResolvedOptions {
  return {
    jobTimeoutMs: options.jobTimeoutMs ?? 60 * 60_000,
    pollIntervalMs: options.pollIntervalMs ?? 5_000,
    jobPollIntervalMs: options.jobPollIntervalMs ?? 1_000,
    unschedulableTimeoutMs: options.unschedulableTimeoutMs ?? 5 * 60_000,
    progressEveryMs: options.progressEveryMs ?? 60_000,
    rolloutTimeoutMs: options.rolloutTimeoutMs ?? 15 * 60_000,
    podRestartTimeoutMs: options.podRestartTimeoutMs ?? 30 * 60_000,
    startupTimeoutMs: options.startupTimeoutMs ?? 90 * 60_000,
    idleTimeoutMs: options.idleTimeoutMs ?? 5 * 60_000,
    confirmTimeoutMs: options.confirmTimeoutMs ?? 30_000,
    readyTimeoutMs: options.readyTimeoutMs ?? 10 * 60_000,
    retry: options.retry ?? { ...DEFAULT_RETRY_POLICY, outageMs: DEFAULT_API_OUTAGE_MS },
    runAttempts: options.runAttempts ?? 3,
    replicaUrls: options.replicaUrls ?? ((servers, pair) => replicaUrls(config, servers, pair)),
    frontEndUrl:
      options.frontEndUrl ?? ((arm, pair) => targetBaseUrl(config, { kind: 'arm', arm: arm.id, pair })),
    eppMetricsUrl:
      options.eppMetricsUrl ??
      ((arm, pair) =>
        `http://${eppName(config, arm.frontEndId, pair)}.${config.namespace}.svc.cluster.local:${EPP_METRICS_PORT}`),
    statusChecks: options.statusChecks ?? {},
  };
}

/**
 * The longest a staged client may wait at its closed gate (`--ready-check-timeout-sec`): the run
 * it is staged behind, in every attempt it may take (each: the readiness waits, the resets with
 * pod restarts, the front-end rollout, the Job timeout and the deletion of a timed-out Job), then
 * this run's own waits before its gates open, each call of both possibly riding out an API outage.
 * A limit below this would let a client give up in a slow but healthy study.
 */
export function stagedWaitLimitMs(o: ResolvedOptions, replicasPerSet: number): number {
  const outage = o.retry.outageMs ?? 0;
  const beforeLoad =
    o.readyTimeoutMs * 2 +
    replicasPerSet * (o.idleTimeoutMs + 2 * o.confirmTimeoutMs) +
    o.podRestartTimeoutMs +
    o.rolloutTimeoutMs +
    outage;
  const attempt = beforeLoad + o.jobTimeoutMs + o.rolloutTimeoutMs + outage;
  return o.runAttempts * attempt + beforeLoad;
}
