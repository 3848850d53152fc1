import type { LabConfig } from '../config/schema.ts';
import { runPrerequisites, type StudyPlan, type StudyRun } from '../study/plan.ts';
import type { StudyMetadata, StudyRecord } from '../study/results.ts';
import {
  checklistFailures,
  formatChecklist,
  type SmokeChecklist,
  smokeChecklist,
} from '../study/smoke-checklist.ts';
import { stagedAfter } from '../study/staging.ts';
import { replicaSetName } from '../study/topology.ts';
import { ApiUnreachableError, interruption } from './call-policy.ts';
import { Evidence } from './evidence.ts';
import { JobLifecycle } from './jobs.ts';
import type { RunnerDeps, StudyFiles } from './ports.ts';
import { collectMetadata, StudyRecords } from './records.ts';
import { Resets } from './resets.ts';
import { retryingCluster, retryingEndpointPickers, retryingReplicas } from './retry.ts';
import { RunPipeline } from './run-pipeline.ts';
import type { RunnerContext } from './runner-context.ts';
import {
  type ResolvedOptions,
  type RunnerOptions,
  resolveOptions,
  stagedWaitLimitMs,
} from './runner-options.ts';
import { Scheduler } from './scheduler.ts';
import { Stager } from './stager.ts';
import { ProgressTimer, progressLine, type StudyState, studyEtaMs, studyStatus } from './status.ts';
import { asCleanup, RunnerInterruptedError, withStop } from './stop-signal.ts';
import { chooseStudyFolder, readStudyRecords } from './study-files.ts';
import { chooseStudy, type StudyChoice, smokeStudyId } from './study-id.ts';
import { StudyLog } from './study-log.ts';
import { StudyStopError } from './study-stop.ts';

export { rolloutComplete } from './resets.ts';
export type { RunnerOptions } from './runner-options.ts';
export { StudyStopError } from './study-stop.ts';

/**
 * Executes the study plan (docs/facts.md §4.2) and records every run with its validity (docs/facts.md §4.3,
 * 4.4) in the results folder. Resumable: a run whose valid record exists is skipped, so a study
 * interrupted at run 7 restarts at run 7. Returns the study record.
 *
 * The runner is several modules, one per responsibility: scheduling and attempts
 * (scheduler.ts), one attempt of a run (run-pipeline.ts), resets and readiness (resets.ts), Jobs
 * and gates (jobs.ts, stager.ts), evidence (evidence.ts) and records (records.ts), every call
 * under one error policy (call-policy.ts, retry.ts) and every wait one poll (poll.ts). This
 * module starts the study, keeps status.json, and stops it.
 */
export async function runStudy(
  deps: RunnerDeps,
  config: LabConfig,
  plan: StudyPlan,
  options: RunnerOptions = {},
  mode: StudyMode = {},
): Promise<StudyRecord> {
  return new StudyRunner(withStop(deps), config, plan, resolveOptions(config, options), mode).run();
}

/** What kind of study a runner works on; the default is a full study without smoke checks. */
export interface StudyMode {
  /**
   * The smoke study (lib/study/smoke.ts): always a new folder (never resumed, never chosen for
   * resuming), no predictions, and its checklist written at the end, also when it stopped.
   */
  readonly smoke?: boolean;
  /**
   * A full study's checks: the smoke plan, run as a smoke study of its own before the study's
   * first long run, unless this study's checks passed already. A failed proof stops the study.
   */
  readonly checks?: StudyPlan;
}

/** A smoke study's checklist, also when the study stopped (then `error`, the stop). */
export interface SmokeOutcome {
  readonly checklist?: SmokeChecklist;
  readonly error?: unknown;
}

/** Runs the smoke study of `plan` (lib/study/smoke.ts) and returns its checklist. Never throws. */
export async function runSmokeStudy(
  deps: RunnerDeps,
  config: LabConfig,
  plan: StudyPlan,
  options: RunnerOptions = {},
): Promise<SmokeOutcome> {
  const runner = new StudyRunner(withStop(deps), config, plan, resolveOptions(config, options), {
    smoke: true,
  });
  try {
    await runner.run();
    return { checklist: runner.checklist };
  } catch (error) {
    return { checklist: runner.checklist, error };
  }
}

