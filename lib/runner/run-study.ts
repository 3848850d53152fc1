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
import { pairSuffix } from '../study/pairs.ts';
import { runPrerequisites, type StudyPlan, type StudyRun } from '../study/plan.ts';
import { studyPredictions } from '../study/planner.ts';
import { promptReader } from '../study/prompt-visibility.ts';
import {
  type ClientRecord,
  type JobOutcome,
  type PreflightRecord,
  type PromptEvidence,
  type ReplicaRecord,
  type RunAttempt,
  type RunRecord,
  STUDY_SCHEMA_VERSION,
  type StudyMetadata,
  type StudyRecord,
  summarizeRun,
} from '../study/results.ts';
import { stagedAfter } from '../study/staging.ts';
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
  identicalPrefixStop,
  jobOutcome,
  noMetricsStop,
  type PromptEvidenceSource,
  promptEvidence,
  promptEvidenceSource,
  type ReplicaReset,
  type ReplicaScrapes,
  type ResultFileReading,
  readResultFile,
  replicaRestarted,
  replicaRestartReasons,
  resetRecords,
  runReasons,
  type StudyStopVerdict,
  withStudyChecks,
} from '../study/validity.ts';
import { apiPath } from './http-front-ends.ts';
import { GPU_TOPOLOGY_FILE, GPU_UUIDS_FILE, HOST_FILE } from './layout.ts';
import type { Cluster, DeploymentState, Replicas, RunnerDeps, StudyFiles } from './ports.ts';
import { type StatusChecks, statusProblems } from './preflight.ts';
import { DEFAULT_RETRY_POLICY, type RetryPolicy, retryingCluster, retryingReplicas } from './retry.ts';
import { type Opening, type Staged, Stager, stagingRecord } from './stager.ts';
import {
  formatElapsed,
  ProgressTimer,
  progressLine,
  type StudyState,
  studyEtaMs,
  studyStatus,
} from './status.ts';
import { chooseStudyFolder, readStudyRecords, StudyWrites } from './study-files.ts';
import { chooseStudy } from './study-id.ts';
import { StudyLog } from './study-log.ts';

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
   * connection errors.
   * @default 5 tries, 1 s doubling up to 30 s
   */
  readonly retry?: RetryPolicy;
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

type Resolved<T> = { readonly [K in keyof T]-?: T[K] };

/** The optional parts of a run record besides its measurements. */
interface RunExtras {
  readonly resets?: RunRecord['resets'];
  readonly preflight?: PreflightRecord;
  readonly promptEvidence?: PromptEvidence;
  readonly staging?: RunRecord['staging'];
}

/** Container of the vLLM replicas (charts/model-servers.ts), whose log names the KV cache size. */
const VLLM_CONTAINER = 'vllm';
/**
 * The log read that confirms a reset starts this long before the call: `sinceTime` has whole
 * seconds and node and runner clocks may differ. Lines before the call are counted in the
 * baseline read of the same window, so they never pass for a confirmation.
 */
const LOG_WINDOW_MARGIN_MS = 60_000;

/** A run in progress. */
interface ActiveRun {
  readonly index: number;
  readonly run: StudyRun;
  readonly startedAt: Date;
  readonly phase: string;
}

/** A reset that needs a pod restart instead, and why. */
interface RestartNeeded {
  readonly replica: number;
  readonly why: string;
  readonly status?: number;
}

/**
 * Executes the study plan in order (docs/facts.md §4.2) and records every run with its validity
 * (docs/facts.md §4.3, 4.4) in the results folder. Resumable: a run whose valid record exists is
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
    jobPollIntervalMs: options.jobPollIntervalMs ?? 1_000,
    unschedulableTimeoutMs: options.unschedulableTimeoutMs ?? 5 * 60_000,
    progressEveryMs: options.progressEveryMs ?? 60_000,
    rolloutTimeoutMs: options.rolloutTimeoutMs ?? 15 * 60_000,
    podRestartTimeoutMs: options.podRestartTimeoutMs ?? 30 * 60_000,
    startupTimeoutMs: options.startupTimeoutMs ?? 90 * 60_000,
    idleTimeoutMs: options.idleTimeoutMs ?? 5 * 60_000,
    confirmTimeoutMs: options.confirmTimeoutMs ?? 30_000,
    readyTimeoutMs: options.readyTimeoutMs ?? 10 * 60_000,
    retry: options.retry ?? DEFAULT_RETRY_POLICY,
    replicaUrls: options.replicaUrls ?? ((servers, pair) => replicaUrls(config, servers, pair)),
    frontEndUrl:
      options.frontEndUrl ?? ((arm, pair) => targetBaseUrl(config, { kind: 'arm', arm: arm.id, pair })),
    eppMetricsUrl:
      options.eppMetricsUrl ??
      ((arm, pair) =>
        `http://${eppName(config, arm.frontEndId, pair)}.${config.namespace}.svc.cluster.local:${EPP_METRICS_PORT}`),
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

/** A study-level check proved the rest of the study cannot be valid: stop before spending more. */
export class StudyStopError extends Error {
  constructor(readonly verdict: StudyStopVerdict) {
    super(`${verdict.reason}. To change: ${verdict.change}`);
    this.name = 'StudyStopError';
  }
}

