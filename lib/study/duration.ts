import type { LabConfig } from '../config/schema.ts';
import { armInput, armRouting } from './arm-predictions.ts';
import { type Arm, studyArms } from './arms.ts';
import { type RunGroup, runPrerequisites, type StudyPlan, type StudyRun } from './plan.ts';
import { planEngine, planInput } from './planner.ts';
import { type Routing, type SimulationInput, simulate } from './simulator.ts';
import { READY_CHECK_RETRY_SECONDS, type StagedRun, stagedAfter } from './staging.ts';

/**
 * How long the study occupies the instance after the bootstrap, and what that costs (issue 11):
 * the benchmark load of every run from the simulator's virtual time, plus the runner's per-run
 * overheads, less what staging hides behind the run before (lib/study/staging.ts). Pure: numbers
 * in, numbers out.
 */

/** Seconds the runner spends around a run's benchmark load. */
export interface RunOverheads {
  /**
   * From creating a client Job to its first request: pod start with the image on the node, the
   * client's Python imports, the tokenizer and dataset from the host cache, the warm-up request.
   */
  readonly jobStartSeconds: number;
  /** Restart of a front end that keeps its own prefix index, until its rollout is complete. */
  readonly frontEndRestartSeconds: number;
  /** Idle check, POST /reset_prefix_cache and its confirmation in the log, per run. */
  readonly resetSeconds: number;
  /** The runner's own work per run: scrapes, Job polls (1 s apart), result files, records. */
  readonly runnerSeconds: number;
  /** The preflight request through a front end, once per arm. */
  readonly preflightSeconds: number;
  /**
   * A staged run (lib/study/staging.ts): from opening its gate to its client's next ready-check
   * probe, which passes. Taken at its worst, the probe interval.
   */
  readonly gateSeconds: number;
}

/**
 * The overheads the estimate assumes, and where each figure comes from.
 * - `runnerSeconds`: measured in the rehearsal (`scripts/bench-study.ts` prints it: 0.6 s,
 *   half a 1 s Job poll included: a Job ends between two polls); 2 s here, to spare.
 * - `resetSeconds`: the runner confirms a reset at 1 s polls of the pod log; 3 s allows two polls.
 * - `jobStartSeconds`: not measurable without a cluster. The review measured 30-60 s with
 *   the image pulled and the tokenizer downloaded at each start; with both pre-staged by the
 *   bootstrap the start is the pod start and the client's imports, taken here as 30 s.
 * - `frontEndRestartSeconds`: a router that installs offline (charts/routers.ts) starts its
 *   process only; an EPP is a Go binary. Taken as 20 s, the fake cluster's rollout time.
 * - `preflightSeconds`: one request of one token.
 * - `gateSeconds`: a staged client waits in the ready check of `vllm bench serve`, which sleeps
 *   `retry_interval` (5 s) after each refused probe (vllm/benchmarks/lib/ready_checker.py,
 *   `wait_for_endpoint`): the worst case between opening the gate and the passing probe.
 * With staging on, most of `jobStartSeconds` and `frontEndRestartSeconds` runs during the earlier
 * run's load and costs no instance time: the two assumed figures then matter little.
 */
export const DEFAULT_RUN_OVERHEADS: RunOverheads = {
  jobStartSeconds: 30,
  frontEndRestartSeconds: 20,
  resetSeconds: 3,
  runnerSeconds: 2,
  preflightSeconds: 2,
  gateSeconds: READY_CHECK_RETRY_SECONDS,
};

/** The overheads staging can run during the earlier run's load. */
export interface HiddenOverheads {
  readonly jobStartSeconds: number;
  readonly frontEndRestartSeconds: number;
}

/**
 * ShareGPT's shape for the simulator, which has no ShareGPT dataset: unique prompts of the mean
 * lengths `vllm bench serve` reported for 1,000 ShareGPT prompts in vllm-project/vllm pull
 * request #18566 (229,711 input and 203,068 generated tokens, Llama 3.1 tokenizer). With
 * `--ignore-eos` every output runs to the dataset's length, so the real mean is at least that.
 */
export const SHAREGPT_MEAN_TOKENS = { input: 230, output: 203 } as const;

/** One run's estimate. */
export interface RunEstimate {
  readonly id: string;
  readonly group: RunGroup;
  /** Virtual time of the benchmark load (the simulator's `timing.durationSeconds`). */
  readonly loadSeconds: number;
  /** Everything else the run needs: Job start, reset, front-end restart, preflight, runner, gate. */
  readonly overheadSeconds: number;
  /** `overheadSeconds` per kind: what the run adds of each (0 for a kind it does not need). */
  readonly overheads: RunOverheads;
  /** A staged run: the run during whose load its clients start (lib/study/staging.ts). */
  readonly stagedAfter?: string;
  /** A staged run: the overhead it runs during that load, so left out of `overheadSeconds`. */
  readonly hiddenSeconds?: HiddenOverheads;
}

