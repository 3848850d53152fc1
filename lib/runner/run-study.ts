import type { LabConfig } from '../config/schema.ts';
import type { Arm, ServerSet } from '../study/arms.ts';
import {
  counterDeltas,
  eppSnapshot,
  kvCacheTokensFromLog,
  REQUESTS_RUNNING,
  REQUESTS_WAITING,
  RESET_SUCCEEDED_MESSAGE,
  type ResetLogCounts,
  replicaIdle,
  resetLogCounts,
  type VllmSnapshot,
  vllmSnapshot,
} from '../study/metrics.ts';
import type { StudyPlan, StudyRun } from '../study/plan.ts';
import { studyPredictions } from '../study/planner.ts';
import { promptReader } from '../study/prompt-visibility.ts';
import {
  type ClientRecord,
  type JobOutcome,
  type PreflightRecord,
  type PromptEvidence,
  type ReplicaRecord,
  type RunRecord,
  STUDY_SCHEMA_VERSION,
  type StudyMetadata,
  type StudyRecord,
  summarizeRun,
} from '../study/results.ts';
import {
  armById,
  EPP_METRICS_PORT,
  eppName,
  frontEnd,
  replicaSetName,
  replicaUrls,
  targetBaseUrl,
} from '../study/topology.ts';
import {
  type EppScrape,
  jobOutcome,
  type PromptEvidenceSource,
  promptEvidence,
  promptEvidenceSource,
  type ReplicaReset,
  type ReplicaScrapes,
  type ResultFileReading,
  readResultFile,
  resetRecords,
  runReasons,
  withStudyChecks,
} from '../study/validity.ts';
import { apiPath } from './http-front-ends.ts';
import { GPU_TOPOLOGY_FILE, GPU_UUIDS_FILE, HOST_FILE } from './layout.ts';
import type { DeploymentState, RunnerDeps } from './ports.ts';
import { type StatusChecks, statusProblems } from './preflight.ts';
import { formatElapsed, progressLine, type StudyState, type StudyStatus, studyEtaMs } from './status.ts';

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
   * Base URLs of a server set's replicas.
   * @default the headless-Service DNS names of lib/study/topology.ts
   */
  readonly replicaUrls?: (servers: ServerSet) => readonly string[];
  /**
   * Base URL of an arm's front end, where the preflight sends its request.
   * @default the URL the arm's benchmark clients use (`targetBaseUrl`)
   */
  readonly frontEndUrl?: (arm: Arm) => string;
  /**
   * Base URL of the metrics port of an EPP-family arm's Endpoint Picker.
   * @default `http://<eppName>.<namespace>.svc.cluster.local:9090`
   */
  readonly eppMetricsUrl?: (arm: Arm) => string;
  /**
   * Status conditions each arm's preflight requires (the AI Gateway's HTTPRoute and Gateway).
   * @default none
   */
  readonly statusChecks?: StatusChecks;
}

type Resolved<T> = { readonly [K in keyof T]-?: T[K] };

/** The optional parts of a run record besides its measurements. */
interface RunExtras {
  readonly resets?: RunRecord['resets'];
  readonly preflight?: PreflightRecord;
  readonly promptEvidence?: PromptEvidence;
}

/** Container of the vLLM replicas (charts/model-servers.ts), whose log names the KV cache size. */
const VLLM_CONTAINER = 'vllm';
/**
 * The log read that confirms a reset starts this long before the call: `sinceTime` has whole
 * seconds and node and runner clocks may differ. Lines before the call are counted in the
 * baseline read of the same window, so they never pass for a confirmation.
 */
const LOG_WINDOW_MARGIN_MS = 60_000;

/** A reset that needs a pod restart instead, and why. */
interface RestartNeeded {
  readonly replica: number;
  readonly why: string;
  readonly status?: number;
}

/**
 * Executes the study plan in order (lab-spec 4.2) and records every run with its validity
 * (lab-spec 4.3, 4.4) in the results folder. Resumable: a run whose valid record exists is
 * skipped, so a study interrupted at run 7 restarts at run 7. Returns the study record.
 */
export async function runStudy(
  deps: RunnerDeps,
  config: LabConfig,
  plan: StudyPlan,
  options: RunnerOptions = {},
): Promise<StudyRecord> {
  const runner = new StudyRunner(deps, config, plan, {
    jobTimeoutMs: options.jobTimeoutMs ?? 60 * 60_000,
    pollIntervalMs: options.pollIntervalMs ?? 5_000,
    progressEveryMs: options.progressEveryMs ?? 60_000,
    rolloutTimeoutMs: options.rolloutTimeoutMs ?? 15 * 60_000,
    podRestartTimeoutMs: options.podRestartTimeoutMs ?? 30 * 60_000,
    startupTimeoutMs: options.startupTimeoutMs ?? 90 * 60_000,
    idleTimeoutMs: options.idleTimeoutMs ?? 5 * 60_000,
    confirmTimeoutMs: options.confirmTimeoutMs ?? 30_000,
    replicaUrls: options.replicaUrls ?? ((servers) => replicaUrls(config, servers)),
    frontEndUrl: options.frontEndUrl ?? ((arm) => targetBaseUrl(config, { kind: 'arm', arm: arm.id })),
    eppMetricsUrl:
      options.eppMetricsUrl ??
      ((arm) =>
        `http://${eppName(config, arm.frontEndId)}.${config.namespace}.svc.cluster.local:${EPP_METRICS_PORT}`),
    statusChecks: options.statusChecks ?? {},
  });
  return runner.run();
}