/** An earlier attempt as kept in the record of the next one. */
function asAttempt(record: RunRecord, retriedBecause: string): RunAttempt {
  const { attempts: _nested, ...attempt } = record;
  return { ...attempt, retriedBecause };
}

class StudyRunner {
  private readonly startedAt: Date;
  private records = new Map<string, RunRecord>();
  private metadata: StudyMetadata | undefined;
  private state: StudyState = 'starting';
  /** The runs in progress (several while a wave of bound runs runs at once), by run id. */
  private readonly active = new Map<string, ActiveRun>();
  private readonly progressTimer: ProgressTimer;
  /** Each arm's preflight (per replica pair), once per runner process, before the first run. */
  private readonly preflights = new Map<string, PreflightRecord>();
  /** Preflights already kept in a run record (the arm's first run in this process). */
  private readonly preflightsRecorded = new Set<string>();
  /** The runs this process finished (recorded or stopped), for staging's prerequisites. */
  private readonly finished = new Set<string>();
  private readonly prerequisites: Map<string, string[]>;
  /** The next run's clients, started behind closed gates while a run runs (lib/study/staging.ts). */
  private readonly stager: Stager;
  /** The Kubernetes API and the replicas, with retries on transient faults (retry.ts). */
  private readonly cluster: Cluster;
  private readonly replicas: Replicas;
  /** The study folder, once the study is chosen; lines logged before that wait in `log`. */
  private files: StudyFiles | undefined;
  private studyId: string | undefined;
  private readonly log: StudyLog;
  private readonly studyWrites = new StudyWrites();

  constructor(
    private readonly deps: RunnerDeps,
    private readonly config: LabConfig,
    private readonly plan: StudyPlan,
    private readonly options: Resolved<RunnerOptions>,
  ) {
    this.startedAt = deps.clock.now();
    this.log = new StudyLog(deps.clock, deps.log);
    this.progressTimer = new ProgressTimer(options.progressEveryMs);
    const retry = { policy: options.retry, clock: deps.clock, log: (line: string) => this.say(line) };
    this.cluster = retryingCluster(deps.cluster, retry);
    this.replicas = retryingReplicas(deps.replicas, retry);
    this.prerequisites = runPrerequisites(plan);
    this.stager = new Stager({
      config,
      cluster: this.cluster,
      clock: deps.clock,
      jobManifest: deps.jobManifest,
      say: (line) => this.say(line),
      deleteJobAndWait: (name) => this.deleteJobAndWait(name),
      // The earlier run may take its Job timeout twice (a retry), then this run's waits.
      readyCheckTimeoutSeconds:
        (2 * options.jobTimeoutMs +
          options.readyTimeoutMs +
          options.podRestartTimeoutMs +
          options.idleTimeoutMs +
          options.rolloutTimeoutMs) /
        1000,
    });
  }

  async run(): Promise<StudyRecord> {
    try {
      return await this.execute();
    } catch (error) {
      this.state = 'failed';
      const message = (error as Error).message;
      if (error instanceof StudyStopError && this.metadata && this.files) {
        this.metadata = {
          ...this.metadata,
          stopped: { at: this.deps.clock.now().toISOString(), ...error.verdict },
        };
        await this.writeStudy();
      }
      await this.say(`study stopped: ${message}`);
      await this.dropStaged();
      await this.writeStatus(message);
      throw error;
    }
  }

  private async execute(): Promise<StudyRecord> {
    const { store } = this.deps;
    // Each study has its own folder: the latest unfinished one of this configuration is
    // resumed (restored from S3 by the bootstrap on a new host), or a new one is started.
    const say = (line: string) => this.say(line);
    const { choice, files } = await chooseStudyFolder(
      store,
      (studies, fresh) => chooseStudy(studies, this.config, this.startedAt, fresh),
      say,
    );
    this.studyId = choice.id;
    this.files = files;
    this.log.attach(files);
    const runIds = this.plan.runs.map((r) => r.id);
    const { existing, records } = await readStudyRecords(files, choice, runIds, say);
    this.records = records;
    const pending = this.plan.runs.filter((run) => !this.records.get(run.id)?.valid);
    await this.say(
      existing
        ? `resuming study ${choice.id} (${choice.why}): ${this.plan.runs.length - pending.length} of ${this.plan.runs.length} runs have a valid record`
        : `starting study ${choice.id} (${choice.why}): ${this.plan.runs.length} runs`,
    );
    await this.writeStatus();

    const sets = new Map(pending.map((run) => [replicaSetOf(this.config, run), run.reset]));
    for (const { prefixCaches, pair } of sets.values())
      await this.waitForReplicas(prefixCaches, pair ?? 0, this.options.startupTimeoutMs);

    if (existing) {
      const { finishedAt: _previous, stopped: _stopped, ...kept } = existing.metadata;
      this.metadata = { ...kept, studyId: choice.id };
    } else {
      this.metadata = await this.collectMetadata();
    }
    await this.writeStudy();

    try {
      await this.stager.clearLeftovers();
    } catch (error) {
      await this.say(`leftover gates not cleared: ${(error as Error).message}`);
    }
    await this.preflightArms(pending);

    this.state = 'running';
    await this.runInOrder();
    await this.dropStaged();
    this.active.clear();
    this.state = 'finished';
    this.metadata = { ...(this.metadata as StudyMetadata), finishedAt: this.deps.clock.now().toISOString() };
    const study = await this.writeStudy();
    const valid = study.runs.filter((r) => r.valid).length;
    await this.say(`study finished: ${valid} of ${study.runs.length} runs valid`);
    await this.writeStatus();
    return study;
  }

