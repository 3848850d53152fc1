/**
 * The simulator's p99 TTFT on the default study, per arm: the table of docs/planning.md, "The p99
 * TTFT tail" (`<!-- example-of: ttft-tail -->`, npm run docs:examples) and the figures its prose
 * quotes. test/study/ttft-tail.test.ts runs these very simulations, pins each figure's direction,
 * and compares the page's table and prose with what they give.
 */
import { defaultLabConfig } from '../lib/config/load.ts';
import { LAB_SPEC_CALIBRATION } from '../lib/study/calibration.ts';
import { planEngine, planInput } from '../lib/study/planner.ts';
import {
  DEFAULT_SIMULATION_MODEL,
  type RoutingPolicy,
  requestShape,
  type SimulationInput,
  type SimulationModel,
  type SimulationResult,
  simulate,
  usableBlocks,
} from '../lib/study/simulator.ts';

const CONFIG = defaultLabConfig();
/** The default study's workload, two replicas, as `lab plan` simulates it. */
export const STUDY: SimulationInput = planInput(CONFIG);
export const ENGINE: SimulationModel = { ...DEFAULT_SIMULATION_MODEL, ...planEngine(CONFIG) };
/** The seeds of an arm's simulations. */
export const SEEDS: readonly number[] = [42, 43, 44, 45, 46];
/** The partition arm as the study runs it: one client per replica, half the prefixes, prompts and concurrency. */
export const HALF: SimulationInput = {
  ...STUDY,
  replicas: 1,
  prefixes: STUDY.prefixes / 2,
  prompts: STUDY.prompts / 2,
  concurrency: STUDY.concurrency / 2,
};
/** The partition's two clients, seeded as the study seeds them, for two of the arms' seeds. */
export const PARTITION_SEEDS: readonly number[] = [42, 4242, 43, 4243];
/** Prefill nearly free: a miss no longer holds up the requests behind it. */
export const FREE_PREFILL: Partial<SimulationModel> = { prefillMsPerToken: 0.0001 };
/** The API server's time removed: only the engine is left. */
export const NO_API_SERVER: Partial<SimulationModel> = {
  frontEndMsPerRequest: 0,
  frontEndMsPerOutputToken: 0,
};

/** A load-balancing arm's simulations over SEEDS. */
export function arm(policy: RoutingPolicy, model: Partial<SimulationModel> = {}): SimulationResult[] {
  return SEEDS.map((seed) => simulate({ ...STUDY, seed }, policy, { ...ENGINE, ...model }));
}

/** The ideal partition's simulations: each client alone on its replica. */
export function partition(model: Partial<SimulationModel> = {}): SimulationResult[] {
  return PARTITION_SEEDS.map((seed) =>
    simulate({ ...HALF, seed }, 'single-replica', { ...ENGINE, ...model }),
  );
}

const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length;
/** The mean p99 over the requests sent after the opening burst. */
export const steadyTail = (runs: SimulationResult[]) => mean(runs.map((r) => r.timing.p99TtftAfterOpeningMs));
/** The mean p99 of the whole run. */
export const overall = (runs: SimulationResult[]) => mean(runs.map((r) => r.timing.p99TtftMs));
export const hitRate = (runs: SimulationResult[]) => mean(runs.map((r) => r.hitRate));

/** The load-balancing arms of the table, with the study's words for them. */
const ARMS: readonly [RoutingPolicy, string][] = [
  ['round-robin', 'round-robin'],
  ['per-connection', 'kube-proxy per connection'],
  ['least-loaded', 'least loaded (cache_aware over chat)'],
];

const ms = (value: number) => `${Math.round(value)} ms`;
const ratio = (value: number) => `${value.toFixed(2)}x`;
/** The whole run's p99 over the seeds, to 10 ms: it is the burst's, a few values repeated. */
function spread(runs: SimulationResult[]): string {
  const values = runs.map((r) => Math.round(r.timing.p99TtftMs / 10) * 10);
  const [low, high] = [Math.min(...values), Math.max(...values)];
  return low === high ? `${low} ms` : `${low}-${high} ms`;
}

