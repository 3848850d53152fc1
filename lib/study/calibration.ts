/**
 * Calibration of the simulator's timing model on single-replica runs: docs/facts.md §4.1's table (one
 * replica, no router, 1024 prompts at concurrency 32) or a study's own upper-bound sweep.
 *
 * Only the physical timing coefficients are fitted (per-step overhead, effective memory bandwidth,
 * prefill cost per token, the API server's time per request and per streamed token); the cache model
 * is not touched, so hit rates stay what the block pool says. The fit minimizes the squared relative
 * errors of total tok/s, mean TTFT and ITL (and p99 TTFT where measured) with Nelder-Mead in log
 * space, each coefficient kept inside physical bounds.
 */

import { type SimulationInput, type SimulationModel, simulate } from './simulator.ts';

/** What a run measured, in the benchmark client's units. */
export interface MeasuredTiming {
  totalTokensPerSecond: number;
  meanTtftMs: number;
  meanItlMs: number;
  /** Absent in docs/facts.md §4.1's table. */
  p99TtftMs?: number;
  /** Prefix-cache hit rate the replica counted, for the report only (not fitted). */
  hitRate?: number;
}

/** One single-replica run: the workload it ran and what it measured. */
export interface CalibrationPoint {
  label: string;
  input: SimulationInput;
  measured: MeasuredTiming;
}

/** The fitted coefficients: all of them physical, none per data point. */
export const TIMING_COEFFICIENTS = [
  'stepOverheadMs',
  'memoryBandwidthGBps',
  'prefillMsPerToken',
  'frontEndMsPerRequest',
  'frontEndMsPerOutputToken',
] as const satisfies ReadonlyArray<keyof SimulationModel>;
export type TimingCoefficient = (typeof TIMING_COEFFICIENTS)[number];
export type TimingCoefficients = Pick<SimulationModel, TimingCoefficient>;

/**
 * Physical bounds: an L4 step cannot beat reading the 0.8 GB of weights at 300 GB/s (2.7 ms) nor
 * take longer than a few Python scheduler passes; effective bandwidth between a third of and the
 * datasheet's 300 GB/s; prefill between 0.6 and 12 GFLOP per token at 121 TFLOP/s FP8 dense peak
 * (0.005-0.1 ms); the API server's per-request and per-token times within what one Python process spends.
 */
export const COEFFICIENT_BOUNDS: Readonly<Record<TimingCoefficient, readonly [number, number]>> = {
  stepOverheadMs: [2.7, 30],
  memoryBandwidthGBps: [100, 300],
  prefillMsPerToken: [0.005, 0.1],
  frontEndMsPerRequest: [0.1, 100],
  frontEndMsPerOutputToken: [0.001, 1.5],
};

/** docs/facts.md §4.1: one replica measured directly, 1024 prompts at concurrency 32, seed 42. */
export const LAB_SPEC_CALIBRATION: ReadonlyArray<{ prefixes: number } & MeasuredTiming> = [
  { prefixes: 128, hitRate: 0.444, totalTokensPerSecond: 12_929, meanTtftMs: 215.7, meanItlMs: 42.82 },
  { prefixes: 64, hitRate: 0.776, totalTokensPerSecond: 15_078, meanTtftMs: 207.9, meanItlMs: 36.77 },
  { prefixes: 16, hitRate: 0.909, totalTokensPerSecond: 20_564, meanTtftMs: 185.4, meanItlMs: 27.07 },
  { prefixes: 8, hitRate: 0.923, totalTokensPerSecond: 24_396, meanTtftMs: 231.4, meanItlMs: 22.09 },
];

/** docs/facts.md §4.1's table as calibration points on the given workload (its prefix count replaced). */
export function labSpecCalibrationPoints(workload: SimulationInput): CalibrationPoint[] {
  return LAB_SPEC_CALIBRATION.map(({ prefixes, ...measured }) => ({
    label: `docs/facts.md §4.1, ${prefixes} prefixes`,
    input: { ...workload, replicas: 1, prefixes },
    measured,
  }));
}

export type TimingMetric = 'totalTokensPerSecond' | 'meanTtftMs' | 'p99TtftMs' | 'meanItlMs';
const METRICS: readonly TimingMetric[] = ['totalTokensPerSecond', 'meanTtftMs', 'p99TtftMs', 'meanItlMs'];

export interface CalibrationRow {
  label: string;
  metric: TimingMetric;
  predicted: number;
  measured: number;
  /** (predicted - measured) / measured. */
  relativeError: number;
}

/** Predicted against measured for every point and every metric it measured. */
export function calibrationErrors(
  points: readonly CalibrationPoint[],
  model: Partial<SimulationModel>,
): CalibrationRow[] {
  const rows: CalibrationRow[] = [];
  for (const point of points) {
    const { timing } = simulate(point.input, 'single-replica', model);
    for (const metric of METRICS) {
      const measured = point.measured[metric];
      if (measured === undefined || !(measured > 0)) continue;
      const predicted = timing[metric];
      rows.push({
        label: point.label,
        metric,
        predicted,
        measured,
        relativeError: (predicted - measured) / measured,
      });
    }
  }
  return rows;
}

