import type { LabConfig } from '../config/schema.ts';
import { type Api, type Arm, type ServerSet, studyArms } from './arms.ts';
import { evenSplit, partitionSeeds, upperBound } from './workload.ts';

/**
 * The study of lab-spec 4.2 as an ordered list of runs, built from the configuration. Charts,
 * the runner, the planner and the report all take their runs from here.
 */

export type RunGroup = 'bound' | 'partition' | 'arm' | 'sweep';

/** `prefix`: vLLM's prefix_repetition dataset; `sharegpt`: the ShareGPT control. */
export type Dataset = 'prefix' | 'sharegpt';

/** Where a benchmark client sends its requests: one replica directly, or an arm's front end. */
export type RunTarget =
  | { readonly kind: 'replica'; readonly servers: ServerSet; readonly replica: number }
  | { readonly kind: 'arm'; readonly arm: string };

/** The prefix_repetition shape of a prefix workload. */
export interface PrefixShape {
  readonly prefixes: number;
  readonly prefixLen: number;
  readonly suffixLen: number;
  readonly outputLen: number;
}

/** One `vllm bench serve` client: everything its Job needs, nothing about Kubernetes. */
export interface BenchmarkSpec {
  /** Unique in the study: the run id, plus `-r<i>` for each client of the ideal partition. */
  readonly id: string;
  readonly target: RunTarget;
  readonly api: Api;
  readonly dataset: Dataset;
  readonly prompts: number;
  readonly concurrency: number;
  readonly seed: number;
  /** Present for the prefix workload, absent for ShareGPT. */
  readonly prefix?: PrefixShape;
  /** File name of the client's saved JSON (`--result-filename`). */
  readonly resultFile: string;
}

export interface StudyRun {
  /** Stable id: `bound-p128`, `partition`, `arm-epp-sharegpt`, `sweep-c4-kube-proxy`, ... */
  readonly id: string;
  readonly group: RunGroup;
  readonly title: string;
  /** The arm under test (arm and sweep runs). */
  readonly arm?: string;
  readonly dataset: Dataset;
  /** Clients started together: one, or one per replica for the ideal partition. */
  readonly benchmarks: readonly BenchmarkSpec[];
  /** What must be reset before the run starts (lab-spec 4.2, lesson 9). */
  readonly reset: RunReset;
  /** Requests the replicas must have served: every prompt plus one warm-up per client. */
  readonly expectedRequests: number;
  /** Theoretical single-replica hit-rate bound of the workload (prefix runs only), 0-1. */
  readonly upperBound?: number;
  /** Arm runs: which of the `study.repeats` runs of this arm and dataset it is, from 1. */
  readonly repeat?: number;
}

export interface RunReset {
  /** Replicas whose prefix caches are reset. */
  readonly prefixCaches: ServerSet;
  /**
   * Only these replicas of the set belong to the run (reset, scraped, judged): a bound run uses
   * one replica and runs beside the bound runs on the others (`runWaves`). Absent: every replica.
   */
  readonly replicas?: readonly number[];
  /** The arm whose front end keeps its own prefix index and is restarted, if any. */
  readonly restartFrontEndOf?: string;
}

export interface StudyPlan {
  readonly runs: readonly StudyRun[];
}

export function studyPlan(config: LabConfig): StudyPlan {
  const arms = studyArms(config);
  const byId = new Map(arms.map((arm) => [arm.id, arm]));
  const runs: StudyRun[] = [
    ...config.study.boundSweepPrefixes.map((prefixes, i) =>
      boundRun(config, prefixes, i % config.vllm.replicas),
    ),
    partitionRun(config),
    ...arms.filter((arm) => !arm.optional).flatMap((arm) => armRuns(config, arm)),
    ...config.study.concurrencySweep.levels.flatMap((level) =>
      config.study.concurrencySweep.arms.map((id) => sweepRun(config, mustFind(byId, id), level)),
    ),
    ...arms.filter((arm) => arm.optional).flatMap((arm) => armRuns(config, arm)),
    // Further repeats, interleaved across arms (A B C A B C): a drift over the study's hours (a
    // warming GPU, a noisy neighbour) spreads over every arm instead of biasing the last one.
    ...Array.from({ length: config.study.repeats - 1 }, (_, i) =>
      arms.flatMap((arm) => armRuns(config, arm, i + 2)),
    ).flat(),
  ];
  return { runs };
}

/** Id of an arm run: repeat 1 keeps the plain id, so a study without repeats has the ids it always had. */
export function armRunId(armId: string, dataset: Dataset, repeat = 1): string {
  return repeat === 1 ? `arm-${armId}-${dataset}` : `arm-${armId}-${dataset}-rep${repeat}`;
}

/** The run with this id, or an error listing the ids that exist. */
export function findRun(plan: StudyPlan, id: string): StudyRun {
  const run = plan.runs.find((r) => r.id === id);
  if (!run)
    throw new Error(`no run "${id}" in the study plan; runs: ${plan.runs.map((r) => r.id).join(', ')}`);
  return run;
}

function prefixShape(config: LabConfig, prefixes: number): PrefixShape {
  const { prefixLen, suffixLen, outputLen } = config.workload;
  return { prefixes, prefixLen, suffixLen, outputLen };
}

/**
 * The single-replica hit-rate bound (lab-spec 4.1). Requests look up prefix + suffix + chat
 * template tokens over `/v1/chat/completions`; `/v1/completions` sends the prompt as is, with no
 * chat template, so there L = prefix + suffix.
 */