/** A run in progress. */
interface ActiveRun {
  readonly index: number;
  readonly run: StudyRun;
  readonly startedAt: Date;
  readonly phase: string;
}

class StudyRunner {
  private readonly startedAt: Date;
  private state: StudyState = 'starting';
  /** The runs in progress (several while a wave of bound runs runs at once), by run id. */
  private readonly active = new Map<string, ActiveRun>();
  private readonly progressTimer: ProgressTimer;
  private readonly finished = new Set<string>();
  private readonly prerequisites: Map<string, string[]>;
  private readonly ctx: RunnerContext;
  private readonly records: StudyRecords;
  private readonly stager: Stager;
  private readonly jobs: JobLifecycle;
  private readonly resets: Resets;
  private readonly evidence: Evidence;
  private studyId: string | undefined;
  private readonly log: StudyLog;
  /** The smoke study's checklist (a smoke study), or the checks' that stopped this study. */
  checklist: SmokeChecklist | undefined;

  constructor(
    private readonly deps: RunnerDeps,
    private readonly config: LabConfig,
    private readonly plan: StudyPlan,
    private readonly options: ResolvedOptions,
    private readonly mode: StudyMode,
  ) {
    this.startedAt = deps.clock.now();
    this.log = new StudyLog(deps.clock, deps.log);
    this.progressTimer = new ProgressTimer(options.progressEveryMs);
    // A retry is a status line too: during an API outage, status.json says what the runner waits for.
    const retry = {
      policy: options.retry,
      clock: deps.clock,
      log: async (line: string) => {
        await this.say(line);
        await this.writeStatus();
      },
    };
    this.ctx = {
      deps,
      config,
      plan,
      options,
      cluster: retryingCluster(deps.cluster, retry),
      replicas: retryingReplicas(deps.replicas, retry),
      endpointPickers: retryingEndpointPickers(deps.endpointPickers, retry),
      say: (line) => this.say(line),
      progress: () => this.progress(),
    };
    this.prerequisites = runPrerequisites(plan);
    this.records = new StudyRecords(config, plan);
    this.jobs = new JobLifecycle(this.ctx);
    this.resets = new Resets(this.ctx);
    this.evidence = new Evidence(this.ctx);
    this.stager = new Stager({
      config,
      cluster: this.ctx.cluster,
      clock: deps.clock,
      jobManifest: deps.jobManifest,
      say: (line) => this.say(line),
      deleteJobAndWait: (name) => this.jobs.deleteJobAndWait(name),
      readyCheckTimeoutSeconds: Math.ceil(stagedWaitLimitMs(options, config.vllm.replicas) / 1000),
    });
  }

  async run(): Promise<StudyRecord> {
    try {
      return await this.execute();
    } catch (error) {
      // A stop the API caused (unreachable past the outage limit, or refusing), or a runner told
      // to stop (SIGTERM: its pod deleted), is `interrupted`: the host stays up
      // (runner.terminateWhenDone ends only a finished or failed study) and `lab run` resumes the study.
      const interrupted = interruption(error);
      this.state = interrupted ? 'interrupted' : 'failed';
      const message = (error as Error).message;
      const verdict =
        error instanceof StudyStopError
          ? error.verdict
          : interrupted
            ? { reason: message, change: interruptedChange(error) }
            : undefined;
      if (verdict && this.records.metadata) {
        this.records.metadata = {
          ...this.records.metadata,
          stopped: { at: this.deps.clock.now().toISOString(), ...verdict },
        };
        await this.records.writeStudy().catch(() => undefined);
      }
      await this.say(`study ${interrupted ? 'interrupted' : 'stopped'}: ${message}`);
      if (error instanceof RunnerInterruptedError) await this.clearAfterSignal();
      else if (!(error instanceof ApiUnreachableError)) await this.dropStaged();
      // Nothing stops a smoke study's checklist: the runs not reached say so.
      if (this.mode.smoke && this.studyId) await this.writeChecklist(message).catch(() => undefined);
      await this.writeStatus(message);
      throw error;
    }
  }

