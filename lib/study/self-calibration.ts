/**
 * A study that calibrates itself: its upper-bound sweep (one replica, no front end) measures exactly
 * what the timing model needs, so the coefficients are refitted on this host's own runs and every arm
 * is predicted again. Each arm's measurement is then held against both predictions: a deviation
 * beyond the noise band of the calibrated one is the front end's own doing, since the engine's timing
 * is now this host's. Pure: the caller hands in the study record.
 */

import type { LabConfig } from '../config/schema.ts';
import { type Estimate, predictStudy, type StudyPredictions } from './arm-predictions.ts';
import {
  type CalibrationFit,
  type CalibrationPoint,
  type CalibrationRow,
  fitTimingModel,
  TIMING_COEFFICIENTS,
  type TimingCoefficients,
} from './calibration.ts';
import { studyPlan } from './plan.ts';
import { planEngine, planInput, studyPredictions } from './planner.ts';
import type { RunRecord, StudyRecord } from './results.ts';
import { DEFAULT_SIMULATION_MODEL } from './simulator.ts';

/** The study's valid single-replica runs as calibration points, in study order. */
export function boundCalibrationPoints(study: StudyRecord): CalibrationPoint[] {
  const { config, kvCacheTokens } = study.metadata;
  const planned = new Map(studyPlan(config).runs.map((run) => [run.id, run]));
  const base = planInput(config, kvCacheTokens === undefined ? {} : { kvTokens: kvCacheTokens });
  const points: CalibrationPoint[] = [];
  for (const record of lastValid(study.runs)) {
    if (record.group !== 'bound' || !record.summary) continue;
    const shape = planned.get(record.id)?.benchmarks[0];
    const prefixes = shape?.prefix?.prefixes;
    if (!shape || prefixes === undefined) continue;
    const s = record.summary;
    points.push({
      label: record.id,
      input: { ...base, replicas: 1, prefixes, prompts: shape.prompts, concurrency: shape.concurrency },
      measured: {
        totalTokensPerSecond: s.totalTokenThroughput,
        meanTtftMs: s.meanTtftMs,
        meanItlMs: s.meanItlMs,
        p99TtftMs: s.p99TtftMs,
        ...(s.hitRate === null ? {} : { hitRate: s.hitRate }),
      },
    });
  }
  return points;
}

/** A resumed study may hold an invalid attempt and a later valid one: the last valid attempt counts. */
function lastValid(runs: readonly RunRecord[]): RunRecord[] {
  const valid = new Map<string, RunRecord>();
  for (const record of runs) {
    if (!record.valid) continue;
    valid.delete(record.id);
    valid.set(record.id, record);
  }
  return [...valid.values()];
}

export type SelfCalibration =
  | {
      readonly available: true;
      readonly points: readonly CalibrationPoint[];
      readonly fit: CalibrationFit;
      /** The a-priori predictions (the study JSON's, or recomputed from its configuration). */
      readonly apriori: StudyPredictions;
      /** Every arm again with the refitted coefficients. */
      readonly calibrated: StudyPredictions;
    }
  | { readonly available: false; readonly reason: string };

export interface SelfCalibrationOptions {
  /** Bounds the fit's work (default 120 evaluations, each simulating every bound run once). */
  readonly maxEvaluations?: number;
}

/** Refits the timing model on the study's bound runs and predicts every arm again. */
export function selfCalibrate(study: StudyRecord, options: SelfCalibrationOptions = {}): SelfCalibration {
  const points = boundCalibrationPoints(study);
  if (points.length === 0) {
    return {
      available: false,
      reason:
        'no valid single-replica (upper-bound) run to calibrate on: the predictions stay the a-priori ones',
    };
  }
  const { config, kvCacheTokens } = study.metadata;
  const engine = planEngine(config);
  const fit = fitTimingModel(
    points,
    { ...DEFAULT_SIMULATION_MODEL, ...engine },
    { maxEvaluations: options.maxEvaluations ?? 120 },
  );
  return {
    available: true,
    points,
    fit,
    apriori: study.metadata.predictions ?? studyPredictions(config, kvCacheTokens),
    calibrated: calibratedPredictions(config, kvCacheTokens, fit.coefficients),
  };
}

/** Every arm predicted with the given timing coefficients. */
export function calibratedPredictions(
  config: LabConfig,
  kvCacheTokens: number | undefined,
  coefficients: TimingCoefficients,
): StudyPredictions {
  const input = planInput(config, kvCacheTokens === undefined ? {} : { kvTokens: kvCacheTokens });
  return predictStudy(config, input, { ...planEngine(config), ...coefficients });
}

