import type { LabConfig } from '../config/schema.ts';
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
 * (lab-spec 4.1) and what each routing policy would reach. Pure: numbers in, numbers out.
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
  /** Overall hit rate, 0-1. */
  readonly hitRate: number;
  /** Hit rate of each replica, 0-1. */
  readonly perReplica: readonly number[];
  /** Requests each replica served. */
  readonly requestsPerReplica: readonly number[];
}

/** The engine limits the replicas run with (explicit flags, lab-spec 3.1), which the simulation must use too. */
export type PlanEngine = Pick<SimulationModel, 'maxNumBatchedTokens' | 'maxNumSeqs'>;

export interface WorkloadPlan {
  readonly input: SimulationInput;
  readonly engine: PlanEngine;
  readonly workingSetTokens: number;
  readonly kvCacheTokensPerReplica: number;
  readonly partitionFits: boolean;
  readonly fitsOneReplica: boolean;
  /** Single-replica bound of lab-spec 4.1, 0-1. */
  readonly upperBound: number;
  readonly verdict: string;
  readonly policies: Readonly<Record<RoutingPolicy, PolicyPrediction>>;
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

/** `--max-num-batched-tokens` and `--max-num-seqs` of the replicas, from the configuration. */
export function planEngine(config: LabConfig): PlanEngine {
  return { maxNumBatchedTokens: config.vllm.maxNumBatchedTokens, maxNumSeqs: config.vllm.maxNumSeqs };
}

export function planWorkload(input: SimulationInput, engine: PlanEngine): WorkloadPlan {
  const pressure = cachePressure(input, input.replicas, input.kvCacheTokensPerReplica);
  const policies = {} as Record<RoutingPolicy, PolicyPrediction>;
  for (const policy of ROUTING_POLICIES) {
    const result = simulate(input, policy, engine);
    policies[policy] = {
      hitRate: result.hitRate,
      perReplica: result.perReplica.map((r) => r.hitRate),
      requestsPerReplica: result.perReplica.map((r) => r.requests),
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
    verdict: verdict(pressure, input.replicas),
    policies,
  };
}

function verdict(pressure: ReturnType<typeof cachePressure>, replicas: number): string {
  if (replicas < 2) return 'routing cannot matter: there is only one replica';
  if (pressure.fitsOneReplica) {
    return 'routing cannot matter: the working set fits in one replica, so every policy hits equally';
  }
  if (!pressure.partitionFits) {
    return 'routing cannot fully help: even a perfect partition overflows each replica, so every policy must evict';
  }
  return 'routing can matter: a perfect partition fits and random routing must evict';
}

/** The `--json` shape: hit rates as fractions, stable keys for other tools. */
export function planJson(plan: WorkloadPlan): object {
  return {
    workingSetTokens: plan.workingSetTokens,
    kvCacheTokensPerReplica: plan.kvCacheTokensPerReplica,
    engine: plan.engine,
    partitionFits: plan.partitionFits,
    upperBound: plan.upperBound,
    verdict: plan.verdict,
    policies: plan.policies,
  };
}

const tokens = (n: number) => n.toLocaleString('en-US');
const percent = (fraction: number) => `${(fraction * 100).toFixed(1)}%`;

/** The plan as people read it. */
export function formatPlan(plan: WorkloadPlan): string {
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
    'Predicted prefix-cache hit rate (simulated):',
    formatTable(plan),
  ];
  return `${lines.join('\n')}\n`;
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