/** Root mean square of the relative errors. */
export function rmsRelativeError(rows: readonly CalibrationRow[]): number {
  if (rows.length === 0) return 0;
  return Math.sqrt(rows.reduce((t, r) => t + r.relativeError ** 2, 0) / rows.length);
}

/**
 * Throughput and ITL weigh twice what a TTFT does: they follow from every step of the run, a mean or
 * p99 TTFT from a few steps of each request, so a model that trades them for TTFT is worse everywhere else.
 */
const METRIC_WEIGHT: Readonly<Record<TimingMetric, number>> = {
  totalTokensPerSecond: 2,
  meanItlMs: 2,
  meanTtftMs: 1,
  p99TtftMs: 1,
};

function weightedLoss(rows: readonly CalibrationRow[]): number {
  return rows.reduce((t, r) => t + METRIC_WEIGHT[r.metric] * r.relativeError ** 2, 0);
}

export interface CalibrationFit {
  coefficients: TimingCoefficients;
  /** RMS relative error before (the starting model) and after the fit. */
  rmsBefore: number;
  rmsAfter: number;
  rows: CalibrationRow[];
  evaluations: number;
}

/**
 * Fits the timing coefficients to the points, starting from `start`. `maxEvaluations` bounds the
 * work (each evaluation simulates every point once).
 */
export function fitTimingModel(
  points: readonly CalibrationPoint[],
  start: SimulationModel,
  options: { maxEvaluations?: number } = {},
): CalibrationFit {
  if (points.length === 0) throw new RangeError('calibration needs at least one single-replica run');
  const maxEvaluations = options.maxEvaluations ?? 150;
  const toModel = (x: readonly number[]): SimulationModel => {
    const model: SimulationModel = { ...start };
    TIMING_COEFFICIENTS.forEach((key, i) => {
      const [lo, hi] = COEFFICIENT_BOUNDS[key];
      model[key] = Math.min(hi, Math.max(lo, Math.exp(x[i] as number)));
    });
    return model;
  };
  let evaluations = 0;
  const loss = (x: readonly number[]): number => {
    evaluations++;
    return weightedLoss(calibrationErrors(points, toModel(x)));
  };
  const x0 = TIMING_COEFFICIENTS.map((key) => {
    const [lo, hi] = COEFFICIENT_BOUNDS[key];
    return Math.log(Math.min(hi, Math.max(lo, start[key])));
  });
  const rmsBefore = rmsRelativeError(calibrationErrors(points, start));
  // Restarted once from the first optimum: Nelder-Mead's simplex can collapse early.
  const first = nelderMead(loss, x0, 0.7, Math.ceil(maxEvaluations / 2));
  const best = nelderMead(loss, first, 0.3, maxEvaluations - Math.ceil(maxEvaluations / 2));
  const model = toModel(best);
  const rows = calibrationErrors(points, model);
  const coefficients = Object.fromEntries(
    TIMING_COEFFICIENTS.map((k) => [k, model[k]]),
  ) as TimingCoefficients;
  return { coefficients, rmsBefore, rmsAfter: rmsRelativeError(rows), rows, evaluations };
}

/** Plain Nelder-Mead (reflection 1, expansion 2, contraction 0.5, shrink 0.5). */
function nelderMead(
  f: (x: readonly number[]) => number,
  x0: readonly number[],
  step: number,
  maxEvaluations: number,
): number[] {
  const n = x0.length;
  let simplex: Array<{ x: number[]; v: number }> = [{ x: [...x0], v: f(x0) }];
  for (let i = 0; i < n; i++) {
    const x = [...x0];
    x[i] = (x[i] as number) + step;
    simplex.push({ x, v: f(x) });
  }
  let used = n + 1;
  const combine = (a: readonly number[], b: readonly number[], t: number) =>
    a.map((ai, i) => ai + t * ((b[i] as number) - ai));
  while (used < maxEvaluations) {
    simplex.sort((p, q) => p.v - q.v);
    const best = simplex[0] as { x: number[]; v: number };
    const worst = simplex[n] as { x: number[]; v: number };
    const second = simplex[n - 1] as { x: number[]; v: number };
    if (worst.v - best.v < 1e-6) break;
    const centroid = Array.from(
      { length: n },
      (_, i) => simplex.slice(0, n).reduce((t, p) => t + (p.x[i] as number), 0) / n,
    );
    const reflected = combine(centroid, worst.x, -1);
    const vr = f(reflected);
    used++;
    if (vr < best.v) {
      const expanded = combine(centroid, worst.x, -2);
      const ve = f(expanded);
      used++;
      simplex[n] = ve < vr ? { x: expanded, v: ve } : { x: reflected, v: vr };
    } else if (vr < second.v) {
      simplex[n] = { x: reflected, v: vr };
    } else {
      const contracted = combine(centroid, worst.x, 0.5);
      const vc = f(contracted);
      used++;
      if (vc < worst.v) simplex[n] = { x: contracted, v: vc };
      else {
        simplex = simplex.map((p, i) => (i === 0 ? p : { x: combine(best.x, p.x, 0.5), v: 0 }));
        for (let i = 1; i <= n; i++) (simplex[i] as { v: number }).v = f((simplex[i] as { x: number[] }).x);
        used += n;
      }
    }
  }
  simplex.sort((p, q) => p.v - q.v);
  return (simplex[0] as { x: number[] }).x;
}
