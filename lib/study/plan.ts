import type { LabConfig } from '../config/schema.ts';
import { type Api, type Arm, type ServerSet, studyArms } from './arms.ts';
import { onEveryPair } from './pairs.ts';
import { frontEnd } from './topology.ts';
import { evenSplit, partitionSeeds, upperBound } from './workload.ts';

/**
 * The study of docs/facts.md §4.2 as an ordered list of runs, built from the configuration. Charts,
 * the runner, the planner and the report all take their runs from here.
 */

export type RunGroup = 'bound' | 'partition' | 'arm' | 'sweep';

/** `prefix`: vLLM's prefix_repetition dataset; `sharegpt`: the ShareGPT control. */
export type Dataset = 'prefix' | 'sharegpt';

/**
 * Where a benchmark client sends its requests: one replica directly, or an arm's front end, on a
 * replica pair (lib/study/pairs.ts; absent: pair 0, the only one unless `study.parallelism` is 2).
 */
export type RunTarget =
  | {
      readonly kind: 'replica';
      readonly servers: ServerSet;
      readonly replica: number;
      readonly pair?: number;
    }
  | { readonly kind: 'arm'; readonly arm: string; readonly pair?: number };

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
  /** What must be reset before the run starts (docs/facts.md §4.2, lesson 9). */
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
   * one replica and runs beside the bound runs on the others (`runPrerequisites`). Absent: every replica.
   */
  readonly replicas?: readonly number[];
  /** The arm whose front end keeps its own prefix index and is restarted, if any. */
  readonly restartFrontEndOf?: string;
  /**
   * The replica pair whose replicas (and front end) the run uses: set only for pair 1 of
   * `study.parallelism: 2` (lib/study/pairs.ts). Absent: pair 0.
   */
  readonly pair?: number;
}

export interface StudyPlan {
  readonly runs: readonly StudyRun[];
}

export function studyPlan(config: LabConfig): StudyPlan {
  const arms = studyArms(config);
  const byId = new Map(arms.map((arm) => [arm.id, arm]));
  const required = arms.filter((arm) => !arm.optional);
  const optional = arms.filter((arm) => arm.optional);
  // One bound run per replica at once: with two pairs the sweep spreads over all four replicas.
  const slots = config.vllm.replicas * config.study.parallelism;
  const runs: StudyRun[] = [
    ...config.study.boundSweepPrefixes.map((prefixes, i) =>
      boundRun(config, prefixes, i % config.vllm.replicas, Math.floor((i % slots) / config.vllm.replicas)),
    ),
    partitionRun(config),
    ...armBlock(config, required),
    ...config.study.concurrencySweep.levels.flatMap((level) =>
      config.study.concurrencySweep.arms.map((id) => sweepRun(config, mustFind(byId, id), level)),
    ),
    ...armBlock(config, optional),
    // Further repeats, interleaved across arms (A B C A B C): a drift over the study's hours (a
    // warming GPU, a noisy neighbour) spreads over every arm instead of biasing the last one.
    ...Array.from({ length: config.study.repeats - 1 }, (_, i) => armBlock(config, arms, i + 2)).flat(),
  ];
  return { runs: assignPairs(runs, byId, config.study.parallelism) };
}

/**
 * Gives the partition, arm and sweep runs their replica pair. In plan order, the partition (the
 * replicas directly) and each run whose arm has a front end on every pair (`onEveryPair`) take
 * the pair after the previous run's, unless that pair's latest run was of the same arm and
 * another pair's was not: then that other pair. A pair never runs one arm twice in a row, so its
 * next front end can restart during its current run (lib/study/staging.ts), and the concurrency
 * sweep (each level over the same arms) spreads each arm over both pairs instead of putting all
 * its levels on one. The optional arms stay on pair 0. The turns start with the last pair: pair 0
 * holds the bound sweep's first runs (the most prefixes, the longest), so the last pair is free
 * first. Each pair then goes through its runs beside the other (`runPrerequisites`). With one
 * pair nothing changes.
 */
function assignPairs(runs: StudyRun[], arms: ReadonlyMap<string, Arm>, pairs: number): StudyRun[] {
  if (pairs === 1) return runs;
  let next = pairs - 1;
  const latestArm = new Map<number, string | undefined>();
  return runs.map((run) => {
    if (run.group === 'bound') return run;
    const arm = run.arm === undefined ? undefined : arms.get(run.arm);
    const turns = run.group === 'partition' || (arm && onEveryPair(arm));
    const pair = turns
      ? pairInTurn(next, pairs, (p) => run.arm !== undefined && latestArm.get(p) === run.arm)
      : 0;
    latestArm.set(pair, run.arm);
    next = (pair + 1) % pairs;
    return pair === 0 ? run : onPair(run, pair);
  });
}

/** `next`, or the first pair after it that is not `busy`; `next` when every pair is. */
function pairInTurn(next: number, pairs: number, busy: (pair: number) => boolean): number {
  const order = Array.from({ length: pairs }, (_, i) => (next + i) % pairs);
  return order.find((pair) => !busy(pair)) ?? next;
}

