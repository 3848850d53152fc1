import {
  CACHE_AWARE_DEFAULTS,
  ROUTER_HEALTH_CHECK_INTERVAL_SECS,
  ROUTER_INTERVALS_TO_FIRST_RESET,
  ROUTER_LOAD_RESET_EVERY_CHECKS,
} from '../config/router-defaults.ts';
import type { LabConfig } from '../config/schema.ts';
import { type Arm, studyArms } from './arms.ts';
import {
  type Routing,
  type SimulationInput,
  type SimulationModel,
  type SimulationResult,
  simulate,
} from './simulator.ts';

/**
 * Predictions for every arm of the configured study: each front end's source-derived model
 * (lib/study/simulator.ts) run over several client seeds, so every figure comes with the run-to-run
 * spread the lab should expect. `lab plan` prints them, the runner stores them in the study JSON,
 * and the report sets each measurement beside them. Pure.
 */

/** One predicted figure: the mean over the client seeds and its sample standard deviation. */
export interface Estimate {
  readonly mean: number;
  /** Sample standard deviation over the seeds: the expected run-to-run spread. */
  readonly spread: number;
}

/** The figures predicted for one arm (or reference), each with its spread. */
export interface PredictedFigures {
  readonly hitRate: Estimate;
  readonly replicaHitRates: readonly Estimate[];
  readonly requestsPerReplica: readonly Estimate[];
  readonly totalTokensPerSecond: Estimate;
  readonly outputTokensPerSecond: Estimate;
  readonly requestsPerSecond: Estimate;
  readonly meanTtftMs: Estimate;
  readonly medianTtftMs: Estimate;
  readonly p99TtftMs: Estimate;
  readonly meanItlMs: Estimate;
  readonly meanTpotMs: Estimate;
}

export interface ArmPrediction extends PredictedFigures {
  /** Arm id, or `partition` for the ideal partition. */
  readonly arm: string;
  readonly title: string;
  /** What the arm was simulated as: a reference policy or a front-end model's kind. */
  readonly model: string;
  /** The arm's prompt-blind label, when its front end cannot read the prompt over its API. */
  readonly promptBlind?: string;
}

export interface StudyPredictions {
  /** Client seeds every arm was simulated with. */
  readonly seeds: readonly number[];
  /** The prefix workload's arms, in study order. ShareGPT runs are not simulated. */
  readonly arms: readonly ArmPrediction[];
  /** The ideal partition, the reference of the comparison. */
  readonly partition: ArmPrediction;
}

/** The GAIE v1.0.1 prefix-cache-scorer defaults (plugins/multi/prefix/plugin.go DefaultConfig). */
const GAIE_PREFIX_DEFAULTS = { hashBlockSize: 64, maxPrefixBlocksToMatch: 256, lruCapacityPerServer: 31_250 };
/** GAIE v1.0.1 --refresh-metrics-interval default (pkg/epp/server/runserver.go): 50 ms. */
const EPP_REFRESH_METRICS_MS = 50;

/** The client seeds an arm is simulated with: the workload's seed and the ones after it. */
export function predictionSeeds(config: LabConfig): number[] {
  return Array.from({ length: config.study.predictionSeeds }, (_, i) => config.workload.seed + i);
}

/** How the simulator routes for an arm: its front end's model at the configured settings. */
export function armRouting(config: LabConfig, arm: Arm): Routing {
  const promptVisible = arm.promptBlind === undefined;
  switch (arm.frontEnd) {
    case 'service':
      return 'per-connection';
    case 'router': {
      const variant = config.router.variants.find((v) => v.name === arm.routerVariant);
      switch (variant?.policy) {
        case 'round_robin':
          return 'round-robin';
        case 'cache_aware':
          return {
            kind: 'vllm-router-cache-aware',
            promptVisible,
            cacheThreshold: variant.cacheThreshold ?? CACHE_AWARE_DEFAULTS.cacheThreshold,
            balanceAbsThreshold: variant.balanceAbsThreshold ?? CACHE_AWARE_DEFAULTS.balanceAbsThreshold,
            balanceRelThreshold: variant.balanceRelThreshold ?? CACHE_AWARE_DEFAULTS.balanceRelThreshold,
            evictionIntervalSecs: variant.evictionIntervalSecs ?? CACHE_AWARE_DEFAULTS.evictionIntervalSecs,
            maxTreeSize: variant.maxTreeSize ?? CACHE_AWARE_DEFAULTS.maxTreeSize,
            loadResetIntervalSecs: ROUTER_HEALTH_CHECK_INTERVAL_SECS * ROUTER_LOAD_RESET_EVERY_CHECKS,
            // The latest the first reset can come: the router started before the load (docs/facts.md §3.3).
            loadResetFirstSecs: ROUTER_HEALTH_CHECK_INTERVAL_SECS * ROUTER_INTERVALS_TO_FIRST_RESET,
          };
        default:
          // power_of_two polls /get_load, which vLLM lacks, and degrades to random (docs/facts.md §3.3);
          // consistent_hash hashes headers or the whole request, unique per benchmark request.
          return 'random';
      }
    }
    case 'epp':
    case 'ai-gateway':
      return {
        kind: 'gaie-epp',
        promptVisible,
        weights:
          arm.frontEndId === 'epp-prefix3'
            ? { ...config.gaie.weights, prefixCache: config.gaie.prefixHeavyWeight }
            : config.gaie.weights,
        ...GAIE_PREFIX_DEFAULTS,
        refreshMetricsMs: EPP_REFRESH_METRICS_MS,
      };
    case 'llmd':
      return {
        kind: 'llmd-precise',
        promptVisible,
        weights: config.llmd.weights,
        refreshMetricsMs: EPP_REFRESH_METRICS_MS,
      };
  }
}

