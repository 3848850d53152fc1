import type { NetworkCell } from '../../config/network.ts';
import type { LabConfig } from '../../config/schema.ts';
import type {
  NetworkRun,
  NetworkRunRecord,
  NetworkStudyPlan,
  NetworkStudyRecord,
} from '../../network/study/model.ts';
import { type NetworkProof, networkSmokeChecklist } from '../../network/study/smoke-checklist.ts';
import { judgeNetworkRun, judgeRepeats, type NetworkJudgeConfig } from '../../network/study/validity.ts';
import { checklistFailures, formatChecklist, type SmokeChecklist } from '../../study/smoke-checklist.ts';
import { ApiUnreachableError, interruption, withRetry } from '../call-policy.ts';
import type { NetworkCluster, NetworkStudyFiles, SidecarMetrics } from '../ports.ts';
import { ProgressTimer, progressLine, type StudyState, studyEtaMs, studyStatus } from '../status.ts';
import { asCleanup, RunnerInterruptedError, withStop } from '../stop-signal.ts';
import { readStudyRecords, StudyWrites } from '../study-files.ts';
import { StudyLog } from '../study-log.ts';
import { StudyStopError } from '../study-stop.ts';
import { ActiveRuns } from './active-runs.ts';
import { cellJudgeConfig, cellNode, studyFacts } from './cell-facts.ts';
import { ClientSteps } from './client-steps.ts';
import { retryingNetworkCluster } from './cluster-retry.ts';
import { ConntrackSteps } from './conntrack-steps.ts';
import { dispatchRuns, runOrder } from './dispatch.ts';
import { JobDriver } from './job-driver.ts';
import { establish, executeKind, type KindSteps } from './run-kinds.ts';
import {
  type KindOutcome,
  type NetworkRunnerDeps,
  type NetworkRunnerOptions,
  type Resolved,
  resolved,
  type StepContext,
  smokeOptions,
} from './runner-context.ts';
import { ServiceScaleSteps } from './scale-steps.ts';
import { cellStudyFolder, lastStudyOf } from './study-choice.ts';

export { AMBIENT_REDIRECTION_ANNOTATION, serviceOfUrl } from './client-steps.ts';
export { retryingNetworkCluster } from './cluster-retry.ts';
export {
  forEachLimited,
  type NetworkRunnerDeps,
  type NetworkRunnerOptions,
} from './runner-context.ts';
export {
  CILIUM_AGENT_SELECTOR,
  MAP_FULL_PATTERN,
  PROBE_SERVICE_LABEL,
  scaleServiceName,
} from './scale-steps.ts';
export { chooseNetworkStudy, type NetworkStudyChoice } from './study-choice.ts';

/** A record before its judgment. */
type RecordDraft = Omit<NetworkRunRecord, 'valid' | 'invalidReasons' | 'flags'>;

/**
 * Executes a cell's network study plan (in order; a smoke study by its schedule, dispatch.ts) and records every run with its validity in the
 * cell's results folder (docs/facts.md §N3, N5). Resumable: a run with a record is skipped, so a
 * restarted runner continues where the last one stopped. Returns the study record.
 */
export async function runNetworkStudy(
  deps: NetworkRunnerDeps,
  config: LabConfig,
  plan: NetworkStudyPlan,
  options: NetworkRunnerOptions = {},
  mode: NetworkStudyMode = {},
): Promise<NetworkStudyRecord> {
  return new NetworkStudyRunner(withStop(deps), config, plan, resolved(options), mode).run();
}

/** What kind of study a network runner works on (as the first lab's StudyMode, run-study.ts). */
export interface NetworkStudyMode {
  /**
   * The cell's smoke study (lib/network/study/smoke.ts): always a new folder, never resumed, its
   * checklist written at the end, also when it stopped.
   */
  readonly smoke?: boolean;
  /**
   * A full study's checks: the smoke plan, run as a smoke study of its own before the study's
   * first long run, unless this study's checks passed already. A failed proof stops the study.
   */
  readonly checks?: NetworkStudyPlan;
}