  private async execute(): Promise<StudyRecord> {
    const { store } = this.deps;
    // Each study has its own folder: the latest unfinished one of this configuration is
    // resumed (restored from S3 by the bootstrap on a new host), or a new one is started;
    // `lab run --redo-invalid` resumes the latest one even when it finished.
    const say = (line: string) => this.say(line);
    const redo = this.mode.smoke ? false : await store.takeRedoInvalidRequest();
    const { choice, files } = this.mode.smoke
      ? this.smokeFolder()
      : await chooseStudyFolder(
          store,
          (studies, fresh) => chooseStudy(studies, this.config, this.startedAt, fresh, redo),
          say,
        );
    this.studyId = choice.id;
    this.records.attach(files);
    this.log.attach(files);
    const runIds = this.plan.runs.map((r) => r.id);
    const { existing, records } = await readStudyRecords(files, choice, runIds, say);
    this.records.records = records;
    const pending = this.plan.runs.filter((run) => !this.records.valid(run.id));
    await this.say(
      existing
        ? `resuming study ${choice.id} (${choice.why}): ${this.plan.runs.length - pending.length} of ${this.plan.runs.length} runs have a valid record`
        : `starting study ${choice.id} (${choice.why}): ${this.plan.runs.length} runs`,
    );
    if (existing) {
      // Known from here on, so that a stop (an API outage at start) is recorded in its study.json.
      const { finishedAt: _previous, stopped: _stopped, ...kept } = existing.metadata;
      this.records.metadata = { ...kept, studyId: choice.id };
    }
    await this.writeStatus();

    // Before anything loads a replica or asks a front end: no client of an earlier runner (of
    // this study or another) is left to load the replicas.
    await this.jobs.clearLab();

    const sets = new Map(pending.map((run) => [replicaSetOf(this.config, run), run.reset]));
    for (const { prefixCaches, pair } of sets.values())
      await this.resets.waitForReplicas(prefixCaches, pair ?? 0, this.ctx.options.startupTimeoutMs);

    if (!existing) {
      const metadata = await collectMetadata(this.ctx, choice.id, this.startedAt, !this.mode.smoke);
      this.records.metadata = this.mode.smoke ? { ...metadata, profile: 'smoke' } : metadata;
    }
    await this.records.writeStudy();

    if (this.mode.checks && !this.records.metadata?.checks?.passed) await this.runChecks(this.mode.checks);

    await this.evidence.preflightArms(pending);

    this.state = 'running';
    const pipeline = new RunPipeline({
      ctx: this.ctx,
      records: this.records,
      resets: this.resets,
      jobs: this.jobs,
      evidence: this.evidence,
      stager: this.stager,
      phase: (run, phase) => this.phase(run, phase),
      stageNext: (run) => this.stageNext(run),
    });
    await new Scheduler({
      ctx: this.ctx,
      records: this.records,
      pipeline,
      finished: this.finished,
      started: (run, index) => {
        this.active.set(run.id, { index, run, startedAt: this.deps.clock.now(), phase: 'starting' });
      },
      ended: (run) => this.active.delete(run.id),
    }).runInOrder();
    await this.dropStaged();
    this.active.clear();
    this.state = 'finished';
    this.records.metadata = {
      ...(this.records.metadata as StudyMetadata),
      finishedAt: this.deps.clock.now().toISOString(),
    };
    const study = await this.records.writeStudy();
    const valid = study.runs.filter((r) => r.valid).length;
    await this.say(`study finished: ${valid} of ${study.runs.length} runs valid`);
    if (this.mode.smoke) await this.writeChecklist();
    await this.writeStatus();
    return study;
  }

  /** A smoke study's folder: always a new one, which no full study resumes (study-id.ts). */
  private smokeFolder(): { choice: StudyChoice; files: StudyFiles } {
    const id = smokeStudyId(this.config, this.startedAt);
    return {
      choice: { kind: 'new', id, why: 'a smoke study always starts afresh' },
      files: this.deps.store.study(id),
    };
  }

  /** The smoke study's checklist from its records, written beside them and said line by line. */
  private async writeChecklist(stopped?: string): Promise<void> {
    const checklist = smokeChecklist(
      this.config,
      this.plan.runs,
      this.records.records,
      this.studyId as string,
      this.deps.clock.now(),
      stopped,
    );
    this.checklist = checklist;
    await this.records.studyFiles.writeChecklist(checklist);
    for (const line of formatChecklist(checklist)) await this.say(line);
  }