/** A run moved to another replica pair: its reset and every client's target. */
export function onPair(run: StudyRun, pair: number): StudyRun {
  return {
    ...run,
    reset: { ...run.reset, pair },
    benchmarks: run.benchmarks.map((spec) => ({ ...spec, target: { ...spec.target, pair } })),
  };
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
 * The single-replica hit-rate bound (docs/facts.md §4.1). Requests look up prefix + suffix + chat
 * template tokens over `/v1/chat/completions`; `/v1/completions` sends the prompt as is, with no
 * chat template, so there L = prefix + suffix.
 */
function boundFor(config: LabConfig, prefixes: number, prompts: number, api: Api = 'chat'): number {
  const chatTemplateTokens = api === 'completions' ? 0 : config.workload.chatTemplateTokens;
  return upperBound({ ...config.workload, chatTemplateTokens, prefixes, prompts });
}

/**
 * The order the runner keeps: for each run, the earlier runs of the plan it waits for, namely
 * every earlier run it is not `apart` from. Runs that wait for nothing still running execute at
 * once: with one pair the bound sweep, one run per replica; with two pairs also runs on different
 * pairs, each pair going through its own runs in plan order. Runs at once share the host's CPUs
 * and PCIe, but no GPU, cache or prefix index.
 */
export function runPrerequisites(plan: StudyPlan): Map<string, string[]> {
  return new Map(
    plan.runs.map((run, i) => [
      run.id,
      plan.runs.slice(0, i).flatMap((earlier) => (apart(earlier, run) ? [] : [earlier.id])),
    ]),
  );
}

/**
 * Whether two runs share nothing they measure: they are on different replica pairs (each pair has
 * its own replicas and front ends), or each owns different replicas of the same set with no front
 * end (the bound sweep).
 */
function apart(a: StudyRun, b: StudyRun): boolean {
  if ((a.reset.pair ?? 0) !== (b.reset.pair ?? 0)) return true;
  const mine = a.reset.replicas;
  const theirs = b.reset.replicas;
  return (
    mine !== undefined &&
    theirs !== undefined &&
    a.reset.prefixCaches === b.reset.prefixCaches &&
    mine.every((r) => !theirs.includes(r))
  );
}

/**
 * A bound run: one replica, directly. Its replica (and pair) alternates so the sweep runs one run
 * per replica at once.
 */
function boundRun(config: LabConfig, prefixes: number, replica: number, pair: number): StudyRun {
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
        target: { kind: 'replica', servers: 'standard', replica, ...(pair > 0 ? { pair } : {}) },
        api: 'chat',
        dataset: 'prefix',
        prompts,
        concurrency,
        seed,
        prefix: prefixShape(config, prefixes),
        resultFile: `${id}.json`,
      },
    ],
    reset: { prefixCaches: 'standard', replicas: [replica], ...(pair > 0 ? { pair } : {}) },
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

/**
 * A block of arm runs: every arm's prefix run in arm order, then every arm's ShareGPT control in
 * arm order. Consecutive runs then go through different front ends, so the runner can restart the
 * next run's front end while the current run's load runs (lib/study/staging.ts, `restartEarly`),
 * and the arms meet each workload close together in time, under the same host conditions.
 */
function armBlock(config: LabConfig, arms: readonly Arm[], repeat = 1): StudyRun[] {
  const datasets: Dataset[] = config.study.sharegptControl ? ['prefix', 'sharegpt'] : ['prefix'];
  const order = apartFrontEnds(config, arms);
  return datasets.flatMap((dataset) => order.map((arm) => armRun(config, arm, dataset, repeat)));
}

/**
 * The arms in their order, except that an arm sharing a restarted Deployment with the arm before
 * it (a chat arm and its completions arm on one EPP) moves back to the latest place where it
 * shares none with either neighbour; without such a place it stays where it was. Two such arms
 * in a row would restart the same front end after one another, which staging cannot do early.
 */
function apartFrontEnds(config: LabConfig, arms: readonly Arm[]): Arm[] {
  const restarts = (arm: Arm) => new Set(frontEnd(config, arm, 0).restartDeployments);
  const clash = (a: Arm | undefined, b: Arm | undefined) =>
    a !== undefined && b !== undefined && [...restarts(a)].some((name) => restarts(b).has(name));
  const order: Arm[] = [];
  for (const arm of arms) {
    if (!clash(order.at(-1), arm)) {
      order.push(arm);
      continue;
    }
    let at = order.length - 1;
    while (at > 0 && (clash(order[at - 1], arm) || clash(order[at], arm))) at--;
    if (at > 0) order.splice(at, 0, arm);
    else order.push(arm);
  }
  return order;
}

function armRun(config: LabConfig, arm: Arm, dataset: Dataset, repeat: number): StudyRun {
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