/** A cell's smoke checklist, also when its study stopped (then `error`, the stop). */
export interface NetworkSmokeOutcome {
  readonly checklist?: SmokeChecklist<NetworkProof>;
  readonly error?: unknown;
}

/** Runs a cell's smoke study and returns its checklist. Never throws. */
export async function runNetworkSmokeStudy(
  deps: NetworkRunnerDeps,
  config: LabConfig,
  plan: NetworkStudyPlan,
  options: NetworkRunnerOptions = {},
): Promise<NetworkSmokeOutcome> {
  const runner = new NetworkStudyRunner(withStop(deps), config, plan, smokeOptions(options), { smoke: true });
  try {
    await runner.run();
    return { checklist: runner.checklist };
  } catch (error) {
    return { checklist: runner.checklist, error };
  }
}

class NetworkStudyRunner implements StepContext {
  private readonly startedAt: Date;
  private records = new Map<string, NetworkRunRecord>();
  readonly cluster: NetworkCluster;
  readonly sidecars: SidecarMetrics;
  readonly cell: NetworkCell;
  readonly jobs: JobDriver;
  private readonly clients: ClientSteps;
  private readonly scale: ServiceScaleSteps;
  private readonly conntrack: ConntrackSteps;
  private readonly kinds: KindSteps;
  private state: StudyState = 'starting';
  private files: NetworkStudyFiles | undefined;
  private studyId: string | undefined;
  private study: Omit<NetworkStudyRecord, 'runs'> | undefined;
  private readonly active = new ActiveRuns();
  private readonly progressTimer: ProgressTimer;
  /** stdout and the study folder's log; lines said before the study is chosen wait in it. */
  private readonly log: StudyLog;
  private readonly studyWrites = new StudyWrites();
  /** The cell's node (cellNode). */
  private node: string | undefined;
  /** The smoke study's checklist (a smoke study), or the checks' that stopped this study. */
  checklist: SmokeChecklist<NetworkProof> | undefined;

  constructor(
    readonly deps: NetworkRunnerDeps,
    readonly config: LabConfig,
    private readonly plan: NetworkStudyPlan,
    readonly options: Resolved<NetworkRunnerOptions>,
    private readonly mode: NetworkStudyMode = {},
  ) {
    this.startedAt = deps.clock.now();
    this.log = new StudyLog(deps.clock, deps.log);
    this.progressTimer = new ProgressTimer(options.progressEveryMs);
    this.cell = deps.jobs.cell;
    if (this.cell.name !== plan.cell) {
      throw new Error(`the plan is for cell ${plan.cell}, the Jobs for cell ${this.cell.name}`);
    }
    // A retry is a status line too: during an API outage, status.json says what the runner waits for.
    const ctx = {
      policy: options.retry,
      clock: deps.clock,
      log: async (line: string) => {
        await this.say(line);
        await this.writeStatus();
      },
    };
    this.cluster = retryingNetworkCluster(deps.cluster, ctx);
    // A sidecar that stays down is one run's missing evidence, not an outage to ride out.
    const scrapes = { ...ctx, policy: { ...options.retry, outageMs: 0 } };
    this.sidecars = {
      scrape: (ip) => withRetry(`GET ${ip}:15020/stats/prometheus`, () => deps.sidecars.scrape(ip), scrapes),
    };
    this.jobs = new JobDriver(this);
    this.clients = new ClientSteps(this);
    this.scale = new ServiceScaleSteps(this);
    this.conntrack = new ConntrackSteps(this, async (limit) => {
      if (!this.study) return;
      this.study = { ...this.study, conntrackHostDefault: limit };
      await this.writeStudy();
    });
    this.kinds = { clients: this.clients, scale: this.scale, conntrack: this.conntrack };
  }