  /**
   * The full study's checks before its first long run: the smoke plan as a smoke study of its own.
   * Every arm gets its line; any failed proof stops this study with the checklist, in minutes.
   */
  private async runChecks(plan: StudyPlan): Promise<void> {
    await this.say(
      `checking every arm before the first long run: a smoke study of ${plan.runs.length} tiny runs`,
    );
    const { checklist, error } = await runSmokeStudy(this.deps, this.config, plan, this.options);
    if (error && interruption(error)) throw error;
    if (!checklist) throw error ?? new Error('the smoke checks wrote no checklist');
    const failures = checklistFailures(checklist);
    this.records.metadata = {
      ...(this.records.metadata as StudyMetadata),
      checks: { smokeStudyId: checklist.studyId, passed: checklist.passed, failures },
    };
    await this.records.writeStudy();
    const where = `studies/${checklist.studyId}/smoke-checklist.txt`;
    if (checklist.passed) {
      await this.say(`smoke checks passed for every arm (${where}); the study begins`);
      return;
    }
    this.checklist = checklist;
    const why = checklist.stopped ? [`the smoke study stopped: ${checklist.stopped}`] : failures;
    throw new StudyStopError({
      reason: `the smoke checks failed before the first long run: ${why.join('; ')}`,
      change: `fix what the checklist says (lab status prints it; ${where}), then lab run resumes this study, which checks every arm again first`,
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
      (r) => this.records.valid(r.id),
      this.prerequisites,
    );
    // Told to stop (SIGTERM): nothing new is staged.
    if (!next || this.deps.stop?.requested) return;
    const waitsFor = (this.prerequisites.get(next.run.id) ?? []).filter((id) => id !== run.id);
    if (waitsFor.some((id) => !this.finished.has(id) && !this.records.valid(id))) return;
    if (next.run.arm && this.evidence.failed(next.run.arm, next.run.reset.pair ?? 0)) return;
    await this.stager.stage(run, next);
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
    const records = this.records.records;
    const durations = [...records.values()]
      .filter((r) => !this.active.has(r.id))
      .map((r) => Date.parse(r.finishedAt) - Date.parse(r.startedAt));
    const after = this.plan.runs
      .slice(entry.index)
      .filter((run) => !records.get(run.id)?.valid && !this.active.has(run.id)).length;
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

  /**
   * Told to stop: every client Job and gate of the lab namespace is deleted (the run in progress
   * and the staged one), within the stop's cleanup time; what is not gone by then the next runner
   * deletes before its first measurement.
   */
  private async clearAfterSignal(): Promise<void> {
    try {
      await asCleanup(this.deps.stop, () => this.jobs.clearLab('this runner stopped'));
      await this.say('every client Job and gate of this runner is deleted');
    } catch (error) {
      await this.say(
        `clients not all gone before exiting (${(error as Error).message}); the next runner deletes them before its first measurement`,
      );
    }
  }

  private async writeStatus(error?: string): Promise<void> {
    const { elapsedMs, etaMs } = this.eta();
    await this.deps.store.writeStatus(
      studyStatus({
        state: this.state,
        studyId: this.studyId,
        studyStartedAt: this.records.metadata?.startedAt,
        startedAt: this.startedAt,
        now: this.deps.clock.now(),
        runIds: this.plan.runs.map((run) => run.id),
        records: this.records.records,
        active: this.current,
        elapsedMs,
        etaMs,
        message: this.log.message,
        error,
        ...(this.mode.smoke ? { profile: 'smoke' as const } : {}),
        ...(this.checklist ? { checklist: this.checklist } : {}),
      }),
    );
  }
}

/** What to do about an interrupted study, by what interrupted it. */
function interruptedChange(error: unknown): string {
  if (error instanceof RunnerInterruptedError)
    return 'lab run resumes the study where it stopped; the run in progress then is run again';
  return error instanceof ApiUnreachableError
    ? 'once the API server answers again, lab run resumes the study where it stopped (runner.retry.outageMinutes sets how long a runner rides out an outage)'
    : 'fix what the API server refused (the runner Role, the object), then lab run resumes the study where it stopped';
}

/** The StatefulSet a run's replicas belong to (its server set on its replica pair). */
function replicaSetOf(config: LabConfig, run: StudyRun): string {
  return replicaSetName(config, run.reset.prefixCaches, run.reset.pair ?? 0);
}
