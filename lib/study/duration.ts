import type { LabConfig } from '../config/schema.ts';
import { armInput, armRouting } from './arm-predictions.ts';
import { type Arm, studyArms } from './arms.ts';
import { type RunGroup, runPrerequisites, type StudyPlan, type StudyRun } from './plan.ts';
import { planEngine, planInput } from './planner.ts';
import { type Routing, type SimulationInput, simulate } from './simulator.ts';

/**
 * How long the study occupies the instance after the bootstrap, and what that costs (issue 11):
 * the benchmark load of every run from the simulator's virtual time, plus the runner's per-run
 * overheads. Pure: numbers in, numbers out.
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
  /** The runner's own work per run: scrapes, polls (5 s apart), result files, records. */
  readonly runnerSeconds: number;
  /** The preflight request through a front end, once per arm. */
  readonly preflightSeconds: number;
}

/**
 * The overheads the estimate assumes, and where each figure comes from.
 * - `runnerSeconds`: measured in the rehearsal (`scripts/bench-study.ts` prints it): the time a
 *   run takes beyond its Job and front-end restart is the poll granularity, 5 s at most.
 * - `resetSeconds`: the runner confirms a reset at 1 s polls of the pod log; 3 s allows two polls.
 * - `jobStartSeconds`: not measurable without a cluster. The review measured 30-60 s with
 *   the image pulled and the tokenizer downloaded at each start; with both pre-staged by the
 *   bootstrap the start is the pod start and the client's imports, taken here as 30 s.
 * - `frontEndRestartSeconds`: a router that installs offline (charts/routers.ts) starts its
 *   process only; an EPP is a Go binary. Taken as 20 s, the fake cluster's rollout time.
 * - `preflightSeconds`: one request of one token.
 */
export const DEFAULT_RUN_OVERHEADS: RunOverheads = {
  jobStartSeconds: 30,
  frontEndRestartSeconds: 20,
  resetSeconds: 3,
  runnerSeconds: 5,
  preflightSeconds: 2,
};

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
  /** Everything else the run needs: Job start, reset, front-end restart, preflight, runner. */
  readonly overheadSeconds: number;
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
  const preflighted = new Set<string>();
  const runs = plan.runs.map((run): RunEstimate => {
    const { input, routing } = runSimulation(config, run, arms);
    const loadSeconds = simulate(input, routing, engine).timing.durationSeconds;
    const firstOfArm = run.arm !== undefined && !preflighted.has(run.arm);
    if (run.arm) preflighted.add(run.arm);
    const overheadSeconds =
      overheads.jobStartSeconds +
      overheads.resetSeconds +
      overheads.runnerSeconds +
      (run.reset.restartFrontEndOf ? overheads.frontEndRestartSeconds : 0) +
      (firstOfArm ? overheads.preflightSeconds : 0);
    return { id: run.id, group: run.group, loadSeconds, overheadSeconds };
  });
  const byId = new Map(runs.map((r) => [r.id, r]));
  const groups = {
    bound: { loadSeconds: 0, overheadSeconds: 0 },
    partition: { loadSeconds: 0, overheadSeconds: 0 },
    arm: { loadSeconds: 0, overheadSeconds: 0 },
    sweep: { loadSeconds: 0, overheadSeconds: 0 },
  } satisfies Record<RunGroup, { loadSeconds: number; overheadSeconds: number }>;
  const schedule = studySchedule(plan, (run) => {
    const r = byId.get(run.id) as RunEstimate;
    return r.loadSeconds + r.overheadSeconds;
  });
  let totalSeconds = 0;
  for (const run of plan.runs) {
    // What this run adds to the study's end, split between its load and its overhead.
    const { end } = schedule.get(run.id) as ScheduledRun;
    const added = Math.max(0, end - totalSeconds);
    totalSeconds = Math.max(totalSeconds, end);
    const r = byId.get(run.id) as RunEstimate;
    const share = added / (r.loadSeconds + r.overheadSeconds || 1);
    groups[r.group].loadSeconds += r.loadSeconds * share;
    groups[r.group].overheadSeconds += r.overheadSeconds * share;
  }
  const serialSeconds = runs.reduce((sum, r) => sum + r.loadSeconds + r.overheadSeconds, 0);
  return {
    runs,
    groups,
    totalSeconds,
    serialSeconds,
    pricePerHourUsd,
    costUsd: (totalSeconds / 3600) * pricePerHourUsd,
  };
}

/** When a run starts and ends, in seconds from the study's start. */
export interface ScheduledRun {
  readonly start: number;
  readonly end: number;
}

/**
 * When each run would start and end as the runner orders them (`runPrerequisites`): a run starts
 * once every earlier run it waits for has ended. Pure; `seconds` is each run's whole duration.
 */
export function studySchedule(
  plan: StudyPlan,
  seconds: (run: StudyRun) => number,
): Map<string, ScheduledRun> {
  const after = runPrerequisites(plan);
  const schedule = new Map<string, ScheduledRun>();
  for (const run of plan.runs) {
    const start = Math.max(0, ...(after.get(run.id) ?? []).map((id) => schedule.get(id)?.end ?? 0));
    schedule.set(run.id, { start, end: start + seconds(run) });
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
    '  load: simulated benchmark time; overhead: Job start, verified reset, front-end restart, preflight, runner (lib/study/duration.ts)',
    '',
  ].join('\n');
}