  async run(): Promise<NetworkStudyRecord> {
    try {
      return await this.execute();
    } catch (error) {
      // A stop the API caused (unreachable past the outage limit, or refusing), or a runner told
      // to stop (SIGTERM), is `interrupted`, as in the first lab: runner.terminateWhenDone ends
      // only a finished or failed study, and `lab run` resumes this one.
      const interrupted = interruption(error);
      this.state = interrupted ? 'interrupted' : 'failed';
      const message = (error as Error).message;
      if (this.study && this.files) {
        this.study = { ...this.study, state: this.state, error: message };
        await this.writeStudy().catch(() => undefined);
      }
      await this.say(`study ${interrupted ? 'interrupted' : 'stopped'}: ${message}`);
      if (error instanceof RunnerInterruptedError) await this.clearAfterSignal();
      // Nothing stops a smoke study's checklist: the runs not reached say so.
      if (this.mode.smoke && this.files) await this.writeChecklist(message).catch(() => undefined);
      await this.writeStatus(message);
      throw error;
    }
  }

  private async execute(): Promise<NetworkStudyRecord> {
    const { store } = this.deps;
    const say = (line: string) => this.say(line);
    const { choice, files, shelf } = await cellStudyFolder(
      store,
      {
        config: this.config,
        cell: this.plan.cell,
        startedAt: this.startedAt,
        smoke: this.mode.smoke === true,
      },
      say,
    );
    this.studyId = choice.id;
    this.files = files;
    this.log.attach(files);
    const runIds = this.plan.runs.map((r) => r.id);
    const { existing, records } = await readStudyRecords(files, choice, runIds, say);
    // A record of an older runner has no repeat group: the plan's is the same run's, so that the
    // repeat-spread check still compares it.
    const groups = new Map(this.plan.runs.map((r) => [r.id, r.repeatGroup]));
    this.records = new Map(
      [...records].map(([id, record]) => {
        const group = groups.get(id);
        return [
          id,
          record.repeatGroup === undefined && group !== undefined
            ? { ...record, repeatGroup: group }
            : record,
        ];
      }),
    );
    // The host default recorded before the first E10 step; a record of an older runner: the first
    // step's limit before.
    this.conntrack.conntrackDefault = existing?.conntrackHostDefault;
    for (const record of this.records.values())
      if (record.result?.kind === 'conntrack')
        this.conntrack.conntrackDefault ??= record.result.conntrack.limitBefore;
    const total = this.plan.runs.length;
    await this.say(
      existing
        ? `resuming study ${choice.id} of cell ${this.plan.cell} (${choice.why}): ${this.records.size} of ${total} runs recorded`
        : `starting study ${choice.id} of cell ${this.plan.cell} (${choice.why}): ${total} runs`,
    );
    if (existing) {
      // Known from here on, so that a stop (an API outage at start) is recorded in its study.json.
      const { runs: _runs, finishedAt: _finished, error: _error, ...kept } = existing;
      this.study = { ...kept, state: 'running' };
    }
    await this.writeStatus();

    // Before any measurement: no Job of a killed runner (a prober, a client, a host command) is
    // left to load the cell, and no E9 Service it created is left in the datapath.
    await this.jobs.clearCell();
    await this.scale.deleteScaleServices();
    // A runner stopped mid-E10 may have left a lowered conntrack limit.
    const restored = existing
      ? await this.conntrack.restoreAfterStop(
          { study: existing, records: [...this.records.values()] },
          this.plannedE10Steps(),
          this.deps.clock.now(),
        )
      : await this.conntrack.restoreAfterStop(
          lastStudyOf(shelf, this.plan.cell, choice.id),
          undefined,
          this.deps.clock.now(),
        );

    this.node = await cellNode(this);
    const { host, datapath } = await studyFacts(this, existing);
    this.study = {
      lab: 'network',
      studyId: choice.id,
      cell: this.plan.cell,
      datapath: this.plan.datapath,
      mesh: this.plan.mesh,
      host,
      ...(datapath ? { datapathEvidence: datapath } : {}),
      ...(this.conntrack.conntrackDefault !== undefined
        ? { conntrackHostDefault: this.conntrack.conntrackDefault }
        : {}),
      ...(restored
        ? { conntrackRestoredAtStart: restored }
        : existing?.conntrackRestoredAtStart
          ? { conntrackRestoredAtStart: existing.conntrackRestoredAtStart }
          : {}),
      startedAt: existing?.startedAt ?? this.startedAt.toISOString(),
      state: 'running',
      ...(this.mode.smoke ? { profile: 'smoke' as const } : {}),
      ...(existing?.checks ? { checks: existing.checks } : {}),
    };
    await this.writeStudy();
    if (this.mode.checks && !this.study.checks?.passed) await this.runChecks(this.mode.checks);
    this.state = 'running';

    let stoppedByOutage = false;
    try {
      // One run at a time, or a smoke study's schedule (dispatch.ts): the records keep the plan's order.
      await dispatchRuns(runOrder(this.plan, this.mode.smoke === true), {
        skip: async ({ run, index }) => {
          if (!this.records.has(run.id)) return false;
          await this.say(`run ${index + 1}/${total} ${run.id}: recorded earlier, skipped`);
          return true;
        },
        // Told to stop (SIGTERM): no new run starts, and a run it cut short is not recorded.
        beforeStart: () => this.deps.stop?.throwIfRequested(),
        waiting: (item, why) => this.say(`run ${item.index + 1}/${total} ${item.run.id} waits: ${why}`),
        execute: async ({ run, index }) => {
          const record = await this.executeRun(index + 1, run);
          this.deps.stop?.throwIfRequested();
          this.records.set(run.id, record);
          await this.studyFiles().writeRun(record);
          await this.applyRepeatSpread(run.id);
          await this.writeStudy();
          await this.say(
            `run ${index + 1}/${total} ${run.id}: ${record.valid ? 'valid' : `INVALID: ${record.invalidReasons.join('; ')}`}`,
          );
        },
      });
    } catch (error) {
      stoppedByOutage = error instanceof ApiUnreachableError;
      throw error;
    } finally {
      // After an outage past its limit the API is not there to delete them: the next runner does.
      if (!stoppedByOutage) await asCleanup(this.deps.stop, () => this.scale.deleteScaleServices());
    }
    this.state = 'finished';
    this.study = { ...this.study, state: 'finished', finishedAt: this.deps.clock.now().toISOString() };
    const study = await this.writeStudy();
    const valid = study.runs.filter((r) => r.valid).length;
    await this.say(`study finished: ${valid} of ${study.runs.length} runs valid`);
    if (this.mode.smoke) await this.writeChecklist();
    await this.writeStatus();
    return study;
  }