  /**
   * Every run of the plan, each as soon as the earlier runs it waits for have ended
   * (`runPrerequisites`): the bound sweep one run per replica at once, and with
   * `study.parallelism: 2` each replica pair through its own runs beside the other. Once a run
   * stops the study, no further run starts; the runs already going finish and are recorded, then
   * the stop of the earliest run in plan order is thrown (runs at once may each find it).
   */
  private async runInOrder(): Promise<void> {
    const position = new Map(this.plan.runs.map((run, i) => [run.id, i + 1]));
    const after = runPrerequisites(this.plan);
    const ended = new Map<string, Promise<void>>();
    let stop: { index: number; error: unknown } | undefined;
    const stopAt = (index: number, error: unknown) => {
      if (!stop || index < stop.index) stop = { index, error };
    };
    /** Runs that started in this process, those going now, and which runs ran beside each. */
    const started = new Set<string>();
    const running = new Set<string>();
    const beside = new Map<string, Set<string>>();
    const step = async (run: StudyRun): Promise<void> => {
      const index = position.get(run.id) as number;
      const total = this.plan.runs.length;
      if (stop) return;
      if (this.records.get(run.id)?.valid) {
        await this.say(`run ${index}/${total} ${run.id}: valid record exists, skipped`);
        return;
      }
      // Before any await, so that runs starting together see each other.
      const others = [...running];
      running.add(run.id);
      started.add(run.id);
      beside.set(run.id, new Set(others));
      for (const other of others) beside.get(other)?.add(run.id);
      if (others.length > 0)
        await this.say(`run ${index}/${total} ${run.id} runs beside ${others.join(', ')}`);
      const done = await this.runWithRetry(index, run);
      running.delete(run.id);
      this.finished.add(run.id);
      if (done.record) {
        const overlapped = [...(beside.get(run.id) ?? [])];
        this.records.set(
          run.id,
          overlapped.length > 0 ? { ...done.record, overlappedWith: overlapped } : done.record,
        );
      }
      if ('error' in done) {
        stopAt(index, done.error);
        if (done.record) await this.applyStudyChecks(run.id);
        return;
      }
      this.active.delete(run.id);
      await this.applyStudyChecks(run.id);
      const saved = this.records.get(run.id) as RunRecord;
      await this.say(
        `run ${index}/${total} ${run.id}: ${saved.valid ? 'valid' : `INVALID: ${saved.invalidReasons.join('; ')}`}`,
      );
      const verdict = identicalPrefixStop(
        [...this.records.values()],
        this.plan.runs.filter((r) => !started.has(r.id) && !this.records.get(r.id)?.valid),
        this.config.benchmark.image,
      );
      if (verdict) stopAt(index, new StudyStopError(verdict));
    };
    for (const run of this.plan.runs) {
      const waits = (after.get(run.id) ?? []).map((id) => ended.get(id));
      ended.set(
        run.id,
        Promise.all(waits)
          .then(() => step(run))
          .catch((error: unknown) => stopAt(position.get(run.id) as number, error)),
      );
    }
    await Promise.all(ended.values());
    if (stop) throw stop.error;
  }

  /**
   * A run, with the attempts it needs: an invalid record of an earlier runner becomes its first
   * attempt(s), and a run during which a replica restarted is tried once more from a fresh,
   * verified reset (the readiness wait before it rides out the restart). Never throws: a failure
   * comes back as `error`, with the record of an attempt that finished before it, so that runs of
   * the same wave can all be recorded first.
   */
  private async runWithRetry(
    index: number,
    run: StudyRun,
  ): Promise<{ record: RunRecord } | { error: unknown; record?: RunRecord }> {
    const earlier = this.records.get(run.id);
    const resumed = earlier
      ? [
          ...(earlier.attempts ?? []),
          asAttempt(earlier, 'the study was resumed and this run had no valid record'),
        ]
      : [];
    let record: RunRecord;
    try {
      record = await this.attemptRun(index, run, resumed);
    } catch (error) {
      return { error };
    }
    if (!replicaRestarted(record)) return { record };
    await this.say(
      `run ${index}/${this.plan.runs.length} ${run.id}: a replica restarted during it; trying again once`,
    );
    try {
      return {
        record: await this.attemptRun(index, run, [
          ...(record.attempts ?? []),
          asAttempt(record, 'a replica restarted during the run'),
        ]),
      };
    } catch (error) {
      // A stop during the second attempt keeps the first one on record.
      return { error, record };
    }
  }

