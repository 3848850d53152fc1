import type { LabConfig } from '../config/schema.ts';
import {
  type ArmPrediction,
  type Estimate,
  predictFigures,
  predictStudy,
  type StudyPredictions,
} from './arm-predictions.ts';
import {
  ROUTING_POLICIES,
  type RoutingPolicy,
  type SimulationInput,
  type SimulationModel,
  simulate,
} from './simulator.ts';
import { cachePressure, lookedUpTokens, repeatsPerPrefix, upperBound } from './workload.ts';

/**
 * `lab plan`: before renting a GPU, predict whether the workload can tell routers apart
 * (docs/facts.md §4.1) and what each routing policy would reach. Pure: numbers in, numbers out.
 */

/** What-if values that replace the configuration's for one plan. */
export interface PlanOverrides {
  readonly prefixes?: number;
  readonly prefixLen?: number;
  readonly replicas?: number;
  readonly concurrency?: number;
  readonly prompts?: number;
  readonly kvTokens?: number;
}

export interface PolicyPrediction {
  /** Overall hit rate, 0-1 (mean over the client seeds). */
  readonly hitRate: number;
  /** Its sample standard deviation over the client seeds: the run-to-run spread. */
  readonly hitRateSpread: number;
  /** Hit rate of each replica, 0-1. */
  readonly perReplica: readonly number[];
  /** Requests each replica served. */
  readonly requestsPerReplica: readonly number[];
}

/** The engine limits the replicas run with (explicit flags, docs/facts.md §3.1), which the simulation must use too. */
export type PlanEngine = Pick<SimulationModel, 'maxNumBatchedTokens' | 'maxNumSeqs'>;

export interface WorkloadPlan {
  readonly input: SimulationInput;
  readonly engine: PlanEngine;
  readonly workingSetTokens: number;
  readonly kvCacheTokensPerReplica: number;
  readonly partitionFits: boolean;
  readonly fitsOneReplica: boolean;
  /** Single-replica bound of docs/facts.md §4.1, 0-1. */
  readonly upperBound: number;
  readonly verdict: string;
  /** Client seeds every policy was simulated with. */
  readonly seeds: readonly number[];
  readonly policies: Readonly<Record<RoutingPolicy, PolicyPrediction>>;
}

/** The workload plan plus a prediction for every arm of the configured study. */
export interface StudyPlanPrediction extends WorkloadPlan {
  readonly arms: StudyPredictions;
  /** Which arms are predicted best, from the same numbers as the per-arm table. */
  readonly armsVerdict: string;
  /** Set when the opening burst makes the p99 TTFT column (docs/planning.md, "The p99 TTFT tail"). */
  readonly tailNote?: string;
}

/** The simulation input the configuration describes, with what-if values applied. */
export function planInput(config: LabConfig, overrides: PlanOverrides = {}): SimulationInput {
  const { workload, vllm } = config;
  return {
    replicas: overrides.replicas ?? vllm.replicas,
    kvCacheTokensPerReplica: overrides.kvTokens ?? vllm.kvCacheTokensPerReplica,
    blockSize: vllm.blockSize,
    prefixes: overrides.prefixes ?? workload.prefixes,
    prefixLen: overrides.prefixLen ?? workload.prefixLen,
    suffixLen: workload.suffixLen,
    chatTemplateTokens: workload.chatTemplateTokens,
    outputLen: workload.outputLen,
    prompts: overrides.prompts ?? workload.prompts,
    concurrency: overrides.concurrency ?? workload.concurrency,
    seed: workload.seed,
  };
}

/**
 * The configuration with another replica count, for estimating the study a what-if `--replicas`
 * describes: its partition has one client per replica and its bound runs one replica each. A
 * configured seed list too short for the count gives way to the derived seeds (workload.ts).
 */
export function withReplicas(config: LabConfig, replicas: number): LabConfig {
  const { partitionSeeds, ...workload } = config.workload;
  const seeds = partitionSeeds && partitionSeeds.length >= replicas ? { partitionSeeds } : {};
  return { ...config, vllm: { ...config.vllm, replicas }, workload: { ...workload, ...seeds } };
}

/** `--max-num-batched-tokens` and `--max-num-seqs` of the replicas, from the configuration. */
export function planEngine(config: LabConfig): PlanEngine {
  return { maxNumBatchedTokens: config.vllm.maxNumBatchedTokens, maxNumSeqs: config.vllm.maxNumSeqs };
}

/**
 * The reference policies over `seeds` client seeds (default: the input's seed and the four after it).
 * The verdict is read off these same predictions, never from the cache arithmetic alone.
 */