  /**
   * Told to stop: every Job of the cell's runner is deleted (the run in progress), within the
   * stop's cleanup time; what is not gone by then the next runner deletes before its first measurement.
   */
  private async clearAfterSignal(): Promise<void> {
    try {
      await asCleanup(this.deps.stop, () => this.jobs.clearCell('this runner stopped'));
      await this.say(`every Job of this runner in cell ${this.plan.cell} is deleted`);
    } catch (error) {
      await this.say(
        `Jobs not all gone before exiting (${(error as Error).message}); the next runner deletes them before its first measurement`,
      );
    }
  }

  /** The smoke study's checklist from its records, written beside them and said line by line. */
  private async writeChecklist(stopped?: string): Promise<void> {
    const checklist = networkSmokeChecklist({
      plan: this.plan,
      records: this.records,
      ...(this.study ? { study: this.study } : {}),
      judge: this.judgeConfig(),
      studyId: this.studyId as string,
      writtenAt: this.deps.clock.now(),
      ...(stopped !== undefined ? { stopped } : {}),
    });
    this.checklist = checklist;
    await this.studyFiles().writeChecklist(checklist);
    for (const line of formatChecklist(checklist)) await this.say(line);
  }

  /**
   * The full study's checks before its first long run: the cell's smoke plan as a smoke study of
   * its own. Every experiment gets its line; any failed proof stops this study, in minutes.
   */
  private async runChecks(plan: NetworkStudyPlan): Promise<void> {
    await this.say(
      `checking every experiment of cell ${plan.cell} before the first long run: a smoke study of ${plan.runs.length} tiny runs`,
    );
    const { checklist, error } = await runNetworkSmokeStudy(this.deps, this.config, plan, this.options);
    if (error && interruption(error)) throw error;
    if (!checklist) throw error ?? new Error('the smoke checks wrote no checklist');
    const failures = checklistFailures(checklist);
    this.study = {
      ...(this.study as Omit<NetworkStudyRecord, 'runs'>),
      checks: { smokeStudyId: checklist.studyId, passed: checklist.passed, failures },
    };
    await this.writeStudy();
    const where = `studies/${checklist.studyId}/smoke-checklist.txt`;
    if (checklist.passed) {
      await this.say(`smoke checks passed for every experiment (${where}); the study begins`);
      return;
    }
    this.checklist = checklist;
    const why = checklist.stopped ? [`the smoke study stopped: ${checklist.stopped}`] : failures;
    throw new StudyStopError({
      reason: `the smoke checks of cell ${plan.cell} failed before the first long run: ${why.join('; ')}`,
      change: `fix what the checklist says (lab status --cell ${plan.cell} prints it; ${where}), then lab run --cell ${plan.cell} resumes this study, which checks every experiment again first`,
    });
  }