/** Whether a Deployment's rollout is complete, by the rules of `kubectl rollout status`. */
export function rolloutComplete(d: DeploymentState): boolean {
  return (
    d.observedGeneration >= d.generation &&
    d.updated === d.desired &&
    d.total === d.updated &&
    d.available === d.desired
  );
}

/** JSON with sorted keys, to compare two configurations regardless of key order. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

class StudyRunner {
  private readonly startedAt: Date;
  private records = new Map<string, RunRecord>();
  private metadata: StudyMetadata | undefined;
  private state: StudyState = 'starting';
  private current: { index: number; run: StudyRun; startedAt: Date; phase: string } | undefined;
  private lastProgressAt = 0;
  private message = '';
  /** Each arm's preflight, once per runner process, before the arm's first run. */
  private readonly preflights = new Map<string, PreflightRecord>();

  constructor(
    private readonly deps: RunnerDeps,
    private readonly config: LabConfig,
    private readonly plan: StudyPlan,
    private readonly options: Resolved<RunnerOptions>,
  ) {
    this.startedAt = deps.clock.now();
  }

  async run(): Promise<StudyRecord> {
    try {
      return await this.execute();
    } catch (error) {
      this.state = 'failed';
      const message = (error as Error).message;
      await this.say(`study stopped: ${message}`);
      await this.writeStatus(message);
      throw error;
    }
  }

  private async execute(): Promise<StudyRecord> {
    const { store } = this.deps;
    const existing = await store.readStudy();
    if (existing && canonicalJson(existing.metadata.config) !== canonicalJson(this.config)) {
      throw new Error(
        'the results folder holds a study of a different configuration (study.json metadata.config); move study.json, status.json and runs/ away to start a new study',
      );
    }
    const inPlan = new Set(this.plan.runs.map((r) => r.id));
    for (const record of existing?.runs ?? []) if (inPlan.has(record.id)) this.records.set(record.id, record);
    const pending = this.plan.runs.filter((run) => !this.records.get(run.id)?.valid);
    await this.say(
      existing
        ? `resuming the study: ${this.plan.runs.length - pending.length} of ${this.plan.runs.length} runs have a valid record`
        : `starting the study: ${this.plan.runs.length} runs`,
    );
    await this.writeStatus();

    const sets = [...new Set(pending.map((run) => run.reset.prefixCaches))];
    for (const servers of sets) await this.waitForReplicas(servers);

    if (existing) {
      const { finishedAt: _previous, ...kept } = existing.metadata;
      this.metadata = kept;
    } else {
      this.metadata = await this.collectMetadata();
    }
    await this.writeStudy();

    this.state = 'running';
    for (const [i, run] of this.plan.runs.entries()) {
      if (this.records.get(run.id)?.valid) {
        await this.say(`run ${i + 1}/${this.plan.runs.length} ${run.id}: valid record exists, skipped`);
        continue;
      }
      const record = await this.executeRun(i + 1, run);
      this.records.set(run.id, record);
      await this.applyStudyChecks(record.id);
      const saved = this.records.get(run.id) ?? record;
      await this.say(
        `run ${i + 1}/${this.plan.runs.length} ${run.id}: ${saved.valid ? 'valid' : `INVALID: ${saved.invalidReasons.join('; ')}`}`,
      );
    }
    this.current = undefined;
    this.state = 'finished';
    this.metadata = { ...(this.metadata as StudyMetadata), finishedAt: this.deps.clock.now().toISOString() };
    const study = await this.writeStudy();
    const valid = study.runs.filter((r) => r.valid).length;
    await this.say(`study finished: ${valid} of ${study.runs.length} runs valid`);
    await this.writeStatus();
    return study;
  }

  // ---- One run -----------------------------------------------------------------------------

  private async executeRun(index: number, run: StudyRun): Promise<RunRecord> {
    const { clock, cluster, store } = this.deps;
    const startedAt = clock.now();
    this.current = { index, run, startedAt, phase: 'starting' };
    const servers = run.reset.prefixCaches;
    const urls = this.options.replicaUrls(servers);
    const pods = urls.map((_, i) => `${replicaSetName(this.config, servers)}-${i}`);
    const jobs = run.benchmarks.map((spec) => ({ spec, job: this.deps.jobManifest(spec) }));

    // Lab-spec 4.4: a Job of an earlier attempt of this run (a resumed study) and its pods are
    // gone before anything else happens, so their requests cannot warm the caches reset below.
    await this.phase('clearing earlier attempts');
    for (const { spec, job } of jobs) {
      await this.deletePreviousJob(job.metadata.name);
      await store.removeClientResult(spec.id, spec.resultFile);
    }

    // The preflight's request lands in a cache and an index that the reset and restart clear.
    const arm = run.arm ? armById(this.config, run.arm) : undefined;
    let preflight: PreflightRecord | undefined;
    if (arm) {
      const known = this.preflights.get(arm.id);
      if (!known) {
        await this.phase('preflight');
        preflight = await this.preflight(arm);
        this.preflights.set(arm.id, preflight);
        await this.say(`preflight of ${arm.id}: ${preflight.ok ? 'passed' : 'FAILED'}: ${preflight.detail}`);
      }
      const outcome = known ?? (preflight as PreflightRecord);
      if (!outcome.ok) {
        return this.record(
          run,
          startedAt,
          'endpoint',
          [],
          [],
          [`not started: preflight failed: ${outcome.detail}`],
          {
            preflight: outcome,
          },
        );
      }
    }

    await this.phase('resetting prefix caches');
    const resets = await this.resetCaches(servers, urls, pods);
    const preconditions = resets
      .filter((r) => r.verifiedBy === 'unverified')
      .map((r) => `replica ${r.pod}: prefix cache reset not verified: ${r.detail}`);

    if (run.reset.restartFrontEndOf && preconditions.length === 0) {
      await this.phase('restarting front end');
      const deployments = frontEnd(
        this.config,
        armById(this.config, run.reset.restartFrontEndOf),
      ).restartDeployments;
      for (const name of deployments) await cluster.restartDeployment(name, clock.now());
      for (const name of deployments) {
        const problem = await this.waitForRollout(name);
        if (problem) preconditions.push(problem);
      }
    }

    const reset: RunRecord['reset'] = resets.some((r) => r.method === 'pod-restart')
      ? 'pod-restart'
      : 'endpoint';
    const extra: RunExtras = { resets: resetRecords(resets), ...(preflight ? { preflight } : {}) };
    if (preconditions.length > 0) {
      // The run cannot measure anything: its Job is not started, so it loads no replica.
      return this.record(
        run,
        startedAt,
        reset,
        [],
        [],
        [...preconditions.map((p) => `not started: ${p}`)],
        extra,
      );
    }

    await this.phase('scraping metrics');
    const before = await this.scrape(urls);

    await this.phase('starting job');
    for (const { job } of jobs) await cluster.createJob(job);

    await this.phase('waiting for job');
    const outcomes = await this.waitForJobs(
      jobs.map(({ spec, job }) => ({ benchmarkId: spec.id, name: job.metadata.name })),
    );

    await this.phase('reading results');
    const readings: ResultFileReading[] = [];
    const clients: ClientRecord[] = [];
    for (const { spec, job } of jobs) {
      const text = await store.readClientResult(spec.id, spec.resultFile);
      const reading = { benchmarkId: spec.id, resultFile: spec.resultFile, text };
      readings.push(reading);
      const read = readResultFile(reading);
      clients.push({
        benchmarkId: spec.id,
        resultFile: spec.resultFile,
        prompts: spec.prompts,
        job: outcomes.get(job.metadata.name) ?? 'timed-out',
        ...('result' in read ? { result: read.result } : {}),
      });
      await this.saveClientLog(spec.id, job.metadata.name);
    }

    await this.phase('scraping metrics');
    const after = await this.scrape(urls);
    const scrapes: ReplicaScrapes[] = pods.map((pod, i) => ({
      replica: i,
      pod,
      ...(before[i].snapshot ? { before: before[i].snapshot } : { beforeError: before[i].error }),
      ...(after[i].snapshot ? { after: after[i].snapshot } : { afterError: after[i].error }),
    }));
    const replicas: ReplicaRecord[] = scrapes.map((s) => {
      const deltas = s.before && s.after ? counterDeltas(s.before, s.after) : undefined;
      return {
        replica: s.replica,
        pod: s.pod,
        requests: deltas?.requests ?? 0,
        queriedTokens: deltas?.queriedTokens ?? 0,
        hitTokens: deltas?.hitTokens ?? 0,
        hitRate: deltas?.hitRate ?? null,
        vllmSeries: s.after?.vllmSeries ?? 0,
      };
    });

    const source = arm ? promptEvidenceSource(arm.frontEnd, arm.api, run.dataset) : undefined;
    const evidence = arm && source ? await this.promptEvidenceOf(arm, source) : undefined;
    const reasons = runReasons({
      run,
      readings,
      clients,
      resets,
      scrapes,
      replicas,
      ...(evidence ? { promptEvidence: evidence } : {}),
    });
    return this.record(run, startedAt, reset, clients, replicas, reasons, {
      ...extra,
      ...(evidence ? { promptEvidence: evidence } : {}),
    });
  }

  private record(
    run: StudyRun,
    startedAt: Date,
    reset: RunRecord['reset'],
    clients: ClientRecord[],
    replicas: ReplicaRecord[],
    reasons: string[],
    extra: RunExtras = {},
  ): RunRecord {
    const summary = summarizeRun(clients, replicas);
    return {
      id: run.id,
      group: run.group,
      title: run.title,
      ...(run.arm ? { arm: run.arm } : {}),
      dataset: run.dataset,
      startedAt: startedAt.toISOString(),
      finishedAt: this.deps.clock.now().toISOString(),
      reset,
      ...(extra.resets ? { resets: extra.resets } : {}),
      ...(extra.preflight ? { preflight: extra.preflight } : {}),
      ...(extra.promptEvidence ? { promptEvidence: extra.promptEvidence } : {}),
      clients,
      replicas,
      ...(summary ? { summary } : {}),
      ...(run.upperBound !== undefined ? { upperBound: run.upperBound } : {}),
      valid: reasons.length === 0,
      invalidReasons: reasons,
    };
  }

  // ---- Cache reset ---------------------------------------------------------------------------

  /**
   * Resets every replica of a set and proves it (lab-spec 4.4): wait until the replica is idle,
   * POST /reset_prefix_cache, then find vLLM's own confirmation in the pod log written after the
   * call. A replica that stays busy, answers 404 (no dev mode) or anything but 200, whose log
   * says the reset was refused, or whose log confirms nothing, is restarted instead: a fresh
   * process has an empty cache. Only a restart that fails leaves the reset unverified.
   */
  private async resetCaches(
    servers: ServerSet,
    urls: readonly string[],
    pods: string[],
  ): Promise<ReplicaReset[]> {
    const resets: ReplicaReset[] = [];
    const restart: RestartNeeded[] = [];
    for (const [i, url] of urls.entries()) {
      const outcome = await this.resetReplica(i, url, pods[i]);
      if ('verifiedBy' in outcome) resets.push(outcome);
      else restart.push(outcome);
    }
    if (restart.length === 0) return resets;
    for (const r of restart)
      await this.say(`${pods[r.replica]}: ${r.why}; deleting the pod to reset its cache`);
    const problem = await this.restartReplicas(
      servers,
      urls,
      pods,
      restart.map((r) => r.replica),
    );
    for (const r of restart) {
      resets.push({
        replica: r.replica,
        pod: pods[r.replica],
        method: 'pod-restart',
        ...(r.status !== undefined ? { status: r.status } : {}),
        ...(problem
          ? { verifiedBy: 'unverified' as const, detail: `${r.why}; restarting the pod failed: ${problem}` }
          : {
              verifiedBy: 'pod-restart' as const,
              detail: `${r.why}; the pod was replaced (new uid), Ready and serving /v1/models`,
            }),
      });
    }
    return resets.sort((a, b) => a.replica - b.replica);
  }

  /** One replica's reset confirmed by its log, or why it needs a restart instead. */
  private async resetReplica(
    replica: number,
    url: string,
    pod: string,
  ): Promise<ReplicaReset | RestartNeeded> {
    const { clock, cluster } = this.deps;
    const busy = await this.waitUntilIdle(url);
    if (busy) return { replica, why: busy };

    const since = new Date(clock.now().getTime() - LOG_WINDOW_MARGIN_MS);
    const readCounts = async (): Promise<ResetLogCounts | string> => {
      try {
        return resetLogCounts(await cluster.podLog(pod, VLLM_CONTAINER, since));
      } catch (error) {
        return (error as Error).message;
      }
    };
    const baseline = await readCounts();

    let status: number;
    try {
      status = await this.deps.replicas.resetPrefixCache(url);
    } catch (error) {
      return { replica, why: `POST /reset_prefix_cache failed: ${(error as Error).message}` };
    }
    if (status === 404) {
      return { replica, status, why: '/reset_prefix_cache answered 404 (VLLM_SERVER_DEV_MODE not set?)' };
    }
    if (status !== 200) return { replica, status, why: `POST /reset_prefix_cache answered HTTP ${status}` };
    if (typeof baseline === 'string') {
      return {
        replica,
        status,
        why: `POST /reset_prefix_cache answered 200, but its log could not be read to confirm the reset (${baseline})`,
      };
    }

    const deadline = clock.now().getTime() + this.options.confirmTimeoutMs;
    let lastError = '';
    for (;;) {
      const counts = await readCounts();
      if (typeof counts === 'string') {
        lastError = counts;
      } else {
        if (counts.refused > baseline.refused) {
          return { replica, status, why: `vLLM refused the reset: "${counts.lastRefusal}"` };
        }
        if (counts.succeeded > baseline.succeeded) {
          return {
            replica,
            pod,
            method: 'endpoint',
            status,
            verifiedBy: 'log-confirmed',
            detail: `POST /reset_prefix_cache answered 200 and the log logged "${RESET_SUCCEEDED_MESSAGE}" after it`,
          };
        }
      }
      if (clock.now().getTime() >= deadline) {
        return {
          replica,
          status,
          why: `POST /reset_prefix_cache answered 200, but within ${formatElapsed(this.options.confirmTimeoutMs)} the log showed neither "${RESET_SUCCEEDED_MESSAGE}" nor a refusal${lastError ? ` (last read: ${lastError})` : ''}`,
        };
      }
      await clock.sleep(Math.min(this.options.pollIntervalMs, 1_000));
    }
  }

  /**
   * Waits until a replica runs and queues no request (vLLM refuses a reset while blocks are in
   * use); undefined when idle, else why it is not.
   */
  private async waitUntilIdle(url: string): Promise<string | undefined> {
    const { clock } = this.deps;
    const deadline = clock.now().getTime() + this.options.idleTimeoutMs;
    for (;;) {
      let state: string;
      try {
        const snapshot = vllmSnapshot(await this.deps.replicas.metrics(url));
        const idle = replicaIdle(snapshot);
        if (idle) return undefined;
        state =
          idle === undefined
            ? `/metrics lacks ${REQUESTS_RUNNING} or ${REQUESTS_WAITING}`
            : `${snapshot.requestsRunning} running, ${snapshot.requestsWaiting} waiting`;
      } catch (error) {
        state = `/metrics not read: ${(error as Error).message}`;
      }
      if (clock.now().getTime() >= deadline) {
        return `still busy after ${formatElapsed(this.options.idleTimeoutMs)} (${state})`;
      }
      await this.progress();
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  /** Deletes replica pods and waits until new ones are ready and serve /v1/models; a problem or undefined. */
  private async restartReplicas(
    servers: ServerSet,
    urls: readonly string[],
    pods: string[],
    indices: number[],
  ): Promise<string | undefined> {
    const { cluster, clock } = this.deps;
    const selector = `app=${replicaSetName(this.config, servers)}`;
    const oldUids = new Map((await cluster.listPods(selector)).map((p) => [p.name, p.uid]));
    for (const i of indices) await cluster.deletePod(pods[i]);
    const deadline = clock.now().getTime() + this.options.podRestartTimeoutMs;
    const waiting = new Set(indices);
    while (waiting.size > 0) {
      const current = new Map((await cluster.listPods(selector)).map((p) => [p.name, p]));
      for (const i of [...waiting]) {
        const pod = current.get(pods[i]);
        if (!pod || pod.uid === oldUids.get(pods[i]) || !pod.ready) continue;
        if ((await this.modelsStatus(urls[i])) === 200) waiting.delete(i);
      }
      if (waiting.size === 0) break;
      if (clock.now().getTime() >= deadline) {
        return `pod restart did not bring ${[...waiting].map((i) => pods[i]).join(', ')} back to serving /v1/models within ${formatElapsed(this.options.podRestartTimeoutMs)}`;
      }
      await this.progress();
      await clock.sleep(this.options.pollIntervalMs);
    }
    return undefined;
  }

  private async modelsStatus(url: string): Promise<number | undefined> {
    try {
      return await this.deps.replicas.models(url);
    } catch {
      return undefined;
    }
  }

  /** Every replica of a set serves /v1/models (/health can pass before the engine serves). */
  private async waitForReplicas(servers: ServerSet): Promise<void> {
    const { clock } = this.deps;
    const urls = this.options.replicaUrls(servers);
    const deadline = clock.now().getTime() + this.options.startupTimeoutMs;
    const waiting = new Set(urls);
    let said = false;
    for (;;) {
      for (const url of [...waiting]) if ((await this.modelsStatus(url)) === 200) waiting.delete(url);
      if (waiting.size === 0) return;
      if (clock.now().getTime() >= deadline) {
        throw new Error(
          `replicas ${[...waiting].join(', ')} did not serve /v1/models within ${formatElapsed(this.options.startupTimeoutMs)}`,
        );
      }
      if (!said) {
        await this.say(
          `waiting for ${waiting.size} replica(s) of ${replicaSetName(this.config, servers)} to serve /v1/models`,
        );
        said = true;
      }
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  // ---- Front ends and Jobs -------------------------------------------------------------------

  /** Waits for a restarted Deployment's rollout; a problem or undefined. */
  private async waitForRollout(name: string): Promise<string | undefined> {
    const { cluster, clock } = this.deps;
    const deadline = clock.now().getTime() + this.options.rolloutTimeoutMs;
    for (;;) {
      const state = await cluster.getDeployment(name);
      if (!state) return `front end deployment/${name} does not exist`;
      if (rolloutComplete(state)) return undefined;
      if (clock.now().getTime() >= deadline) {
        return `front end deployment/${name} was not ready within ${formatElapsed(this.options.rolloutTimeoutMs)} of its restart (${state.available}/${state.desired} available, ${state.updated} updated)`;
      }
      await this.progress();
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  /** Deletes a previous Job of the same name and waits until it and its pods are gone. */
  private async deletePreviousJob(name: string): Promise<void> {
    if (!(await this.deps.cluster.getJob(name))) return;
    await this.say(`deleting the previous job/${name}`);
    await this.deleteJobAndWait(name);
  }

  /**
   * Deletes a Job (foreground propagation) and waits until it and its pods are gone, so none of
   * its pods sends requests into a later run. Throws when they outlive the rollout timeout.
   */
  private async deleteJobAndWait(name: string): Promise<void> {
    const { cluster, clock } = this.deps;
    await cluster.deleteJob(name);
    const deadline = clock.now().getTime() + this.options.rolloutTimeoutMs;
    while ((await cluster.getJob(name)) || (await cluster.listPods(`job-name=${name}`)).length > 0) {
      if (clock.now().getTime() >= deadline)
        throw new Error(
          `job/${name} and its pods were not gone within ${formatElapsed(this.options.rolloutTimeoutMs)} of its deletion`,
        );
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  /**
   * Polls the Jobs until each has succeeded or failed (status counts, lab-spec 4.4); a failed
   * Job counts as finished at the first poll that sees it. Jobs still running at the timeout are
   * recorded as timed out, their client log is saved, and they are deleted and waited for until
   * they and their pods are gone, so they stop loading the replicas before anything else happens.
   */
  private async waitForJobs(
    jobs: readonly { readonly benchmarkId: string; readonly name: string }[],
  ): Promise<Map<string, JobOutcome>> {
    const { cluster, clock } = this.deps;
    const names = jobs.map((j) => j.name);
    const outcomes = new Map<string, JobOutcome>();
    const deadline = clock.now().getTime() + this.options.jobTimeoutMs;
    for (;;) {
      for (const name of names) {
        if (outcomes.has(name)) continue;
        const status = await cluster.getJob(name);
        // A Job deleted under the runner cannot have succeeded.
        const outcome = status ? jobOutcome(status) : 'failed';
        if (outcome) {
          outcomes.set(name, outcome);
          if (outcome === 'failed') await this.say(`job/${name} failed (status.failed)`);
        }
      }
      if (outcomes.size === names.length) return outcomes;
      if (clock.now().getTime() >= deadline) {
        for (const { benchmarkId, name } of jobs) {
          if (outcomes.has(name)) continue;
          outcomes.set(name, 'timed-out');
          await this.say(
            `job/${name} did not finish within ${formatElapsed(this.options.jobTimeoutMs)}; deleting it`,
          );
          // Its pods are gone once it is deleted: keep the log of the run it did not finish.
          await this.saveClientLog(benchmarkId, name);
          await this.deleteJobAndWait(name);
        }
        return outcomes;
      }
      await this.progress();
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  private async saveClientLog(benchmarkId: string, jobName: string): Promise<void> {
    try {
      const pods = await this.deps.cluster.listPods(`job-name=${jobName}`);
      const logs = await Promise.all(pods.map((p) => this.deps.cluster.podLog(p.name)));
      if (logs.length > 0) await this.deps.store.writeClientLog(benchmarkId, logs.join('\n'));
    } catch (error) {
      await this.say(`could not save the log of job/${jobName}: ${(error as Error).message}`);
    }
  }

  // ---- Preflight and prompt evidence ---------------------------------------------------------

  /**
   * Before an arm's first run: the status conditions its path needs are True (the AI Gateway's
   * route and Gateway), and one tiny request through its front end reaches a replica of its
   * server set (a replica's `vllm:request_success_total` grows).
   */
  private async preflight(arm: Arm): Promise<PreflightRecord> {
    const { cluster, clock } = this.deps;
    const problems: string[] = [];
    for (const check of this.options.statusChecks[arm.id] ?? []) {
      try {
        problems.push(...statusProblems(check, await cluster.resourceStatus(check)));
      } catch (error) {
        problems.push(
          `${check.kind} ${check.namespace}/${check.name}: status not read: ${(error as Error).message}`,
        );
      }
    }
    if (problems.length > 0) return { ok: false, detail: problems.join('; ') };

    const urls = this.options.replicaUrls(arm.servers);
    const pods = urls.map((_, i) => `${replicaSetName(this.config, arm.servers)}-${i}`);
    const counts = async (): Promise<(number | undefined)[]> =>
      (await this.scrape(urls)).map((s) => s.snapshot?.requestSuccess);
    const before = await counts();
    const unread = before.flatMap((n, i) => (n === undefined ? [pods[i]] : []));
    if (unread.length > 0) {
      return { ok: false, detail: `vllm:request_success_total of ${unread.join(', ')} could not be read` };
    }
    const target = `POST ${this.options.frontEndUrl(arm).replace(/\/+$/, '')}${apiPath(arm.api)}`;
    try {
      const answer = await this.deps.frontEnds.complete(
        this.options.frontEndUrl(arm),
        arm.api,
        this.config.model.servedName,
      );
      if (answer.status !== 200) {
        return { ok: false, detail: `${target} answered HTTP ${answer.status}: ${answer.body.trim()}` };
      }
    } catch (error) {
      return { ok: false, detail: `${target}: ${(error as Error).message}` };
    }
    const deadline = clock.now().getTime() + this.options.confirmTimeoutMs;
    for (;;) {
      const now = await counts();
      const grew = now.flatMap((n, i) => (n !== undefined && n > (before[i] as number) ? [pods[i]] : []));
      if (grew.length > 0) {
        return { ok: true, detail: `${target} answered 200 and ${grew.join(', ')} counted it` };
      }
      if (clock.now().getTime() >= deadline) {
        return {
          ok: false,
          detail: `${target} answered 200, but no replica of ${replicaSetName(this.config, arm.servers)} counted a finished request within ${formatElapsed(this.options.confirmTimeoutMs)}`,
        };
      }
      await clock.sleep(Math.min(this.options.pollIntervalMs, 1_000));
    }
  }

  /** Reads the arm's EPP metrics after a run and judges whether it saw the prompts. */
  private async promptEvidenceOf(arm: Arm, source: PromptEvidenceSource): Promise<PromptEvidence> {
    let scrape: EppScrape;
    try {
      scrape = {
        snapshot: eppSnapshot(await this.deps.endpointPickers.metrics(this.options.eppMetricsUrl(arm))),
      };
    } catch (error) {
      scrape = { error: (error as Error).message };
    }
    const reader = promptReader(this.config, arm.frontEnd);
    const component = reader ? `${reader.component} ${reader.version}` : arm.frontEnd;
    return promptEvidence(source, component, scrape);
  }

  // ---- Metrics -------------------------------------------------------------------------------

  private async scrape(urls: readonly string[]): Promise<{ snapshot?: VllmSnapshot; error?: string }[]> {
    return Promise.all(
      urls.map(async (url) => {
        try {
          return { snapshot: vllmSnapshot(await this.deps.replicas.metrics(url)) };
        } catch (error) {
          return { error: (error as Error).message };
        }
      }),
    );
  }

  // ---- Study record and metadata -------------------------------------------------------------

  private async applyStudyChecks(changedId: string): Promise<void> {
    const ordered = this.plan.runs.flatMap((run) => this.records.get(run.id) ?? []);
    const kv = this.metadata?.kvCacheTokens ?? this.config.vllm.kvCacheTokensPerReplica;
    const checked = withStudyChecks(this.plan.runs, ordered, kv);
    for (const record of checked) {
      const previous = this.records.get(record.id);
      const changed =
        record.id === changedId ||
        previous?.valid !== record.valid ||
        previous?.invalidReasons.join('\n') !== record.invalidReasons.join('\n');
      this.records.set(record.id, record);
      if (changed) await this.deps.store.writeRun(record);
    }
    await this.writeStudy();
  }

  private async writeStudy(): Promise<StudyRecord> {
    const study: StudyRecord = {
      schemaVersion: STUDY_SCHEMA_VERSION,
      metadata: this.metadata as StudyMetadata,
      runs: this.plan.runs.flatMap((run) => this.records.get(run.id) ?? []),
    };
    await this.deps.store.writeStudy(study);
    return study;
  }

  private async collectMetadata(): Promise<StudyMetadata> {
    const { store, cluster } = this.deps;
    const notes: string[] = [];
    const c = this.config;
    const versions: Record<string, string> = {
      vllm: c.vllm.image,
      benchmarkClient: c.benchmark.image,
      model: c.model.name,
      vllmRouter: c.router.version,
      vllmRouterImage: c.router.image,
      gaie: c.gaie.version,
      epp: c.gaie.eppImage,
      envoy: c.envoy.image,
      devicePlugin: c.devicePlugin.image,
      k3sConfigured: c.k3s.version,
      runner: c.runner.image,
    };
    const optional = new Set<string>(c.study.optionalArms);
    if (optional.has('ai-gateway')) {
      versions.envoyGateway = c.aiGateway.envoyGatewayVersion;
      versions.aiGateway = c.aiGateway.aiGatewayVersion;
    }
    if (optional.has('llmd-precise')) versions.llmdScheduler = c.llmd.eppImage;

    let gpuUuids: Record<string, string> = {};
    const uuids = await store.readHostFile(GPU_UUIDS_FILE);
    if (uuids === undefined) {
      notes.push(
        `${GPU_UUIDS_FILE} not found in the results folder: GPU UUIDs not recorded (the runner pod has no GPU and cannot run nvidia-smi -L; the host's bootstrap writes this file)`,
      );
    } else {
      try {
        const parsed = JSON.parse(uuids) as unknown;
        if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
        gpuUuids = Object.fromEntries(Object.entries(parsed).map(([k, v]) => [k, String(v)]));
      } catch (error) {
        notes.push(`${GPU_UUIDS_FILE} is not a JSON object of name to UUID (${(error as Error).message})`);
      }
    }
    const topology = await store.readHostFile(GPU_TOPOLOGY_FILE);
    if (topology === undefined) notes.push(`${GPU_TOPOLOGY_FILE} not found: nvidia-smi topo -m not recorded`);

    let host: { instanceType?: unknown; availabilityZone?: unknown; k3sVersion?: unknown } = {};
    const hostText = await store.readHostFile(HOST_FILE);
    if (hostText !== undefined) {
      try {
        host = JSON.parse(hostText);
      } catch (error) {
        notes.push(`${HOST_FILE} is not JSON (${(error as Error).message})`);
      }
    }

    let k3sVersion: string | undefined;
    try {
      k3sVersion = await cluster.serverVersion();
    } catch (error) {
      notes.push(`API server version not read: ${(error as Error).message}`);
      if (typeof host.k3sVersion === 'string') k3sVersion = host.k3sVersion;
    }

    let kvCacheTokens: number | undefined;
    const pod = `${replicaSetName(c, 'standard')}-0`;
    try {
      kvCacheTokens = kvCacheTokensFromLog(await cluster.podLog(pod, VLLM_CONTAINER));
      if (kvCacheTokens === undefined) notes.push(`"GPU KV cache size" not found in the log of ${pod}`);
    } catch (error) {
      notes.push(`log of ${pod} not read: ${(error as Error).message}`);
    }
    if (kvCacheTokens !== undefined && kvCacheTokens !== c.vllm.kvCacheTokensPerReplica) {
      notes.push(
        `${pod} logged a KV cache of ${kvCacheTokens} tokens; the configuration (vllm.kvCacheTokensPerReplica) assumed ${c.vllm.kvCacheTokensPerReplica}`,
      );
    }

    return {
      startedAt: this.startedAt.toISOString(),
      config: c,
      versions,
      ...(typeof host.instanceType === 'string' ? { instanceType: host.instanceType } : {}),
      ...(typeof host.availabilityZone === 'string' ? { availabilityZone: host.availabilityZone } : {}),
      gpuUuids,
      ...(topology !== undefined ? { gpuTopology: topology } : {}),
      ...(kvCacheTokens !== undefined ? { kvCacheTokens } : {}),
      ...(k3sVersion ? { k3sVersion } : {}),
      ...(notes.length > 0 ? { notes } : {}),
      // Issue 13: the predictions this study runs with, so a report made later shows the same ones.
      predictions: studyPredictions(c, kvCacheTokens),
    };
  }

  // ---- Progress ------------------------------------------------------------------------------

  private async phase(phase: string): Promise<void> {
    if (!this.current) return;
    this.current = { ...this.current, phase };
    this.lastProgressAt = this.deps.clock.now().getTime();
    await this.say(this.progressText());
    await this.writeStatus();
  }

  /** Status on every poll, a log line every `progressEveryMs`. */
  private async progress(): Promise<void> {
    const now = this.deps.clock.now().getTime();
    if (this.current && now - this.lastProgressAt >= this.options.progressEveryMs) {
      this.lastProgressAt = now;
      await this.say(this.progressText());
    }
    await this.writeStatus();
  }

  private eta(): { elapsedMs: number; etaMs: number | undefined } {
    if (!this.current) return { elapsedMs: 0, etaMs: undefined };
    const elapsedMs = this.deps.clock.now().getTime() - this.current.startedAt.getTime();
    const durations = [...this.records.values()]
      .filter((r) => r.id !== this.current?.run.id)
      .map((r) => Date.parse(r.finishedAt) - Date.parse(r.startedAt));
    const after = this.plan.runs
      .slice(this.current.index)
      .filter((run) => !this.records.get(run.id)?.valid).length;
    return { elapsedMs, etaMs: studyEtaMs(durations, elapsedMs, after) };
  }

  private progressText(): string {
    if (!this.current) return this.message;
    const { elapsedMs, etaMs } = this.eta();
    const { index, run, phase } = this.current;
    return progressLine(index, this.plan.runs.length, run.id, phase, elapsedMs, etaMs);
  }

  private async say(line: string): Promise<void> {
    this.message = line;
    this.deps.log(line);
    await this.deps.store.appendLog(`${this.deps.clock.now().toISOString()} ${line}`);
  }

  private async writeStatus(error?: string): Promise<void> {
    const records = [...this.records.values()];
    const { elapsedMs, etaMs } = this.eta();
    const status: StudyStatus = {
      state: this.state,
      startedAt: this.startedAt.toISOString(),
      updatedAt: this.deps.clock.now().toISOString(),
      totalRuns: this.plan.runs.length,
      recordedRuns: records.length,
      validRuns: records.filter((r) => r.valid).length,
      invalidRuns: records.filter((r) => !r.valid).length,
      ...(this.current && this.state !== 'finished'
        ? {
            current: {
              index: this.current.index,
              id: this.current.run.id,
              phase: this.current.phase,
              startedAt: this.current.startedAt.toISOString(),
              elapsedSeconds: Math.round(elapsedMs / 1000),
            },
          }
        : {}),
      ...(etaMs !== undefined && this.state === 'running' ? { etaSeconds: Math.round(etaMs / 1000) } : {}),
      message: this.message,
      ...(error ? { error } : {}),
    };
    await this.deps.store.writeStatus(status);
  }
}