function boundFor(config: LabConfig, prefixes: number, prompts: number, api: Api = 'chat'): number {
  const chatTemplateTokens = api === 'completions' ? 0 : config.workload.chatTemplateTokens;
  return upperBound({ ...config.workload, chatTemplateTokens, prefixes, prompts });
}

/**
 * Runs that may execute at once, in plan order: consecutive runs that each own different
 * replicas of the same set (the bound sweep, one run per replica) form one wave; every other
 * run is a wave of its own. The runs of a wave share the host's CPUs, but no GPU or cache.
 */
export function runWaves(plan: StudyPlan): StudyRun[][] {
  const waves: StudyRun[][] = [];
  for (const run of plan.runs) {
    const wave = waves.at(-1);
    const own = run.reset.replicas;
    const fits =
      wave !== undefined &&
      own !== undefined &&
      wave.every(
        (other) =>
          other.reset.replicas !== undefined &&
          other.reset.prefixCaches === run.reset.prefixCaches &&
          other.reset.replicas.every((r) => !own.includes(r)),
      );
    if (fits) wave.push(run);
    else waves.push([run]);
  }
  return waves;
}

/** A bound run: one replica, directly. Its replica alternates so the sweep runs one run per replica at once. */
function boundRun(config: LabConfig, prefixes: number, replica: number): StudyRun {
  const id = `bound-p${prefixes}`;
  const { prompts, concurrency, seed } = config.workload;
  return {
    id,
    group: 'bound',
    title: `Upper bound: one replica directly, ${prefixes} prefixes`,
    dataset: 'prefix',
    benchmarks: [
      {
        id,
        target: { kind: 'replica', servers: 'standard', replica },
        api: 'chat',
        dataset: 'prefix',
        prompts,
        concurrency,
        seed,
        prefix: prefixShape(config, prefixes),
        resultFile: `${id}.json`,
      },
    ],
    reset: { prefixCaches: 'standard', replicas: [replica] },
    expectedRequests: prompts + 1,
    upperBound: boundFor(config, prefixes, prompts),
  };
}

/**
 * The reference the arms are judged against: each replica gets its own share of the prefixes
 * (with its own seed, so the shares differ) and of the concurrency, all clients at once.
 */
function partitionRun(config: LabConfig): StudyRun {
  const { replicas } = config.vllm;
  const { prompts, prefixes, concurrency } = config.workload;
  const seeds = partitionSeeds(config.workload, replicas);
  const repeats = prompts / prefixes;
  const prefixShares = evenSplit(prefixes, replicas);
  const concurrencyShares = evenSplit(concurrency, replicas);
  const benchmarks = prefixShares.map(
    (share, replica): BenchmarkSpec => ({
      id: `partition-r${replica}`,
      target: { kind: 'replica', servers: 'standard', replica },
      api: 'chat',
      dataset: 'prefix',
      prompts: share * repeats,
      concurrency: concurrencyShares[replica],
      seed: seeds[replica],
      prefix: prefixShape(config, share),
      resultFile: `partition-r${replica}.json`,
    }),
  );
  return {
    id: 'partition',
    group: 'partition',
    title: `Ideal partition: ${prefixShares.join(' + ')} prefixes pinned to ${replicas} replicas`,
    dataset: 'prefix',
    benchmarks,
    reset: { prefixCaches: 'standard' },
    expectedRequests: prompts + benchmarks.length,
    upperBound: boundFor(config, prefixes, prompts),
  };
}

function armRuns(config: LabConfig, arm: Arm, repeat = 1): StudyRun[] {
  const datasets: Dataset[] = config.study.sharegptControl ? ['prefix', 'sharegpt'] : ['prefix'];
  return datasets.map((dataset) => {
    const run = frontEndRun(
      config,
      arm,
      dataset,
      config.workload.concurrency,
      armRunId(arm.id, dataset, repeat),
      'arm',
    );
    const title =
      config.study.repeats > 1 ? `${run.title} (repeat ${repeat} of ${config.study.repeats})` : run.title;
    return { ...run, title, repeat };
  });
}

function sweepRun(config: LabConfig, arm: Arm, concurrency: number): StudyRun {
  return frontEndRun(config, arm, 'prefix', concurrency, `sweep-c${concurrency}-${arm.id}`, 'sweep');
}

function frontEndRun(
  config: LabConfig,
  arm: Arm,
  dataset: Dataset,
  concurrency: number,
  id: string,
  group: RunGroup,
): StudyRun {
  const { prompts, prefixes, seed } = config.workload;
  const what = dataset === 'prefix' ? 'prefix workload' : 'ShareGPT control';
  return {
    id,
    group,
    title: `${arm.title}: ${what}, concurrency ${concurrency}`,
    arm: arm.id,
    dataset,
    benchmarks: [
      {
        id,
        target: { kind: 'arm', arm: arm.id },
        api: arm.api,
        dataset,
        prompts,
        concurrency,
        seed,
        ...(dataset === 'prefix' ? { prefix: prefixShape(config, prefixes) } : {}),
        resultFile: `${id}.json`,
      },
    ],
    reset: {
      prefixCaches: arm.servers,
      ...(arm.keepsPrefixIndex ? { restartFrontEndOf: arm.id } : {}),
    },
    expectedRequests: prompts + 1,
    ...(dataset === 'prefix' ? { upperBound: boundFor(config, prefixes, prompts, arm.api) } : {}),
  };
}

function mustFind(arms: Map<string, Arm>, id: string): Arm {
  const arm = arms.get(id);
  // The configuration rules reject unknown or disabled sweep arms; this guards direct callers.
  if (!arm) throw new Error(`study.concurrencySweep.arms: "${id}" is not an arm of this study`);
  return arm;
}