  /** The cell's settings the validity checks judge against (lib/network/study/validity.ts). */
  private judgeConfig(): NetworkJudgeConfig {
    return cellJudgeConfig(this.config, this.cell, this.node);
  }

  // ---- One run -------------------------------------------------------------------------------

  private executeRun(index: number, run: NetworkRun): Promise<NetworkRunRecord> {
    const startedAt = this.deps.clock.now();
    return this.active.within(index, run, startedAt, () => this.executeActiveRun(run, startedAt));
  }

  private async executeActiveRun(run: NetworkRun, startedAt: Date): Promise<NetworkRunRecord> {
    // Said before the first wait: the log's `starting` lines are the order the runs started in.
    await this.phase('starting');
    // Its own attempt folder: a killed runner's attempt of this run keeps its files.
    const attempt = await this.jobs.beginAttempt(run.id);
    await this.phase('checking preconditions');
    const unmet: string[] = [];
    for (const precondition of run.preconditions) {
      const problem = await establish(this.kinds, run, precondition);
      if (problem) {
        unmet.push(`not started: ${problem}`);
        break;
      }
    }
    const meshRestart = this.clients.takeMeshRestarts(run.id);
    const outcome: KindOutcome =
      unmet.length > 0 ? { job: 'failed', pods: [], reasons: unmet } : await executeKind(this.kinds, run);
    const draft: RecordDraft = {
      id: run.id,
      cell: run.cell,
      experiment: run.experiment,
      title: run.title,
      ...(run.repeat !== undefined ? { repeat: run.repeat } : {}),
      ...(run.repeatGroup !== undefined ? { repeatGroup: run.repeatGroup } : {}),
      spec: run.spec,
      startedAt: startedAt.toISOString(),
      finishedAt: this.deps.clock.now().toISOString(),
      job: outcome.job,
      ...(outcome.result ? { result: outcome.result } : {}),
      pods: outcome.pods,
      ...(outcome.mtlsMetrics ? { mtlsMetrics: outcome.mtlsMetrics } : {}),
      ...(attempt > 1 ? { attempt } : {}),
      ...(meshRestart.length > 0 ? { meshRestart } : {}),
    };
    const judgment = judgeNetworkRun(
      run,
      {
        job: draft.job,
        ...(draft.result ? { result: draft.result } : {}),
        pods: draft.pods,
        ...(draft.mtlsMetrics ? { mtlsMetrics: draft.mtlsMetrics } : {}),
        host: this.study?.host,
        datapath: this.study?.datapathEvidence,
        earlier: this.plan.runs.flatMap((r) => this.records.get(r.id) ?? []),
        runnerReasons: outcome.reasons,
      },
      this.judgeConfig(),
    );
    return {
      ...draft,
      valid: judgment.valid,
      invalidReasons: judgment.invalidReasons,
      ...(judgment.flags.length > 0 ? { flags: judgment.flags } : {}),
      ...(judgment.mtlsProof ? { mtlsProof: judgment.mtlsProof } : {}),
    };
  }

