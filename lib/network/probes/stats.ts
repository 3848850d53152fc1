/**
 * Summary statistics shared by the network lab's probes. Pure: no I/O, no clock.
 *
 * Percentiles use linear interpolation between the two closest ranks (Hyndman and Fan's type 7,
 * the default of numpy and of most spreadsheets), so a p99 of 199 gaps is a value between the
 * 197th and 198th smallest rather than a jump to the maximum.
 */

/** A distribution of durations. Every field except `count` is in milliseconds. */
export interface MsDistribution {
  /** Number of values summarized. */
  readonly count: number;
  readonly minMs: number;
  readonly meanMs: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** The q-quantile (0 <= q <= 1) of values already sorted ascending; type-7 interpolation. */
export function quantileOfSorted(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) throw new Error('quantile of an empty list');
  if (!(q >= 0 && q <= 1)) throw new Error(`quantile must be within [0, 1], got ${q}`);
  const position = (sorted.length - 1) * q;
  const below = Math.floor(position);
  const above = Math.min(below + 1, sorted.length - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (position - below);
}

/** Rounds a duration to the microsecond: finer digits are clock noise and only bloat the JSON. */
export function roundMs(value: number): number {
  return Math.round(value * 1000) / 1000;
}

/** Summary of durations in ms, or null when there are none (a probe reports absence, not zeros). */
export function msDistribution(values: readonly number[]): MsDistribution | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const sum = sorted.reduce((total, value) => total + value, 0);
  return {
    count: sorted.length,
    minMs: roundMs(sorted[0]),
    meanMs: roundMs(sum / sorted.length),
    p50Ms: roundMs(quantileOfSorted(sorted, 0.5)),
    p90Ms: roundMs(quantileOfSorted(sorted, 0.9)),
    p99Ms: roundMs(quantileOfSorted(sorted, 0.99)),
    maxMs: roundMs(sorted[sorted.length - 1]),
  };
}

/** Differences between consecutive times (ms): n times give n - 1 gaps. */
export function gapsBetween(times: readonly number[]): number[] {
  return times.slice(1).map((time, index) => time - times[index]);
}