  /**
   * One attempt of a run, after `earlier` ones: the client files already in the study folder are
   * moved aside first (the last attempt's, or those of an attempt a killed runner never
   * recorded), so this attempt never overwrites them, and the earlier attempts stay in the record.
   */
  private async attemptRun(index: number, run: StudyRun, earlier: readonly RunAttempt[]): Promise<RunRecord> {
    const last = earlier.at(-1);
    const label = last
      ? String(last.attempt ?? earlier.length)
      : `unrecorded-${this.deps.clock.now().getTime()}`;
    const moved = await this.studyFiles().archiveAttempt(
      run.id,
      label,
      run.benchmarks.map((spec) => ({ benchmarkId: spec.id, resultFile: spec.resultFile })),
    );
    if (moved > 0)
      await this.say(
        `${run.id}: kept ${moved} client file(s) of the earlier attempt in attempts/${run.id}/${label}/`,
      );
    const record = await this.executeRun(index, run);
    return earlier.length > 0 ? { ...record, attempt: earlier.length + 1, attempts: earlier } : record;
  }

  private studyFiles(): StudyFiles {
    if (!this.files) throw new Error('internal: the study folder is used before the study was chosen');
    return this.files;
  }

  // ---- One run -----------------------------------------------------------------------------

  private async executeRun(index: number, run: StudyRun): Promise<RunRecord> {
    const startedAt = this.deps.clock.now();
    this.active.set(run.id, { index, run, startedAt, phase: 'starting' });
    // Clients started behind closed gates during the run before (lib/study/staging.ts): they
    // send nothing until their gates open, after this run's reset.
    const staged = this.stager.take(run.id);
    const gates: { opening?: Opening } = {};
    try {
      return await this.measureRun(run, startedAt, staged, gates);
    } finally {
      // Nothing staged outlives its run: gates that opened are closed, clients that never went
      // are deleted (a fallback already removed its own).
      if (staged && gates.opening && 'openedAt' in gates.opening) await this.stager.closeGates(staged);
      else if (staged && !gates.opening) await this.stager.drop(staged);
    }
  }