  // ---- Records and progress ------------------------------------------------------------------

  /**
   * Repeat spread across each repeat group of the plan (flags, never invalid; `judgeRepeats`
   * compares only records of one `repeatGroup`): records whose flags changed are rewritten.
   */
  private async applyRepeatSpread(changedId: string): Promise<void> {
    const recorded = this.plan.runs.flatMap((run) => this.records.get(run.id) ?? []);
    for (const record of judgeRepeats(recorded)) {
      const before = this.records.get(record.id);
      this.records.set(record.id, record);
      if (record.id !== changedId && (before?.flags ?? []).join('\n') !== (record.flags ?? []).join('\n'))
        await this.studyFiles().writeRun(record);
    }
    const latest = this.records.get(changedId);
    if (latest) await this.studyFiles().writeRun(latest);
  }

  studyFiles(): NetworkStudyFiles {
    if (!this.files) throw new Error('internal: the study folder is used before the study was chosen');
    return this.files;
  }

  /** How many E10 steps the plan has. */
  private plannedE10Steps(): number {
    return this.plan.runs.filter((r) => r.spec.kind === 'conntrack').length;
  }

  private async writeStudy(): Promise<NetworkStudyRecord> {
    return this.studyWrites.write(async () => {
      if (!this.study) throw new Error('internal: the study record is written before it was made');
      const study: NetworkStudyRecord = {
        ...this.study,
        runs: this.plan.runs.flatMap((run) => this.records.get(run.id) ?? []),
      };
      await this.studyFiles().writeStudy(study);
      return study;
    });
  }

  async phase(phase: string): Promise<void> {
    if (!this.active.setPhase(phase)) return;
    this.progressTimer.logged(this.deps.clock.now().getTime());
    await this.say(this.progressText());
    await this.writeStatus();
  }

  async progress(): Promise<void> {
    const now = this.deps.clock.now().getTime();
    if (this.active.size > 0 && this.progressTimer.due(now)) {
      await this.say(this.progressText());
    }
    await this.writeStatus();
  }

  private eta(): { elapsedMs: number; etaMs: number | undefined } {
    const entry = this.active.current();
    if (!entry) return { elapsedMs: 0, etaMs: undefined };
    const elapsedMs = this.deps.clock.now().getTime() - entry.startedAt.getTime();
    const durations = [...this.records.values()].map(
      (r) => Date.parse(r.finishedAt) - Date.parse(r.startedAt),
    );
    const after = this.plan.runs.slice(entry.index).filter((run) => !this.records.has(run.id)).length;
    return { elapsedMs, etaMs: studyEtaMs(durations, elapsedMs, after) };
  }

  private progressText(): string {
    const entry = this.active.current();
    if (!entry) return this.log.message;
    const { elapsedMs, etaMs } = this.eta();
    return progressLine(entry.index, this.plan.runs.length, entry.run.id, entry.phase, elapsedMs, etaMs);
  }

  say(line: string): Promise<void> {
    return this.log.say(line);
  }

  private async writeStatus(error?: string): Promise<void> {
    const { elapsedMs, etaMs } = this.eta();
    await this.deps.store.writeStatus(
      studyStatus({
        state: this.state,
        studyId: this.studyId,
        studyStartedAt: this.study?.startedAt,
        startedAt: this.startedAt,
        now: this.deps.clock.now(),
        runIds: this.plan.runs.map((run) => run.id),
        records: this.records,
        active: this.active.current(),
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
