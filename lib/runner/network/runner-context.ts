import type { NetworkCell } from '../../config/network.ts';
import type { LabConfig } from '../../config/schema.ts';
import type {
  MtlsMetricEvidence,
  NetworkJobOutcome,
  NetworkRunResult,
  PodMeshEvidence,
} from '../../network/study/model.ts';
import { NETWORK_SMOKE_READY_TIMEOUT_MINUTES } from '../../network/study/smoke.ts';
import { DEFAULT_API_OUTAGE_MS, DEFAULT_RETRY_POLICY, type RetryPolicy } from '../call-policy.ts';
import type { PollOptions } from '../poll.ts';
import type {
  Clock,
  JobObject,
  NetworkCluster,
  NetworkPodState,
  NetworkResultStore,
  NetworkStudyFiles,
  ServiceObject,
  SidecarMetrics,
} from '../ports.ts';
import type { StopRequest } from '../stop-signal.ts';
import type { NetworkJobContext } from './jobs.ts';

/**
 * What the network runner's parts share: its I/O (the ports), its settings, and the few things
 * every step needs of the runner (logging, the phase shown in status.json, the study folder, the
 * Job driver). The runner (run-network-study.ts) implements it; each experiment's steps take it.
 */

/** The network runner's I/O, behind the ports (ports.ts). */
export interface NetworkRunnerDeps {
  readonly cluster: NetworkCluster;
  readonly sidecars: SidecarMetrics;
  readonly store: NetworkResultStore;
  readonly clock: Clock;
  /** What the Job builders need (jobs.ts). */
  readonly jobs: NetworkJobContext;
  /**
   * The plan's static Jobs by name, as the runner's ConfigMap carries them (`jobs.json`).
   * @default built from `jobs` with `runJobs`
   */
  readonly planJobs?: Readonly<Record<string, JobObject>>;
  /** The E9 Service template (charts/network/service-scale.ts `scaleServiceTemplate`). */
  readonly serviceTemplate: ServiceObject;
  readonly log: (line: string) => void;
  /** SIGTERM or SIGINT (stop-signal.ts): the study stops as `interrupted`, its Jobs deleted. */
  readonly stop?: StopRequest;
}

export interface NetworkRunnerOptions {
  /** How long one Job may run before it is deleted and recorded as timed out. @default 15 minutes */
  readonly jobTimeoutMs?: number;
  /** How often Jobs, pods and endpoints are polled. @default 2 seconds */
  readonly pollIntervalMs?: number;
  /** How often a progress line is logged while waiting. @default 1 minute */
  readonly progressEveryMs?: number;
  /** How long a precondition (pods restarted, Services ready, conntrack baseline) may take. @default 10 minutes */
  readonly readyTimeoutMs?: number;
  /**
   * The same for a smoke study (and the full study's smoke checks), when shorter than readyTimeoutMs.
   * @default NETWORK_SMOKE_READY_TIMEOUT_MINUTES (lib/network/study/smoke.ts), 2 minutes
   */
  readonly smokeReadyTimeoutMs?: number;
  /**
   * The error policy of the cell's API and the sidecar scrapes (call-policy.ts, as the first
   * lab's runner): retries on 429, 5xx and connection errors; `outageMs` is how long an API call
   * keeps being tried (`runner.retry.outageMinutes`; the scrapes never ride out an outage).
   * @default 5 tries, 1 s doubling up to 30 s; API outages up to 15 minutes
   */
  readonly retry?: RetryPolicy;
}

export type Resolved<T> = { readonly [K in keyof T]-?: T[K] };

/** The options with their defaults. */
export function resolved(options: NetworkRunnerOptions): Resolved<NetworkRunnerOptions> {
  return {
    jobTimeoutMs: options.jobTimeoutMs ?? 15 * 60_000,
    pollIntervalMs: options.pollIntervalMs ?? 2_000,
    progressEveryMs: options.progressEveryMs ?? 60_000,
    readyTimeoutMs: options.readyTimeoutMs ?? 10 * 60_000,
    smokeReadyTimeoutMs: options.smokeReadyTimeoutMs ?? NETWORK_SMOKE_READY_TIMEOUT_MINUTES * 60_000,
    retry: options.retry ?? { ...DEFAULT_RETRY_POLICY, outageMs: DEFAULT_API_OUTAGE_MS },
  };
}

/**
 * A smoke study's options: its waits end after the smoke's ready timeout, so a precondition that
 * will never hold (an injector that never injects, a backend that never starts) fails a smoke
 * study in minutes, not after the full study's 10.
 */
export function smokeOptions(options: NetworkRunnerOptions): Resolved<NetworkRunnerOptions> {
  const full = resolved(options);
  return { ...full, readyTimeoutMs: Math.min(full.readyTimeoutMs, full.smokeReadyTimeoutMs) };
}

/** A run's kind-specific outcome before judgment. */
export interface KindOutcome {
  readonly job: NetworkJobOutcome;
  readonly result?: NetworkRunResult;
  readonly pods: readonly PodMeshEvidence[];
  readonly mtlsMetrics?: MtlsMetricEvidence;
  /** What the runner found wrong (not started, no result file, restore failed, ...). */
  readonly reasons: readonly string[];
}

/** The output file a Job writes, or the files (a grouped mTLS Job writes one per case). */
export type JobFiles = string | readonly string[];

/** What a finished Job left. */
export interface JobRun {
  readonly outcome: NetworkJobOutcome;
  /** The (first) output file's text; undefined when the Job wrote none. */
  readonly text: string | undefined;
  /** Each output file's text by name; undefined for a file the Job did not write. */
  readonly files: Readonly<Record<string, string | undefined>>;
  readonly pods: readonly NetworkPodState[];
}

/** The Job side of the runner (job-driver.ts), as the steps use it. */
export interface JobDriverPort {
  runJob(run: { readonly id: string } | undefined, job: JobObject, file: JobFiles): Promise<JobRun>;
  startJob(run: { readonly id: string } | undefined, job: JobObject): Promise<void>;
  finishJob(run: { readonly id: string } | undefined, job: JobObject, file: JobFiles): Promise<JobRun>;
  hostOutput(step: string, runId: string, script: string, cilium?: boolean): Promise<string>;
  waitFor(what: string, check: () => Promise<string | undefined>): Promise<string | undefined>;
  /** The options of a wait of the runner (poll.ts): its clock and interval, status while it waits. */
  poll(timeoutMs: number): PollOptions;
}

/** What a step of the study needs of the runner. */
export interface StepContext {
  readonly deps: NetworkRunnerDeps;
  readonly config: LabConfig;
  readonly cell: NetworkCell;
  /** The cell's API, retried (cluster-retry.ts). */
  readonly cluster: NetworkCluster;
  readonly sidecars: SidecarMetrics;
  readonly options: Resolved<NetworkRunnerOptions>;
  readonly jobs: JobDriverPort;
  say(line: string): Promise<void>;
  /** Names what the active run is doing (status.json, the log). */
  phase(phase: string): Promise<void>;
  /** A progress line when one is due, and status.json. */
  progress(): Promise<void>;
  studyFiles(): NetworkStudyFiles;
}

export function meshEvidence(pod: NetworkPodState): PodMeshEvidence {
  return { pod: pod.name, namespace: pod.namespace, node: pod.node, hasSidecar: pod.hasSidecar };
}

/** Runs `fn` over `items`, at most `limit` at once. */
export async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++];
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
}