/** What staging the next run (`runner.stageNextRun`) does to the study. */
export interface StagingEstimate {
  /** `runner.stageNextRun` */
  readonly enabled: boolean;
  /** Runs whose clients start during an earlier run's load. */
  readonly stagedRuns: number;
  /** Front ends restarted during an earlier run's load (`restartEarly`). */
  readonly earlyRestarts: number;
  /** Overhead run during earlier runs' load, summed over the staged runs. */
  readonly hiddenSeconds: HiddenOverheads;
  /** What the gates add, summed over the staged runs. */
  readonly gateSeconds: number;
}

/** The study's estimate, per run group and in all. */
export interface StudyEstimate {
  readonly runs: readonly RunEstimate[];
  /**
   * Per run group: load and overhead seconds as the instance spends them, that is what each run
   * adds to the study's end in plan order (runs at once count once).
   */
  readonly groups: Readonly<
    Record<RunGroup, { readonly loadSeconds: number; readonly overheadSeconds: number }>
  >;
  /** Instance seconds after the bootstrap, runs that execute at once overlapping (`studySchedule`). */
  readonly totalSeconds: number;
  /** The same study with every run one after the other. */
  readonly serialSeconds: number;
  readonly pricePerHourUsd: number;
  readonly costUsd: number;
  /** The per-run overheads the estimate assumes. */
  readonly assumedOverheads: RunOverheads;
  /** Every run's `overheads`, summed per kind (runs at once each count). */
  readonly overheadTotals: RunOverheads;
  readonly staging: StagingEstimate;
}

/**
 * The simulator input and routing of a run's benchmark load: an arm runs through its front end's
 * model, the same one `lab plan` predicts it with (lib/study/arm-predictions.ts).
 */
export function runSimulation(
  config: LabConfig,
  run: StudyRun,
  arms: ReadonlyMap<string, Arm>,
): { input: SimulationInput; routing: Routing } {
  const base = planInput(config);
  const spec = run.benchmarks[0];
  const shape: Partial<SimulationInput> =
    run.dataset === 'sharegpt'
      ? {
          prefixes: base.prompts,
          prefixLen: SHAREGPT_MEAN_TOKENS.input,
          suffixLen: 1,
          outputLen: SHAREGPT_MEAN_TOKENS.output,
          chatTemplateTokens: 0,
        }
      : { prefixes: spec.prefix?.prefixes ?? base.prefixes };
  if (run.group === 'bound') {
    return {
      input: { ...base, ...shape, replicas: 1, concurrency: spec.concurrency },
      routing: 'single-replica',
    };
  }
  if (run.group === 'partition') {
    return { input: { ...base, ...shape }, routing: 'ideal-partition' };
  }
  const arm = arms.get(run.arm ?? '');
  if (!arm) throw new Error(`run ${run.id}: arm "${run.arm}" is not an arm of this study`);
  return {
    input: armInput(config, arm, { ...base, ...shape, concurrency: spec.concurrency }),
    routing: armRouting(config, arm),
  };
}