/** The figures held against their predictions, with the tolerance the calibrated model is judged by. */
export const DEVIATION_METRICS = {
  hitRate: { label: 'hit rate', tolerance: 0.02, relative: false },
  totalTokensPerSecond: { label: 'total tok/s', tolerance: 0.05, relative: true },
  meanTtftMs: { label: 'mean TTFT', tolerance: 0.15, relative: true },
  p99TtftMs: { label: 'p99 TTFT', tolerance: 0.25, relative: true },
  meanItlMs: { label: 'ITL', tolerance: 0.1, relative: true },
} as const;
export type DeviationMetric = keyof typeof DEVIATION_METRICS;
/** How far the busiest replica's share of requests may be from its prediction: 5 points. */
export const SHARE_TOLERANCE = 0.05;

/** What an arm measured, per metric (undefined: not measured). */
export type MeasuredFigures = Readonly<Record<DeviationMetric, number | undefined>> & {
  readonly requests: readonly number[];
};

export interface ArmDeviation {
  readonly arm: string;
  readonly metric: DeviationMetric | 'requestsPerReplica';
  readonly measured: number;
  readonly apriori?: Estimate;
  readonly calibrated: Estimate;
  /** Half-width of the calibrated band: twice its spread plus the metric's tolerance. */
  readonly band: number;
  readonly outside: boolean;
  /** Why it may be so, for a deviation. */
  readonly meaning?: string;
}

/** Which way a measurement left its band: slower (lower tok/s, higher TTFT or ITL) or faster. */
export type DeviationDirection = 'slower' | 'faster';

export interface DeviationContext {
  /**
   * Per timing metric, the fit's RMS relative error on the bound runs (fitErrorsByMetric): the
   * calibrated model is trusted no closer than it fits this host's own single-replica runs, so the
   * band widens by it.
   */
  readonly fitErrors?: Partial<Readonly<Record<DeviationMetric, number>>>;
  /**
   * Per metric, which way the ideal partition (no front end) left its band, if it did: an arm that
   * deviates the same way shares the timing model's error, not a front end's.
   */
  readonly reference?: Partial<Readonly<Record<DeviationMetric, DeviationDirection>>>;
}

/** Per timing metric, the RMS relative error of the fit's rows. */
export function fitErrorsByMetric(rows: readonly CalibrationRow[]): Partial<Record<DeviationMetric, number>> {
  const sums = new Map<DeviationMetric, { sq: number; n: number }>();
  for (const r of rows) {
    const e = sums.get(r.metric) ?? { sq: 0, n: 0 };
    sums.set(r.metric, { sq: e.sq + r.relativeError ** 2, n: e.n + 1 });
  }
  return Object.fromEntries([...sums].map(([m, { sq, n }]) => [m, Math.sqrt(sq / n)]));
}

/** Which way each metric left its band in `rows` (the ideal partition's), for DeviationContext.reference. */
export function deviationDirections(
  rows: readonly ArmDeviation[],
): Partial<Record<DeviationMetric, DeviationDirection>> {
  const out: Partial<Record<DeviationMetric, DeviationDirection>> = {};
  for (const r of rows) {
    if (!r.outside || r.metric === 'requestsPerReplica' || r.metric === 'hitRate') continue;
    out[r.metric] = direction(r.metric, r.measured, r.calibrated.mean);
  }
  return out;
}

function direction(metric: DeviationMetric, measured: number, predicted: number): DeviationDirection {
  const slower = metric === 'totalTokensPerSecond' ? measured < predicted : measured > predicted;
  return slower ? 'slower' : 'faster';
}

/**
 * One arm's measured figures against its a-priori and calibrated predictions. `loadBalancedHitRate`
 * is the calibrated hit rate of routing on load alone (the least-loaded reference, or kube-proxy's
 * prediction): a prefix-aware arm that lands there routes on load alone. `arm` 'partition' is the
 * ideal partition, which runs without a front end.
 */