/**
 * The simulated workload of an arm: completions carry no chat template (docs/facts.md §4.1), and the llm-d
 * arm runs on its own replicas with their block size (docs/facts.md §3.7).
 */
export function armInput(config: LabConfig, arm: Arm, base: SimulationInput): SimulationInput {
  return {
    ...base,
    chatTemplateTokens: arm.api === 'completions' ? 0 : base.chatTemplateTokens,
    blockSize: arm.servers === 'kv-events' ? config.llmd.blockSize : base.blockSize,
  };
}

type Engine = Pick<SimulationModel, 'maxNumBatchedTokens' | 'maxNumSeqs'> & Partial<SimulationModel>;

/** Simulates one routing over every seed and summarizes each figure. */
export function predictFigures(
  input: SimulationInput,
  routing: Routing,
  engine: Engine,
  seeds: readonly number[],
): PredictedFigures {
  const runs = seeds.map((seed) => simulate({ ...input, seed }, routing, engine));
  const of = (pick: (r: SimulationResult) => number) => estimate(runs.map(pick));
  const replicas = runs[0]?.perReplica.length ?? 0;
  return {
    hitRate: of((r) => r.hitRate),
    replicaHitRates: Array.from({ length: replicas }, (_, i) => of((r) => r.perReplica[i]?.hitRate ?? 0)),
    requestsPerReplica: Array.from({ length: replicas }, (_, i) => of((r) => r.perReplica[i]?.requests ?? 0)),
    totalTokensPerSecond: of((r) => r.timing.totalTokensPerSecond),
    outputTokensPerSecond: of((r) => r.timing.outputTokensPerSecond),
    requestsPerSecond: of((r) => r.timing.requestsPerSecond),
    meanTtftMs: of((r) => r.timing.meanTtftMs),
    medianTtftMs: of((r) => r.timing.medianTtftMs),
    p99TtftMs: of((r) => r.timing.p99TtftMs),
    meanItlMs: of((r) => r.timing.meanItlMs),
    meanTpotMs: of((r) => r.timing.meanItlMs),
  };
}

/** Every arm of the configured study over the prefix workload, plus the ideal partition. */
export function predictStudy(config: LabConfig, base: SimulationInput, engine: Engine): StudyPredictions {
  const seeds = predictionSeeds(config);
  const arms = studyArms(config).map((arm): ArmPrediction => {
    const routing = armRouting(config, arm);
    return {
      arm: arm.id,
      title: arm.title,
      model: typeof routing === 'string' ? routing : routing.kind,
      ...(arm.promptBlind ? { promptBlind: arm.promptBlind } : {}),
      ...predictFigures(armInput(config, arm, base), routing, engine, seeds),
    };
  });
  return {
    seeds,
    arms,
    partition: {
      arm: 'partition',
      title: 'Ideal partition',
      model: 'ideal-partition',
      ...predictFigures(base, 'ideal-partition', engine, seeds),
    },
  };
}

/** Mean and sample standard deviation (0 for fewer than two values). */
export function estimate(values: readonly number[]): Estimate {
  const n = values.length;
  if (n === 0) return { mean: Number.NaN, spread: Number.NaN };
  const mean = values.reduce((a, b) => a + b, 0) / n;
  if (n < 2) return { mean, spread: 0 };
  const variance = values.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1);
  return { mean, spread: Math.sqrt(variance) };
}