export function planWorkload(
  input: SimulationInput,
  engine: PlanEngine,
  seeds: readonly number[] = Array.from({ length: 5 }, (_, i) => input.seed + i),
  timing: Partial<SimulationModel> = {},
): WorkloadPlan {
  const pressure = cachePressure(input, input.replicas, input.kvCacheTokensPerReplica);
  const policies = {} as Record<RoutingPolicy, PolicyPrediction>;
  for (const policy of ROUTING_POLICIES) {
    const figures = predictFigures(input, policy, { ...engine, ...timing }, seeds);
    policies[policy] = {
      hitRate: figures.hitRate.mean,
      hitRateSpread: figures.hitRate.spread,
      perReplica: figures.replicaHitRates.map((e) => e.mean),
      requestsPerReplica: figures.requestsPerReplica.map((e) => Math.round(e.mean)),
    };
  }
  return {
    input,
    engine,
    workingSetTokens: pressure.workingSetTokens,
    kvCacheTokensPerReplica: input.kvCacheTokensPerReplica,
    partitionFits: pressure.partitionFits,
    fitsOneReplica: pressure.fitsOneReplica,
    upperBound: upperBound(input),
    verdict: verdict(pressure, input.replicas, policies),
    seeds,
    policies,
  };
}

/** The smallest hit-rate gain the verdict calls routing that matters: 2 points. */
export const MATTERS_FROM = 0.02;

/** The load-balancing reference policies: they ignore the prompt. */
const LOAD_BALANCING: readonly RoutingPolicy[] = ['random', 'per-connection', 'round-robin', 'least-loaded'];

/**
 * Two predictions differ beyond noise when they are further apart than twice their combined
 * seed-to-seed spread, and at least a tenth of a point (what the tables print).
 */
export function noiseBand(a: number, b: number): number {
  return Math.max(2 * Math.sqrt(a * a + b * b), 0.001);
}

function verdict(
  pressure: ReturnType<typeof cachePressure>,
  replicas: number,
  policies: Readonly<Record<RoutingPolicy, PolicyPrediction>>,
): string {
  if (replicas < 2) return 'routing cannot matter: there is only one replica';
  const ideal = policies['ideal-partition'];
  const balanced = LOAD_BALANCING.map((p) => policies[p]).reduce((best, p) =>
    p.hitRate > best.hitRate ? p : best,
  );
  const gain = ideal.hitRate - balanced.hitRate;
  // A gain under 2 points would not show above one run's noise (about +-1.5 points at 128 prefixes).
  const band = Math.max(noiseBand(ideal.hitRateSpread, balanced.hitRateSpread), MATTERS_FROM);
  const why = pressure.fitsOneReplica
    ? 'the working set fits in one replica'
    : !pressure.partitionFits
      ? 'even a perfect partition overflows each replica'
      : 'a perfect partition fits and load balancing must evict';
  const numbers = `the ideal partition is predicted at ${percent(ideal.hitRate)} against ${percent(balanced.hitRate)} for the best load-balancing policy`;
  if (gain <= band) {
    return `routing cannot matter: ${numbers}, within the noise (${points(band)}): ${why}`;
  }
  return `routing can matter: ${numbers} (${points(gain, true)}): ${why}`;
}

/**
 * Every arm of the configured study predicted over `config.study.predictionSeeds` client seeds,
 * with what-if values applied, beside the reference policies.
 */
export function planStudy(
  config: LabConfig,
  overrides: PlanOverrides = {},
  timing: Partial<SimulationModel> = {},
): StudyPlanPrediction {
  const input = planInput(config, overrides);
  const engine = planEngine(config);
  const arms = predictStudy(config, input, { ...engine, ...timing });
  const workload = planWorkload(input, engine, arms.seeds, timing);
  const note = tailNote(input, { ...engine, ...timing }, arms.seeds[0] ?? input.seed);
  return { ...workload, arms, armsVerdict: armsVerdict(arms), ...(note ? { tailNote: note } : {}) };
}

/**
 * The client sends its first `concurrency` requests at once, all cold; when their queue sets the
 * whole run's p99 (over twice the p99 of the requests after them), the p99 column says little about
 * routing. Judged on the least-loaded policy, which puts the same burst on every replica.
 */
