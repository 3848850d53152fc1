import type { ArmPrediction, Estimate } from '../study/arm-predictions.ts';
import type { RunRecord } from '../study/results.ts';
import type { ReportSection } from './format.ts';
import type { InvalidRunRow, RepeatedRow } from './run-rows.ts';

/** The rows of the report's tables (lib/report/tables.ts computes them from a study record). */

/** The measured numbers of one valid run. */
export interface RunNumbers {
  readonly runId: string;
  /** Requests served by each replica (delta of `request_success_total`), in replica order. */
  readonly requests: readonly number[];
  /** Hit rate of each replica, 0-1, null when the replica was not queried. */
  readonly replicaHitRates: readonly (number | null)[];
  /** Hits over queries summed over the replicas, 0-1. */
  readonly hitRate: number | null;
  readonly totalTokensPerSecond: number;
  readonly meanTtftMs: number;
  readonly p99TtftMs: number;
  readonly meanItlMs: number;
  readonly outputTokensPerSecond: number;
  /** Absent in records of runner versions before issue 13. */
  readonly requestsPerSecond?: number;
  readonly medianTtftMs?: number;
  readonly meanTpotMs?: number;
}

/** The figures an arm is compared on. */
export type ComparedMetric = 'hitRate' | 'totalTokensPerSecond' | 'meanTtftMs' | 'p99TtftMs' | 'meanItlMs';

/** Where a noise band comes from: repeats of the runs, or the simulator's seed-to-seed spread. */
export type NoiseSource = 'measured' | 'simulated';

/** An arm against the kube-proxy baseline on one metric. */
export interface Comparison {
  readonly metric: ComparedMetric;
  /** Arm - baseline: points for the hit rate, percent of the baseline for the others. */
  readonly difference: number;
  readonly unit: 'points' | 'percent';
  /** Half-width of the noise band in the metric's own unit (a fraction for the hit rate). */
  readonly band: number;
  readonly noise: NoiseSource;
  readonly verdict: 'better' | 'same within noise' | 'worse';
}

/** One front end (or the ideal partition) under one workload; repeats averaged. */
export interface ArmRow extends RunNumbers, RepeatedRow {
  /** Arm id, or `partition` for the ideal partition. */
  readonly arm: string;
  readonly armTitle: string;
  /**
   * The arm's front end cannot read the prompt over its API at its pinned version (lib/study/arms.ts):
   * shown beside it everywhere, and never the best arm.
   */
  readonly promptBlind?: string;
  readonly concurrency: number | undefined;
  /** Valid runs averaged into this row (`study.repeats` when all were valid). */
  readonly repeats: number;
  /** Sample standard deviation of each figure over the repeats; absent with fewer than two. */
  readonly measuredSpread?: Readonly<Record<ComparedMetric, number>>;
  /** What the simulator predicted for this arm (prefix workload only). */
  readonly prediction?: ArmPrediction;
  /** Against the kube-proxy baseline (prefix arms other than the baseline itself). */
  readonly vsBaseline?: { readonly hitRate?: Comparison; readonly totalTokensPerSecond?: Comparison };
}

/** One row of the single-replica upper-bound sweep (docs/facts.md §4.1). */
export interface BoundRow extends RunNumbers {
  readonly prefixes: number | undefined;
  readonly workingSetTokens: number | undefined;
  /** The formula's bound `(r - 1)/r x P / L`, 0-1, beside the measured hit rate. */
  readonly bound: number | undefined;
}

/** The ideal partition against the best arm on one metric (the best arm may differ per metric). */
export interface Shortfall {
  readonly metric: ComparedMetric;
  readonly label: string;
  /** The arm with the best value of this metric. */
  readonly bestArmTitle: string;
  readonly bestArm: number;
  readonly ideal: number;
  /** Hit rate: ideal - best arm in percentage points. Others: (ideal - best arm) / best arm x 100. */
  readonly difference: number;
  readonly unit: 'points' | 'percent';
  /** Higher is better for hit rate and throughput, lower for latencies. */
  readonly higherIsBetter: boolean;
}

export type LeftOnTable =
  | {
      readonly available: true;
      /** The highest hit rate, and every arm indistinguishable from it within the noise. */
      readonly bestArm: ArmRow;
      readonly bestArms: readonly ArmRow[];
      readonly noise: NoiseSource | 'none';
      readonly ideal: ArmRow;
      readonly rows: Shortfall[];
    }
  | { readonly available: false; readonly reason: string };

/** A measurement against its prediction. */
export interface PredictionCheck {
  readonly arm: string;
  readonly armTitle: string;
  readonly promptBlind?: string;
  readonly metric: 'hitRate' | 'totalTokensPerSecond';
  readonly measured: number;
  readonly predicted: Estimate;
  /** Half-width of the predicted band: twice the simulated spread plus the model's tolerance. */
  readonly band: number;
  readonly outside: boolean;
}

export interface InvalidRun extends InvalidRunRow {
  readonly group: RunRecord['group'];
  readonly dataset: RunRecord['dataset'];
}

/** What a run's checks could not establish (recorded, not judged): llm-d's scorer evidence, ... */
export interface RunWarnings {
  readonly runId: string;
  readonly valid: boolean;
  readonly warnings: readonly string[];
}

/** A run that executed beside others (the bound sweep, `study.parallelism: 2`), as recorded. */
export interface OverlapRow {
  readonly runId: string;
  readonly title: string;
  readonly valid: boolean;
  readonly overlappedWith: readonly string[];
}

export interface MetadataEntry {
  readonly label: string;
  readonly value: string;
}

export interface ReportTables {
  readonly metadata: readonly MetadataEntry[];
  /** Valid arm runs with the prefix workload at the study's concurrency, in study order. */
  readonly prefixArms: readonly ArmRow[];
  /** The valid ideal-partition run, the reference of the comparison. */
  readonly partition: ArmRow | undefined;
  /** The formula's single-replica bound of the study's prefix workload, 0-1. */
  readonly workloadBound: number;
  readonly bounds: readonly BoundRow[];
  readonly sharegpt: readonly ArmRow[];
  /** Concurrency sweep rows, with each swept arm's main run at the study's concurrency, by arm then level. */
  readonly sweep: readonly ArmRow[];
  readonly leftOnTable: LeftOnTable;
  /** Where the predictions come from: the study JSON, or recomputed from its configuration. */
  readonly predictionsSource: 'study' | 'recomputed';
  readonly predictionSeeds: readonly number[];
  /** Each prefix arm's measured hit rate and throughput against its predicted band. */
  readonly predictionChecks: readonly PredictionCheck[];
  /** Prefix arms with no valid run at all: charts name them so their absence is visible. */
  readonly invalidPrefixArms: readonly { readonly arm: string; readonly armTitle: string }[];
  readonly invalid: readonly InvalidRun[];
  /** Runs whose record carries warnings, in study order. */
  readonly warnings: readonly RunWarnings[];
  /** Runs that shared the host with others while they ran (they shared CPUs and PCIe, no GPU or cache). */
  readonly overlaps: readonly OverlapRow[];
  /**
   * The self-calibration section (lib/report/calibration-section.ts), when `lab report` computed it:
   * it refits the timing model, which takes seconds, so only the report command adds it.
   */
  readonly calibrationSection?: ReportSection;
  /** Study-order run ids that the tables leave out because they are invalid, per table. */
  readonly omitted: {
    readonly prefixArms: readonly string[];
    readonly bounds: readonly string[];
    readonly sharegpt: readonly string[];
    readonly sweep: readonly string[];
    readonly partition: readonly string[];
  };
}