export function armDeviations(
  arm: string,
  measured: MeasuredFigures,
  calibrated: StudyPredictions,
  apriori: StudyPredictions | undefined,
  loadBalancedHitRate: number | undefined,
  context: DeviationContext = {},
): ArmDeviation[] {
  const find = (p: StudyPredictions | undefined) =>
    arm === 'partition' ? p?.partition : p?.arms.find((a) => a.arm === arm);
  const cal = find(calibrated);
  if (!cal) return [];
  const pri = find(apriori);
  const rows: ArmDeviation[] = [];
  for (const metric of Object.keys(DEVIATION_METRICS) as DeviationMetric[]) {
    const value = measured[metric];
    if (value === undefined || !Number.isFinite(value)) continue;
    const { tolerance, relative } = DEVIATION_METRICS[metric];
    const predicted = cal[metric];
    const fitError = relative ? (context.fitErrors?.[metric] ?? 0) : 0;
    const band = 2 * predicted.spread + (tolerance + fitError) * (relative ? predicted.mean : 1);
    const outside = Math.abs(value - predicted.mean) > band;
    const meaning = outside
      ? deviationMeaning(metric, value, predicted.mean, {
          promptBlind: cal.promptBlind !== undefined,
          loadBalancedHitRate,
          isReference: arm === 'partition',
          referenceDirection: context.reference?.[metric],
        })
      : undefined;
    rows.push({
      arm,
      metric,
      measured: value,
      ...(pri ? { apriori: pri[metric] } : {}),
      calibrated: predicted,
      band,
      outside,
      ...(meaning ? { meaning } : {}),
    });
  }
  // The split over the replicas: the largest replica's share against its prediction, within SHARE_TOLERANCE.
  const total = measured.requests.reduce((a, b) => a + b, 0);
  const predictedRequests = cal.requestsPerReplica.map((e) => e.mean);
  if (total > 0 && predictedRequests.length === measured.requests.length && predictedRequests.length > 1) {
    const predictedTotal = predictedRequests.reduce((a, b) => a + b, 0);
    const share = Math.max(...measured.requests) / total;
    const predictedShare = Math.max(...predictedRequests) / predictedTotal;
    const band = SHARE_TOLERANCE;
    const outside = Math.abs(share - predictedShare) > band;
    rows.push({
      arm,
      metric: 'requestsPerReplica',
      measured: share,
      calibrated: { mean: predictedShare, spread: 0 },
      band,
      outside,
      ...(outside
        ? {
            meaning:
              share > predictedShare
                ? 'piles onto one replica more than its model: a tie rule or load signal the model lacks?'
                : 'spreads more evenly than its model: it routes on load more than its source says?',
          }
        : {}),
    });
  }
  return rows;
}

function deviationMeaning(
  metric: DeviationMetric,
  measured: number,
  predicted: number,
  arm: {
    promptBlind: boolean;
    loadBalancedHitRate: number | undefined;
    /** The ideal partition: no front end. */
    isReference: boolean;
    referenceDirection: DeviationDirection | undefined;
  },
): string {
  const { promptBlind, loadBalancedHitRate } = arm;
  if (metric === 'hitRate') {
    if (measured < predicted) {
      const nearLoad =
        loadBalancedHitRate !== undefined &&
        Math.abs(measured - loadBalancedHitRate) <= DEVIATION_METRICS.hitRate.tolerance;
      if (nearLoad && !promptBlind)
        return 'routes on load alone: the prefix affinity its source promises did not happen';
      return 'fewer hits than its model: evictions or a routing signal the model lacks';
    }
    return 'more hits than its model: it sees more of the prompt than its source reading says?';
  }
  const way = direction(metric, measured, predicted);
  if (arm.isReference)
    return `${way} than its model with no front end: the engine on this host differs from its bound runs (load, clients, the second replica?)`;
  if (arm.referenceDirection === way)
    return `${way} than its model, as the ideal partition is: the timing model's error, not this front end's`;
  if (way === 'faster') return 'faster than its model';
  if (metric === 'p99TtftMs')
    return 'slower than its model in the tail: queueing in the front end or behind long prefills?';
  return 'slower than its model: front-end overhead?';
}

/** `lab plan --calibrate-from`: the fitted coefficients and the in-sample error, as text. */
export function formatCalibration(source: string, calibration: SelfCalibration): string {
  if (!calibration.available) return `Calibration from ${source}: ${calibration.reason}\n`;
  const { fit, points } = calibration;
  const lines = [
    `Timing model calibrated on ${points.length} single-replica run(s) of ${source} (${points.map((p) => p.label).join(', ')}):`,
    ...TIMING_COEFFICIENTS.map(
      (k) =>
        `  ${k.padEnd(26)} ${String(Number(DEFAULT_SIMULATION_MODEL[k].toPrecision(3))).padStart(8)} -> ${Number(fit.coefficients[k].toPrecision(3))}`,
    ),
    `  in-sample RMS relative error ${(100 * fit.rmsBefore).toFixed(1)}% a priori, ${(100 * fit.rmsAfter).toFixed(1)}% calibrated`,
    ...fit.rows.map(
      (r) =>
        `  ${r.label.padEnd(14)} ${r.metric.padEnd(21)} predicted ${r.predicted.toFixed(1).padStart(9)}  measured ${r.measured.toFixed(1).padStart(9)}  ${r.relativeError >= 0 ? '+' : ''}${(100 * r.relativeError).toFixed(1)}%`,
    ),
    'The predictions below use the calibrated coefficients.',
  ];
  return `${lines.join('\n')}\n\n`;
}