function tailNote(input: SimulationInput, model: Partial<SimulationModel>, seed: number): string | undefined {
  const { timing } = simulate({ ...input, seed }, 'least-loaded', model);
  if (!(timing.p99TtftMs > 2 * timing.p99TtftAfterOpeningMs)) return undefined;
  return (
    `p99 TTFT is set by the opening burst (the first ${input.concurrency} requests, sent at once): least-loaded's is ` +
    `${msValue(timing.p99TtftMs)} over the run, ${msValue(timing.p99TtftAfterOpeningMs)} after the burst;\n` +
    '  the column tells the arms apart little (docs/planning.md, "The p99 TTFT tail").'
  );
}

/**
 * The arms whose predicted hit rate cannot be told from the best one's, prompt-blind arms left
 * out (they are controls): the planner's answer to "which front end should win".
 */
export function bestPredictedArms(arms: readonly ArmPrediction[]): ArmPrediction[] {
  const candidates = arms.filter((a) => !a.promptBlind);
  const best = candidates.reduce<ArmPrediction | undefined>(
    (top, a) => (top === undefined || a.hitRate.mean > top.hitRate.mean ? a : top),
    undefined,
  );
  if (!best) return [];
  return candidates.filter(
    (a) => best.hitRate.mean - a.hitRate.mean <= noiseBand(best.hitRate.spread, a.hitRate.spread),
  );
}

function armsVerdict(predictions: StudyPredictions): string {
  const best = bestPredictedArms(predictions.arms);
  if (best.length === 0) return 'no arm of this study can see the prompt';
  const ideal = predictions.partition.hitRate.mean;
  const names = best.map((a) => `${a.arm} ${percent(a.hitRate.mean)}`).join(', ');
  return `best predicted hit rate (indistinguishable within the noise): ${names}; ideal partition ${percent(ideal)}`;
}

/** The `--json` shape: hit rates as fractions, stable keys for other tools. */
export function planJson(plan: WorkloadPlan | StudyPlanPrediction): object {
  return {
    workingSetTokens: plan.workingSetTokens,
    kvCacheTokensPerReplica: plan.kvCacheTokensPerReplica,
    engine: plan.engine,
    partitionFits: plan.partitionFits,
    upperBound: plan.upperBound,
    verdict: plan.verdict,
    seeds: plan.seeds,
    policies: plan.policies,
    ...('arms' in plan ? { armsVerdict: plan.armsVerdict, arms: plan.arms } : {}),
  };
}

const tokens = (n: number) => n.toLocaleString('en-US');
const percent = (fraction: number) => `${(fraction * 100).toFixed(1)}%`;
/** A hit-rate difference in points: `+-1.2 points`, or signed with `signed`. */
const points = (fraction: number, signed = false) =>
  `${signed ? (fraction >= 0 ? '+' : '') : '+-'}${(fraction * 100).toFixed(1)} points`;

/** The plan as people read it. */
export function formatPlan(plan: WorkloadPlan | StudyPlanPrediction): string {
  const { input } = plan;
  const r = repeatsPerPrefix(input);
  const share = Math.ceil(input.prefixes / input.replicas) * input.prefixLen;
  const lines = [
    `Workload: ${input.prefixes} prefixes x ${tokens(input.prefixLen)} tokens, ${tokens(input.prompts)} prompts (${formatNumber(r)} per prefix), concurrency ${input.concurrency}, block size ${input.blockSize}`,
    `  engine limits           ${tokens(plan.engine.maxNumBatchedTokens)} batched tokens, ${plan.engine.maxNumSeqs} sequences per step`,
    `  working set             ${tokens(plan.workingSetTokens)} tokens`,
    `  KV cache per replica    ${tokens(plan.kvCacheTokensPerReplica)} tokens x ${input.replicas} replica(s)`,
    `  perfect partition       ${tokens(share)} tokens on the fullest replica: ${plan.partitionFits ? 'fits' : 'does not fit'}`,
    `  upper bound (1 replica) ${percent(plan.upperBound)} = (${formatNumber(r)} - 1)/${formatNumber(r)} x ${input.prefixLen}/${lookedUpTokens(input)}`,
    '',
    `Verdict: ${plan.verdict}.`,
    '',
    `Reference policies: predicted prefix-cache hit rate (simulated, mean over ${plan.seeds.length} client seeds):`,
    formatTable(plan),
  ];
  if ('arms' in plan) {
    lines.push(
      '',
      `Arms of the study, prefix workload (mean +- run-to-run spread over client seeds ${plan.arms.seeds.join(', ')}):`,
      formatArmTable(plan.arms),
      '',
      `Arms: ${plan.armsVerdict}.`,
      ...(plan.tailNote ? [plan.tailNote] : []),
    );
  }
  return `${lines.join('\n')}\n`;
}