/** Estimates every run of the plan and the study's instance time and cost. */
export function estimateStudy(
  config: LabConfig,
  plan: StudyPlan,
  overheads: RunOverheads = DEFAULT_RUN_OVERHEADS,
  /** Hourly cost of every host the study runs on (the GPU host and its agents). */
  pricePerHourUsd: number = config.instance.pricePerHourUsd,
): StudyEstimate {
  const arms = new Map(studyArms(config).map((arm) => [arm.id, arm]));
  const engine = planEngine(config);
  const after = runPrerequisites(plan);
  const behind = stagingOf(config, plan, after);
  const preflighted = new Set<string>();
  const byId = new Map<string, RunEstimate>();
  // In plan order: a staged run's overhead depends on when the runs before it end.
  const schedule = studySchedule(plan, (run, scheduled) => {
    const { input, routing } = runSimulation(config, run, arms);
    const loadSeconds = simulate(input, routing, engine).timing.durationSeconds;
    const firstOfArm = run.arm !== undefined && !preflighted.has(run.arm);
    if (run.arm) preflighted.add(run.arm);
    const staged = stagingWindow(behind.get(run.id) ?? [], after.get(run.id) ?? [], scheduled, byId);
    const estimate = runEstimate(run, loadSeconds, firstOfArm, overheads, staged);
    byId.set(run.id, estimate);
    return loadSeconds + estimate.overheadSeconds;
  });
  const runs = plan.runs.map((run) => byId.get(run.id) as RunEstimate);
  const groups = {
    bound: { loadSeconds: 0, overheadSeconds: 0 },
    partition: { loadSeconds: 0, overheadSeconds: 0 },
    arm: { loadSeconds: 0, overheadSeconds: 0 },
    sweep: { loadSeconds: 0, overheadSeconds: 0 },
  } satisfies Record<RunGroup, { loadSeconds: number; overheadSeconds: number }>;
  let totalSeconds = 0;
  for (const r of runs) {
    // What this run adds to the study's end, split between its load and its overhead.
    const { end } = schedule.get(r.id) as ScheduledRun;
    const added = Math.max(0, end - totalSeconds);
    totalSeconds = Math.max(totalSeconds, end);
    const share = added / (r.loadSeconds + r.overheadSeconds || 1);
    groups[r.group].loadSeconds += r.loadSeconds * share;
    groups[r.group].overheadSeconds += r.overheadSeconds * share;
  }
  const serialSeconds = runs.reduce((sum, r) => sum + r.loadSeconds + r.overheadSeconds, 0);
  const staged = runs.filter((r) => r.stagedAfter !== undefined);
  return {
    runs,
    groups,
    totalSeconds,
    serialSeconds,
    pricePerHourUsd,
    costUsd: (totalSeconds / 3600) * pricePerHourUsd,
    assumedOverheads: overheads,
    overheadTotals: sumOverheads(runs.map((r) => r.overheads)),
    staging: {
      enabled: config.runner.stageNextRun,
      stagedRuns: staged.length,
      earlyRestarts: staged.filter((r) => (r.hiddenSeconds?.frontEndRestartSeconds ?? 0) > 0).length,
      hiddenSeconds: {
        jobStartSeconds: sum(staged.map((r) => r.hiddenSeconds?.jobStartSeconds ?? 0)),
        frontEndRestartSeconds: sum(staged.map((r) => r.hiddenSeconds?.frontEndRestartSeconds ?? 0)),
      },
      gateSeconds: sum(staged.map((r) => r.overheads.gateSeconds)),
    },
  };
}

/** An earlier run during whose load a run is staged (`stagedAfter`), and whether its front end restarts then. */
interface StagedBehind {
  readonly after: StudyRun;
  readonly restartEarly: boolean;
}

/** For each staged run, the runs `stagedAfter` stages it after (more than one when those run at once). */
function stagingOf(
  config: LabConfig,
  plan: StudyPlan,
  after: ReadonlyMap<string, readonly string[]>,
): Map<string, StagedBehind[]> {
  const behind = new Map<string, StagedBehind[]>();
  for (const run of plan.runs) {
    const staged: StagedRun | undefined = stagedAfter(config, plan, run, undefined, after);
    if (!staged) continue;
    const list = behind.get(staged.run.id) ?? [];
    list.push({ after: run, restartEarly: staged.restartEarly });
    behind.set(staged.run.id, list);
  }
  return behind;
}

/** Where a staged run's clients start, and how many seconds they have until that run ends. */
interface StagingWindow extends StagedBehind {
  readonly seconds: number;
}

/**
 * The seconds a staged run's clients (and an early restart) have before the run it is staged
 * after ends: that run's load, from when every other run the staged one waits for has ended (the
 * runner stages only then: `stagedAfter`). Of several such runs, the one leaving the most time.
 */
function stagingWindow(
  behind: readonly StagedBehind[],
  prerequisites: readonly string[],
  scheduled: ReadonlyMap<string, ScheduledRun>,
  estimates: ReadonlyMap<string, RunEstimate>,
): StagingWindow | undefined {
  let best: StagingWindow | undefined;
  for (const earlier of behind) {
    const id = earlier.after.id;
    const end = scheduled.get(id)?.end ?? 0;
    const othersEnd = Math.max(
      0,
      ...prerequisites.filter((p) => p !== id).map((p) => scheduled.get(p)?.end ?? 0),
    );
    const load = estimates.get(id)?.loadSeconds ?? 0;
    const seconds = Math.max(0, Math.min(load, end - othersEnd));
    if (!best || seconds >= best.seconds) best = { ...earlier, seconds };
  }
  return best;
}

/**
 * A run's overheads. Unstaged: Job start, reset, runner, a front-end restart when its front end
 * keeps an index, the preflight on its arm's first run. Staged: the Job start and an early
 * restart run during the window, so only what outlasts it counts; the gate is added.
 */