/** The table of docs/planning.md, "The p99 TTFT tail". */
export function ttftTailTable(): string {
  const reference = partition();
  const lines = [
    '| | whole run p99 | p99 after the opening burst |',
    '|---|---|---|',
    `| ideal partition (two clients) | ${spread(reference)} | ${ms(steadyTail(reference))} |`,
  ];
  for (const [policy, name] of ARMS) {
    const runs = arm(policy);
    lines.push(
      `| ${name} | ${spread(runs)} | ${ms(steadyTail(runs))} (${ratio(steadyTail(runs) / steadyTail(reference))}) |`,
    );
  }
  const free = steadyTail(arm('least-loaded', FREE_PREFILL));
  const freeReference = steadyTail(partition(FREE_PREFILL));
  lines.push(
    `| the same, prefill nearly free | | ${ms(free)} against ${Math.round(freeReference)} (${ratio(free / freeReference)}) |`,
  );
  return lines.join('\n');
}

/**
 * What the section's prose says the model gives, as the page words it (line breaks aside): each
 * must appear in docs/planning.md.
 */
export function ttftTailProse(): string[] {
  const shape = requestShape(STUDY);
  const perReplica = STUDY.concurrency / STUDY.replicas;
  // During the burst each replica's step also decodes the requests already running.
  const perStep = ENGINE.maxNumBatchedTokens - perReplica;
  const reference = steadyTail(partition());
  const ratios = ARMS.map(([policy]) => steadyTail(arm(policy)) / reference);
  const free = steadyTail(arm('least-loaded', FREE_PREFILL)) / steadyTail(partition(FREE_PREFILL));
  const percent = (value: number) => `${Math.round(100 * value)}%`;
  const thousands = (value: number) => value.toLocaleString('en-US');
  const calibration = (prefixes: number) => {
    const row = LAB_SPEC_CALIBRATION.find((r) => r.prefixes === prefixes);
    if (!row) throw new Error(`docs/facts.md §4.1 has no row for ${prefixes} prefixes`);
    return row;
  };
  const [most, fewest] = [calibration(16), calibration(STUDY.prefixes)];
  const pairs = PARTITION_SEEDS.flatMap((seed, i) =>
    i % 2 === 0 ? [`${seed}/${PARTITION_SEEDS[i + 1]}`] : [],
  );
  return [
    `seeds ${SEEDS[0]}-${SEEDS.at(-1)}, the partition as the study runs it, one client of ${HALF.concurrency} per replica, seeds ${pairs.join(' and ')}`,
    `The client sends ${STUDY.concurrency} requests at once; every arm puts ${perReplica} on each replica`,
    `the ${perReplica}th waits for ${perReplica} x ${thousands(shape.lookedUpTokens)} prefill tokens at ${thousands(perStep)} a step (the budget less the decodes): about ${Math.round((perReplica * shape.lookedUpTokens) / perStep)} steps`,
    `With the API server's time removed the p99 stays (${Math.round(overall(arm('round-robin', NO_API_SERVER)))} against ${Math.round(overall(arm('round-robin')))} ms, round-robin's mean over the seeds)`,
    `a miss is ${thousands(shape.lookedUpTokens)} prefill tokens, a whole step's budget`,
    `the load-balancing arms' steady-state p99 is ${Math.min(...ratios).toFixed(2)}-${ratio(Math.max(...ratios))} the partition's, and with prefill nearly free the gap closes (${ratio(free)})`,
    `It is in the hit rate (${percent(hitRate(arm('least-loaded')))} against ${percent(hitRate(partition()))})`,
    `${perReplica}-${STUDY.concurrency} requests of ${shape.totalBlocks} blocks (${thousands(perReplica * shape.totalBlocks)}-${thousands(STUDY.concurrency * shape.totalBlocks)}) against ${thousands(usableBlocks(STUDY, ENGINE))} usable blocks`,
    `with the client's ${STUDY.concurrency} split over two replicas`,
    `whose mean TTFT moves only from ${Math.round(most.meanTtftMs)} to ${Math.round(fewest.meanTtftMs)} ms between ${percent(most.hitRate ?? 0)} and ${percent(fewest.hitRate ?? 0)} hits`,
  ];
}