const ARM_COLUMNS: ReadonlyArray<[string, (p: ArmPrediction) => string]> = [
  ['hit rate', (p) => withSpread(p.hitRate, percentValue)],
  [
    'per replica',
    (p) =>
      p.replicaHitRates.map((e, i) => (p.requestsPerReplica[i]?.mean ? percent(e.mean) : '-')).join(' / '),
  ],
  ['requests', (p) => p.requestsPerReplica.map((e) => Math.round(e.mean)).join(' / ')],
  ['tok/s', (p) => withSpread(p.totalTokensPerSecond, (v) => Math.round(v).toLocaleString('en-US'))],
  ['mean TTFT', (p) => withSpread(p.meanTtftMs, msValue)],
  ['p99 TTFT', (p) => withSpread(p.p99TtftMs, msValue)],
  ['ITL', (p) => withSpread(p.meanItlMs, msValue)],
];

function percentValue(fraction: number): string {
  return `${(fraction * 100).toFixed(1)}%`;
}

function msValue(value: number): string {
  return `${value.toFixed(1)} ms`;
}

function withSpread(e: Estimate, text: (v: number) => string): string {
  const spread = text(e.spread).replace(/%$/, '').replace(/ ms$/, '');
  return `${text(e.mean)} +-${spread}`;
}

function formatArmTable(predictions: StudyPredictions): string {
  const header = ['arm', 'model', ...ARM_COLUMNS.map(([h]) => h)];
  const rows = [...predictions.arms, predictions.partition].map((p) => [
    p.promptBlind ? `${p.arm} (prompt-blind)` : p.arm,
    p.model,
    ...ARM_COLUMNS.map(([, cell]) => cell(p)),
  ]);
  return alignRows(header, rows);
}

/** A text table, indented two spaces: the first `leftColumns` columns left-aligned, numbers right. */
export function alignRows(header: string[], rows: string[][], leftColumns = 2): string {
  const widths = header.map((_, col) => Math.max(...[header, ...rows].map((row) => row[col].length)));
  return [header, ...rows]
    .map(
      (row) =>
        `  ${row.map((cell, col) => (col < leftColumns ? cell.padEnd(widths[col]) : cell.padStart(widths[col]))).join('  ')}`,
    )
    .join('\n');
}

function formatTable(plan: WorkloadPlan): string {
  const replicas = plan.input.replicas;
  const header = [
    'policy',
    'overall',
    ...Array.from({ length: replicas }, (_, i) => `replica ${i}`),
    'requests',
  ];
  const rows = ROUTING_POLICIES.map((policy) => {
    const p = plan.policies[policy];
    const perReplica = Array.from({ length: replicas }, (_, i) =>
      p.requestsPerReplica[i] ? percent(p.perReplica[i]) : '-',
    );
    return [policy, percent(p.hitRate), ...perReplica, p.requestsPerReplica.join(' / ')];
  });
  const widths = header.map((_, col) => Math.max(...[header, ...rows].map((row) => row[col].length)));
  return [header, ...rows]
    .map(
      (row) =>
        `  ${row.map((cell, col) => (col === 0 ? cell.padEnd(widths[col]) : cell.padStart(widths[col]))).join('  ')}`,
    )
    .join('\n');
}

function formatNumber(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}

/**
 * The predictions of the last few configurations, by their JSON. The simulation is pure and takes
 * about a second of CPU per study; a process asks again for the same configuration (a runner that
 * resumes, a report after a run, the rehearsals of the tests).
 */
const predictionsMemo = new Map<string, StudyPredictions>();
const PREDICTIONS_KEPT = 8;

/**
 * The predictions a study runs with, as its JSON records them: every arm on the configured
 * workload, with the KV cache size the replicas logged when the runner read it (docs/facts.md §3.1).
 */
export function studyPredictions(config: LabConfig, kvCacheTokens?: number): StudyPredictions {
  const key = JSON.stringify([config, kvCacheTokens ?? null]);
  let predictions = predictionsMemo.get(key);
  if (!predictions) {
    const overrides = kvCacheTokens === undefined ? {} : { kvTokens: kvCacheTokens };
    predictions = predictStudy(config, planInput(config, overrides), planEngine(config));
    predictionsMemo.set(key, predictions);
    if (predictionsMemo.size > PREDICTIONS_KEPT)
      predictionsMemo.delete(predictionsMemo.keys().next().value as string);
  }
  // A copy: a caller may change what it got without changing what the next caller gets.
  return structuredClone(predictions);
}