function runEstimate(
  run: StudyRun,
  loadSeconds: number,
  firstOfArm: boolean,
  o: RunOverheads,
  staged: StagingWindow | undefined,
): RunEstimate {
  const window = staged?.seconds ?? 0;
  const restarts = run.reset.restartFrontEndOf !== undefined;
  const early = (staged?.restartEarly ?? false) && restarts;
  const overheads: RunOverheads = {
    jobStartSeconds: staged ? Math.max(0, o.jobStartSeconds - window) : o.jobStartSeconds,
    frontEndRestartSeconds: !restarts
      ? 0
      : early
        ? Math.max(0, o.frontEndRestartSeconds - window)
        : o.frontEndRestartSeconds,
    resetSeconds: o.resetSeconds,
    runnerSeconds: o.runnerSeconds,
    preflightSeconds: firstOfArm ? o.preflightSeconds : 0,
    gateSeconds: staged ? o.gateSeconds : 0,
  };
  return {
    id: run.id,
    group: run.group,
    loadSeconds,
    overheadSeconds: sum(Object.values(overheads)),
    overheads,
    ...(staged
      ? {
          stagedAfter: staged.after.id,
          hiddenSeconds: {
            jobStartSeconds: o.jobStartSeconds - overheads.jobStartSeconds,
            frontEndRestartSeconds: early ? o.frontEndRestartSeconds - overheads.frontEndRestartSeconds : 0,
          },
        }
      : {}),
  };
}

function sumOverheads(list: readonly RunOverheads[]): RunOverheads {
  const total = (key: keyof RunOverheads) => sum(list.map((o) => o[key]));
  return {
    jobStartSeconds: total('jobStartSeconds'),
    frontEndRestartSeconds: total('frontEndRestartSeconds'),
    resetSeconds: total('resetSeconds'),
    runnerSeconds: total('runnerSeconds'),
    preflightSeconds: total('preflightSeconds'),
    gateSeconds: total('gateSeconds'),
  };
}

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

/** When a run starts and ends, in seconds from the study's start. */
export interface ScheduledRun {
  readonly start: number;
  readonly end: number;
}

/**
 * When each run would start and end as the runner orders them (`runPrerequisites`): a run starts
 * once every earlier run it waits for has ended. `seconds` is each run's whole duration; it is
 * called in plan order with every earlier run already scheduled.
 */
export function studySchedule(
  plan: StudyPlan,
  seconds: (run: StudyRun, scheduled: ReadonlyMap<string, ScheduledRun>) => number,
): Map<string, ScheduledRun> {
  const after = runPrerequisites(plan);
  const schedule = new Map<string, ScheduledRun>();
  for (const run of plan.runs) {
    const start = Math.max(0, ...(after.get(run.id) ?? []).map((id) => schedule.get(id)?.end ?? 0));
    schedule.set(run.id, { start, end: start + seconds(run, schedule) });
  }
  return schedule;
}

const minutes = (seconds: number) => `${(seconds / 60).toFixed(1)} min`;

/** The estimate as `lab plan` prints it. */
export function formatEstimate(estimate: StudyEstimate): string {
  const rows = (
    Object.entries(estimate.groups) as [RunGroup, { loadSeconds: number; overheadSeconds: number }][]
  )
    .filter(([group]) => estimate.runs.some((r) => r.group === group))
    .map(([group, g]) => {
      const count = estimate.runs.filter((r) => r.group === group).length;
      return `  ${group.padEnd(10)} ${String(count).padStart(3)} run(s)  load ${minutes(g.loadSeconds).padStart(9)}  overhead ${minutes(g.overheadSeconds).padStart(9)}`;
    });
  return [
    `Estimated study duration after the bootstrap: ${minutes(estimate.totalSeconds)} (${minutes(estimate.serialSeconds)} if every run were serial), about ${estimate.costUsd.toFixed(2)} USD at ${estimate.pricePerHourUsd} USD/h`,
    ...rows,
    `  overhead per kind, summed over the runs: ${formatOverheads(estimate.overheadTotals)}`,
    formatStaging(estimate),
    '  load: simulated benchmark time; overhead: Job start, verified reset, front-end restart, preflight, runner, gate (lib/study/duration.ts)',
    '',
  ].join('\n');
}

/** Overhead seconds per kind, in minutes. */
export function formatOverheads(o: RunOverheads): string {
  return [
    `Job start ${minutes(o.jobStartSeconds)}`,
    `front-end restart ${minutes(o.frontEndRestartSeconds)}`,
    `reset ${minutes(o.resetSeconds)}`,
    `runner ${minutes(o.runnerSeconds)}`,
    `preflight ${minutes(o.preflightSeconds)}`,
    `gate ${minutes(o.gateSeconds)}`,
  ].join(', ');
}

/** What staging the next run does to the estimate, in one line. */
export function formatStaging(estimate: StudyEstimate): string {
  const s = estimate.staging;
  if (!s.enabled)
    return '  staging off (runner.stageNextRun: false): every run starts its clients when it starts';
  return `  staging (runner.stageNextRun): ${s.stagedRuns} of ${estimate.runs.length} runs start their clients during the run before, hiding Job starts ${minutes(s.hiddenSeconds.jobStartSeconds)} and ${s.earlyRestarts} front-end restart(s) ${minutes(s.hiddenSeconds.frontEndRestartSeconds)}; their gates add ${minutes(s.gateSeconds)}`;
}