  private async measureRun(
    run: StudyRun,
    startedAt: Date,
    staged: Staged | undefined,
    gates: { opening?: Opening },
  ): Promise<RunRecord> {
    const { clock, store } = this.deps;
    const { cluster } = this;
    const servers = run.reset.prefixCaches;
    const pair = run.reset.pair ?? 0;
    const allUrls = this.options.replicaUrls(servers, pair);
    // A bound run owns one replica; the bound runs beside it own the others.
    const indices = run.reset.replicas ?? allUrls.map((_, i) => i);
    const urls = indices.map((i) => allUrls[i]);
    const pods = indices.map((i) => `${replicaSetName(this.config, servers, pair)}-${i}`);
    const jobs = run.benchmarks.map((spec) => ({ spec, job: this.deps.jobManifest(spec) }));

    // Lab-spec 4.4: a Job of an earlier attempt of this run (a resumed study) and its pods are
    // gone before anything else happens, so their requests cannot warm the caches reset below.
    // A staged client is this attempt's, still waiting at its closed gate.
    await this.phase(run, 'clearing earlier attempts');
    for (const { spec, job } of jobs) {
      if (!staged) await this.deletePreviousJob(job.metadata.name);
      await store.removeClientResult(spec.id, spec.resultFile);
    }

    // A replica that restarted (or a front end that crashed) since the last run is waited for,
    // bounded, instead of turning this run and every later one invalid within seconds.
    const arm = run.arm ? armById(this.config, run.arm) : undefined;
    await this.phase(run, 'waiting until ready');
    await this.waitForReplicas(servers, pair, this.options.readyTimeoutMs);
    const frontEndDown = arm ? await this.waitForFrontEnd(arm, pair) : undefined;
    if (frontEndDown) {
      return this.record(run, startedAt, 'endpoint', [], [], [`not started: ${frontEndDown}`]);
    }

    // The preflights ran before the study's first run (`preflightArms`); the arm's first run in
    // this process keeps its record.
    let preflight: PreflightRecord | undefined;
    if (arm) {
      const key = preflightKey(arm.id, pair);
      const outcome = this.preflights.get(key) ?? (await this.preflightOnce(arm, pair));
      if (!this.preflightsRecorded.has(key)) {
        this.preflightsRecorded.add(key);
        preflight = outcome;
      }
      if (!outcome.ok) {
        return this.record(
          run,
          startedAt,
          'endpoint',
          [],
          [],
          [`not started: preflight failed: ${outcome.detail}`],
          { preflight: outcome },
        );
      }
    }

    await this.phase(run, 'resetting prefix caches');
    const resets = (await this.resetCaches(servers, pair, urls, pods)).map((r) => ({
      ...r,
      replica: indices[r.replica],
    }));
    const preconditions = resets
      .filter((r) => r.verifiedBy === 'unverified')
      .map((r) => `replica ${r.pod}: prefix cache reset not verified: ${r.detail}`);

    if (run.reset.restartFrontEndOf && preconditions.length === 0) {
      // A front end restarted during the run before (staging) has served nothing since.
      const early = staged?.restarted?.deployments;
      await this.phase(run, early ? 'waiting for the front end restarted early' : 'restarting front end');
      const deployments =
        early ??
        frontEnd(this.config, armById(this.config, run.reset.restartFrontEndOf), pair).restartDeployments;
      if (!early) for (const name of deployments) await cluster.restartDeployment(name, clock.now());
      for (const name of deployments) {
        const problem = await this.waitForRollout(name);
        if (problem) preconditions.push(problem);
      }
    }

    const reset: RunRecord['reset'] = resets.some((r) => r.method === 'pod-restart')
      ? 'pod-restart'
      : 'endpoint';
    let extra: RunExtras = {
      resets: resetRecords(resets),
      ...(preflight ? { preflight } : {}),
      ...(staged ? { staging: stagingRecord(staged, undefined) } : {}),
    };
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

    await this.phase(run, 'scraping metrics');
    const uidsBefore = await this.podUids(servers, pair);
    const before = await this.scrape(urls);
    const blind = noMetricsStop(pods.map((pod, i) => ({ pod, ...before[i] })));
    if (blind) throw new StudyStopError(blind);

    if (staged) {
      await this.phase(run, 'opening the gates of the staged clients');
      gates.opening = await this.stager.open(staged);
      extra = { ...extra, staging: stagingRecord(staged, gates.opening) };
    }
    if (!gates.opening || 'fellBack' in gates.opening) {
      await this.phase(run, 'starting job');
      for (const { job } of jobs) await cluster.createJob(job);
    }
    // While this run's load runs, the next run's clients start behind closed gates.
    await this.stageNext(run);

    await this.phase(run, 'waiting for job');
    const outcomes = await this.waitForJobs(
      jobs.map(({ spec, job }) => ({ benchmarkId: spec.id, name: job.metadata.name })),
    );

    await this.phase(run, 'reading results');
    const readings: ResultFileReading[] = [];
    const clients: ClientRecord[] = [];
    for (const { spec, job } of jobs) {
      const text = await store.readClientResult(spec.id, spec.resultFile);
      if (text !== undefined) {
        // The study folder keeps the client's JSON; the Job's output folder is only its scratch.
        await this.studyFiles().saveClientResult(spec.id, spec.resultFile, text);
        await store.removeClientResult(spec.id, spec.resultFile);
      }
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

    await this.phase(run, 'scraping metrics');
    const after = await this.scrape(urls);
    const restarts = replicaRestartReasons(pods, uidsBefore, await this.podUids(servers, pair));
    const scrapes: ReplicaScrapes[] = pods.map((pod, i) => ({
      replica: indices[i],
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
    const evidence = arm && source ? await this.promptEvidenceOf(arm, pair, source) : undefined;
    const reasons = runReasons({
      run,
      readings,
      clients,
      resets,
      scrapes,
      replicas,
      ...(evidence ? { promptEvidence: evidence } : {}),
    });
    reasons.push(...restarts);
    return this.record(run, startedAt, reset, clients, replicas, reasons, {
      ...extra,
      ...(evidence ? { promptEvidence: evidence } : {}),
    });
  }

  /**
   * Stages the run that follows `run` (lib/study/staging.ts), once its other prerequisites have
   * ended and unless its arm's preflight failed (its clients would never start).
   */
  private async stageNext(run: StudyRun): Promise<void> {
    const next = stagedAfter(
      this.config,
      this.plan,
      run,
      (r) => this.records.get(r.id)?.valid === true,
      this.prerequisites,
    );
    if (!next) return;
    const waitsFor = (this.prerequisites.get(next.run.id) ?? []).filter((id) => id !== run.id);
    if (waitsFor.some((id) => !this.finished.has(id) && !this.records.get(id)?.valid)) return;
    if (
      next.run.arm &&
      this.preflights.get(preflightKey(next.run.arm, next.run.reset.pair ?? 0))?.ok === false
    )
      return;
    await this.stager.stage(run, next);
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
      ...(extra.staging ? { staging: extra.staging } : {}),
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
   * Resets every replica of a set and proves it (docs/facts.md §4.4): wait until the replica is idle,
   * POST /reset_prefix_cache, then find vLLM's own confirmation in the pod log written after the
   * call. A replica that stays busy, answers 404 (no dev mode) or anything but 200, whose log
   * says the reset was refused, or whose log confirms nothing, is restarted instead: a fresh
   * process has an empty cache. Only a restart that fails leaves the reset unverified.
   */
  private async resetCaches(
    servers: ServerSet,
    pair: number,
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
      pair,
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
    const { clock } = this.deps;
    const { cluster } = this;
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
      status = await this.replicas.resetPrefixCache(url);
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
        const snapshot = vllmSnapshot(await this.replicas.metrics(url));
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
    pair: number,
    urls: readonly string[],
    pods: string[],
    indices: number[],
  ): Promise<string | undefined> {
    const { clock } = this.deps;
    const { cluster } = this;
    const selector = `app=${replicaSetName(this.config, servers, pair)}`;
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
      return await this.replicas.models(url);
    } catch {
      return undefined;
    }
  }

  /**
   * Every replica of a set serves /v1/models (/health can pass before the engine serves), within
   * `timeoutMs`. A model server that never becomes ready makes every run of the study invalid,
   * so the study stops.
   */
  private async waitForReplicas(servers: ServerSet, pair: number, timeoutMs: number): Promise<void> {
    const { clock } = this.deps;
    const set = replicaSetName(this.config, servers, pair);
    const urls = this.options.replicaUrls(servers, pair);
    const pods = urls.map((_, i) => `${set}-${i}`);
    const deadline = clock.now().getTime() + timeoutMs;
    const waiting = new Set(urls.keys());
    const since = clock.now().getTime();
    let said = false;
    for (;;) {
      for (const i of [...waiting]) if ((await this.modelsStatus(urls[i])) === 200) waiting.delete(i);
      if (waiting.size === 0) {
        if (said)
          await this.say(
            `replicas of ${set} serve /v1/models after ${formatElapsed(clock.now().getTime() - since)}`,
          );
        return;
      }
      const late = [...waiting].map((i) => pods[i]);
      if (clock.now().getTime() >= deadline) {
        throw new StudyStopError({
          reason: `the model server never became ready: ${late.join(', ')} did not serve /v1/models within ${formatElapsed(timeoutMs)} (${urls.filter((_, i) => waiting.has(i)).join(', ')})`,
          change: `find why in kubectl -n ${this.config.namespace} describe pod ${late[0]} and its vllm log (model download, GPU, vllm.* settings), then run the study again: it resumes where it stopped`,
        });
      }
      if (!said) {
        await this.say(
          `waiting up to ${formatElapsed(timeoutMs)} for ${late.join(', ')} to serve /v1/models`,
        );
        said = true;
      }
      await this.progress();
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  /**
   * The arm's front-end Deployments are available (a crashed router or EPP comes back), within
   * `readyTimeoutMs`; a problem, or undefined when ready.
   */
  private async waitForFrontEnd(arm: Arm, pair: number): Promise<string | undefined> {
    const { clock } = this.deps;
    const deployments = frontEnd(this.config, arm, pair).restartDeployments;
    const deadline = clock.now().getTime() + this.options.readyTimeoutMs;
    let said = false;
    for (;;) {
      const down: string[] = [];
      for (const name of deployments) {
        const state = await this.cluster.getDeployment(name);
        if (!state) down.push(`deployment/${name} does not exist`);
        else if (state.available < state.desired)
          down.push(`deployment/${name} has ${state.available}/${state.desired} available`);
      }
      if (down.length === 0) return undefined;
      if (clock.now().getTime() >= deadline) {
        return `front end of ${arm.id} not ready within ${formatElapsed(this.options.readyTimeoutMs)}: ${down.join('; ')}`;
      }
      if (!said) {
        await this.say(
          `waiting up to ${formatElapsed(this.options.readyTimeoutMs)} for the front end of ${arm.id}: ${down.join('; ')}`,
        );
        said = true;
      }
      await this.progress();
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  /** Pod name to uid of a server set's replicas, to tell a restart during a run. */
  private async podUids(servers: ServerSet, pair: number): Promise<Map<string, string>> {
    try {
      const pods = await this.cluster.listPods(`app=${replicaSetName(this.config, servers, pair)}`);
      return new Map(pods.map((p) => [p.name, p.uid]));
    } catch (error) {
      await this.say(
        `replica pods not listed (a restart during the run cannot be told): ${(error as Error).message}`,
      );
      return new Map();
    }
  }

  // ---- Front ends and Jobs -------------------------------------------------------------------

  /** Waits for a restarted Deployment's rollout; a problem or undefined. */
  private async waitForRollout(name: string): Promise<string | undefined> {
    const { clock } = this.deps;
    const { cluster } = this;
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
    if (!(await this.cluster.getJob(name))) return;
    await this.say(`deleting the previous job/${name}`);
    await this.deleteJobAndWait(name);
  }

  /**
   * Deletes a Job (foreground propagation) and waits until it and its pods are gone, so none of
   * its pods sends requests into a later run. Throws when they outlive the rollout timeout.
   */
  private async deleteJobAndWait(name: string): Promise<void> {
    const { clock } = this.deps;
    const { cluster } = this;
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
   * Polls the Jobs until each has succeeded or failed (status counts, docs/facts.md §4.4); a failed
   * Job counts as finished at the first poll that sees it. Jobs still running at the timeout are
   * recorded as timed out, their client log is saved, and they are deleted and waited for until
   * they and their pods are gone, so they stop loading the replicas before anything else happens.
   * A Job whose pod no node can take (`unschedulable`) is deleted as soon as that has lasted
   * `unschedulableTimeoutMs`, with the scheduler's message as its client log.
   */
  private async waitForJobs(
    jobs: readonly { readonly benchmarkId: string; readonly name: string }[],
  ): Promise<Map<string, JobOutcome>> {
    const { clock } = this.deps;
    const { cluster } = this;
    const names = jobs.map((j) => j.name);
    const outcomes = new Map<string, JobOutcome>();
    const deadline = clock.now().getTime() + this.options.jobTimeoutMs;
    const pending = new Map<string, number>();
    let podsCheckedAt = Number.NEGATIVE_INFINITY;
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
      // Pods less often than Jobs: a pod that no node can take is a matter of minutes.
      if (clock.now().getTime() - podsCheckedAt >= this.options.pollIntervalMs) {
        podsCheckedAt = clock.now().getTime();
        for (const { benchmarkId, name } of jobs) {
          if (outcomes.has(name)) continue;
          if (await this.unschedulableFor(benchmarkId, name, pending)) outcomes.set(name, 'unschedulable');
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
      await clock.sleep(this.options.jobPollIntervalMs);
    }
  }

  /**
   * Whether a Job's pod has stayed Unschedulable for `unschedulableTimeoutMs` (since the first
   * poll that saw it so, kept in `since`); then its Job is deleted, with the scheduler's message
   * kept as the client's log.
   */
  private async unschedulableFor(
    benchmarkId: string,
    name: string,
    since: Map<string, number>,
  ): Promise<boolean> {
    const now = this.deps.clock.now().getTime();
    const stuck = (await this.cluster.listPods(`job-name=${name}`)).find((p) => p.unschedulable);
    if (!stuck?.unschedulable) {
      since.delete(name);
      return false;
    }
    const first = since.get(name) ?? now;
    since.set(name, first);
    if (now - first < this.options.unschedulableTimeoutMs) return false;
    const why = `pod ${stuck.name} of job/${name} was Unschedulable for ${formatElapsed(now - first)}: ${stuck.unschedulable}`;
    await this.say(`${why}; deleting the job`);
    await this.studyFiles().writeClientLog(benchmarkId, `${why}\n`);
    await this.deleteJobAndWait(name);
    return true;
  }

  private async saveClientLog(benchmarkId: string, jobName: string): Promise<void> {
    try {
      const pods = await this.cluster.listPods(`job-name=${jobName}`);
      const logs = await Promise.all(pods.map((p) => this.cluster.podLog(p.name)));
      if (logs.length > 0) await this.studyFiles().writeClientLog(benchmarkId, logs.join('\n'));
    } catch (error) {
      await this.say(`could not save the log of job/${jobName}: ${(error as Error).message}`);
    }
  }

  // ---- Preflight and prompt evidence ---------------------------------------------------------

  /**
   * Every arm's preflight, once per arm and replica pair, before the study's first run: a
   * preflight request then never lands in a front end that staging restarted early, and an arm
   * that cannot run is known within the study's first minutes.
   */
  private async preflightArms(runs: readonly StudyRun[]): Promise<void> {
    for (const run of runs) {
      if (run.arm && !this.preflights.has(preflightKey(run.arm, run.reset.pair ?? 0)))
        await this.preflightOnce(armById(this.config, run.arm), run.reset.pair ?? 0);
    }
  }

  private async preflightOnce(arm: Arm, pair: number): Promise<PreflightRecord> {
    const key = preflightKey(arm.id, pair);
    const outcome = await this.preflight(arm, pair);
    this.preflights.set(key, outcome);
    await this.say(`preflight of ${key}: ${outcome.ok ? 'passed' : 'FAILED'}: ${outcome.detail}`);
    return outcome;
  }

  /**
   * Before an arm's first run: the status conditions its path needs are True (the AI Gateway's
   * route and Gateway), and one tiny request through its front end reaches a replica of its
   * server set (a replica's `vllm:request_success_total` grows).
   */
  private async preflight(arm: Arm, pair: number): Promise<PreflightRecord> {
    const { clock } = this.deps;
    const { cluster } = this;
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

    const set = replicaSetName(this.config, arm.servers, pair);
    const urls = this.options.replicaUrls(arm.servers, pair);
    const pods = urls.map((_, i) => `${set}-${i}`);
    const counts = async (): Promise<(number | undefined)[]> =>
      (await this.scrape(urls)).map((s) => s.snapshot?.requestSuccess);
    const before = await counts();
    const unread = before.flatMap((n, i) => (n === undefined ? [pods[i]] : []));
    if (unread.length > 0) {
      return { ok: false, detail: `vllm:request_success_total of ${unread.join(', ')} could not be read` };
    }
    const target = `POST ${this.options.frontEndUrl(arm, pair).replace(/\/+$/, '')}${apiPath(arm.api)}`;
    try {
      const answer = await this.deps.frontEnds.complete(
        this.options.frontEndUrl(arm, pair),
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
          detail: `${target} answered 200, but no replica of ${set} counted a finished request within ${formatElapsed(this.options.confirmTimeoutMs)}`,
        };
      }
      await clock.sleep(Math.min(this.options.pollIntervalMs, 1_000));
    }
  }

  /** Reads the arm's EPP metrics after a run and judges whether it saw the prompts. */
  private async promptEvidenceOf(
    arm: Arm,
    pair: number,
    source: PromptEvidenceSource,
  ): Promise<PromptEvidence> {
    let scrape: EppScrape;
    try {
      scrape = {
        snapshot: eppSnapshot(await this.deps.endpointPickers.metrics(this.options.eppMetricsUrl(arm, pair))),
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
          return { snapshot: vllmSnapshot(await this.replicas.metrics(url)) };
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
      if (changed) await this.studyFiles().writeRun(record);
    }
    await this.writeStudy();
  }

  private async writeStudy(): Promise<StudyRecord> {
    // One write at a time, each taking the records as they are when its turn comes.
    return this.studyWrites.write(async () => {
      const study: StudyRecord = {
        schemaVersion: STUDY_SCHEMA_VERSION,
        metadata: this.metadata as StudyMetadata,
        runs: this.plan.runs.flatMap((run) => this.records.get(run.id) ?? []),
      };
      await this.studyFiles().writeStudy(study);
      return study;
    });
  }

  private async collectMetadata(): Promise<StudyMetadata> {
    const { store } = this.deps;
    const { cluster } = this;
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
      ...(this.studyId ? { studyId: this.studyId } : {}),
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

  /** The run in progress that comes first in the plan: the one status.json shows. */
  private get current(): ActiveRun | undefined {
    return [...this.active.values()].sort((a, b) => a.index - b.index)[0];
  }

  private async phase(run: StudyRun, phase: string): Promise<void> {
    const entry = this.active.get(run.id);
    if (!entry) return;
    const updated = { ...entry, phase };
    this.active.set(run.id, updated);
    this.progressTimer.logged(this.deps.clock.now().getTime());
    await this.say(this.progressText(updated));
    await this.writeStatus();
  }

  /** Status on every poll, a log line per run in progress every `progressEveryMs`. */
  private async progress(): Promise<void> {
    const now = this.deps.clock.now().getTime();
    if (this.active.size > 0 && this.progressTimer.due(now)) {
      for (const entry of [...this.active.values()].sort((a, b) => a.index - b.index))
        await this.say(this.progressText(entry));
    }
    await this.writeStatus();
  }

  private eta(entry = this.current): { elapsedMs: number; etaMs: number | undefined } {
    if (!entry) return { elapsedMs: 0, etaMs: undefined };
    const elapsedMs = this.deps.clock.now().getTime() - entry.startedAt.getTime();
    const durations = [...this.records.values()]
      .filter((r) => !this.active.has(r.id))
      .map((r) => Date.parse(r.finishedAt) - Date.parse(r.startedAt));
    const after = this.plan.runs
      .slice(entry.index)
      .filter((run) => !this.records.get(run.id)?.valid && !this.active.has(run.id)).length;
    // With two replica pairs the runs left go two at a time.
    const rounds = Math.ceil(after / this.config.study.parallelism);
    return { elapsedMs, etaMs: studyEtaMs(durations, elapsedMs, rounds) };
  }

  private progressText(entry = this.current): string {
    if (!entry) return this.log.message;
    const { elapsedMs, etaMs } = this.eta(entry);
    return progressLine(entry.index, this.plan.runs.length, entry.run.id, entry.phase, elapsedMs, etaMs);
  }

  private say(line: string): Promise<void> {
    return this.log.say(line);
  }

  /** Removes the clients and gates of runs still staged (the study stops or ends). */
  private async dropStaged(): Promise<void> {
    try {
      await this.stager.dropAll();
    } catch (error) {
      await this.say(`staged clients not removed: ${(error as Error).message}`);
    }
  }

  private async writeStatus(error?: string): Promise<void> {
    const { elapsedMs, etaMs } = this.eta();
    await this.deps.store.writeStatus(
      studyStatus({
        state: this.state,
        studyId: this.studyId,
        studyStartedAt: this.metadata?.startedAt,
        startedAt: this.startedAt,
        now: this.deps.clock.now(),
        runIds: this.plan.runs.map((run) => run.id),
        records: this.records,
        active: this.current,
        elapsedMs,
        etaMs,
        message: this.log.message,
        error,
      }),
    );
  }
}

/** An arm's preflight is once per replica pair: each pair has its own front end. */
function preflightKey(armId: string, pair: number): string {
  return `${armId}${pairSuffix(pair)}`;
}

/** The StatefulSet a run's replicas belong to (its server set on its replica pair). */
function replicaSetOf(config: LabConfig, run: StudyRun): string {
  return replicaSetName(config, run.reset.prefixCaches, run.reset.pair ?? 0);
}
