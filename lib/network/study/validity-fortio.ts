import {
  type FortioHistogram,
  type FortioResult,
  isGrpcResult,
  nonOkCodes,
  okCode,
  parseFortioResult,
  requestedQps,
} from './fortio-result.ts';
import type { FortioRunSpec, NetworkJobOutcome } from './model.ts';

/** The validity checks of fortio runs and their Job (docs/facts.md §N5); see validity.ts. */

// ---- tolerances (docs/facts.md §N5) ----------------------------------------------------------

/** Fixed-rate runs: ActualQPS within this fraction of RequestedQPS. */
export const RATE_TOLERANCE = 0.01;
/** `-r` at most this fraction of the measured p50. */
export const RESOLUTION_FRACTION_OF_P50 = 0.1;
/**
 * A percentile whose bucket holds at least this share of the calls is a bucket position: fortio
 * (v1.75.2 stats/stats.go `CalcPercentile`) interpolates linearly between a bucket's edges, so
 * with nearly all calls in one bucket p50/p90/p99 land at about 0.5/0.9/0.99 of its span,
 * whatever the latencies were.
 */
export const BUCKET_ARTIFACT_SHARE = 0.9;
/** A percentile within this fraction of a resolution step of p/100 of a step is "exactly" on it. */
const GRID_EPSILON = 1e-6;
/** Saturation: Avg within this fraction of connections / ActualQPS (Little's law). */
export const LITTLES_LAW_TOLERANCE = 0.1;
/** Repeats of an arm within this fraction of their mean latency, else flagged. */
export const REPEAT_SPREAD = 0.03;
/**
 * Istio counters: a counter that must grow by the run's calls may fall short of them, and one
 * that must stay still may move, by this fraction of the calls (scrape timing, probes).
 */
export const METRIC_TOLERANCE = 0.01;
/**
 * E10: successes within this fraction of `limit - baseline` (at least `CONNTRACK_MIN_SLACK`
 * entries): the host's own connections come and go during a step, and entries of the previous
 * step may still be expiring.
 */
export const CONNTRACK_TOLERANCE = 0.1;
export const CONNTRACK_MIN_SLACK = 25;

const ms = (seconds: number) => `${(seconds * 1000).toPrecision(3)} ms`;
const pct = (fraction: number) => `${(fraction * 100).toFixed(1)}%`;

// ---- the Job and the result file ---------------------------------------------------------------

/** The run's Job succeeded (by its succeeded/failed counts, as the first lab). */
export function jobCheck(job: NetworkJobOutcome): string[] {
  if (job === 'succeeded') return [];
  const why = job === 'failed' ? 'failed (status.failed > 0)' : 'did not finish before its timeout';
  return [`the run's Job ${why}`];
}

/** A fortio run's result file exists and parses (docs/facts.md §N5, first check). */
export function fortioResultCheck(
  raw: string | undefined,
):
  | { readonly result: FortioResult; readonly reasons: [] }
  | { readonly result?: undefined; readonly reasons: string[] } {
  if (raw === undefined) return { reasons: ['the run left no fortio result file'] };
  try {
    return { result: parseFortioResult(raw), reasons: [] };
  } catch (error) {
    return { reasons: [(error as Error).message] };
  }
}

// ---- fortio runs -------------------------------------------------------------------------------

/** Every call answered 200 (gRPC: SERVING), no error histogram, and fortio did not report a failure. */
export function resultCodesCheck(result: FortioResult): string[] {
  const reasons: string[] = [];
  if (result.error) reasons.push(`fortio reports the run failed: ${result.message ?? '(no message)'}`);
  if (result.DurationHistogram.Count === 0)
    reasons.push('fortio recorded no calls (DurationHistogram.Count 0)');
  const bad = Object.entries(nonOkCodes(result));
  if (bad.length > 0) {
    const listed = bad.map(([code, count]) => `${count} x ${code === '-1' ? '-1 (socket error)' : code}`);
    reasons.push(
      `fortio RetCodes other than ${okCode(result)}: ${listed.join(', ')} of ${result.DurationHistogram.Count} calls`,
    );
  }
  const errors = result.ErrorsDurationHistogram.Count;
  if (errors > 0)
    reasons.push(`${errors} calls failed (ErrorsDurationHistogram.Count is ${errors}, must be 0)`);
  return reasons;
}

/**
 * Fixed-rate runs (any `-qps` above 0) reached the requested rate: `ActualQPS` within 1% of
 * `RequestedQPS`, which must be the plan's `-qps`. Saturation runs must have run at "max".
 */
export function rateReachedCheck(spec: Pick<FortioRunSpec, 'qps'>, result: FortioResult): string[] {
  const requested = requestedQps(result);
  if (spec.qps === 0) {
    return requested === null
      ? []
      : [`the plan asked -qps 0 (saturation) but fortio ran at RequestedQPS ${requested}`];
  }
  if (requested === null)
    return [`the plan asked -qps ${spec.qps} but fortio ran at max (RequestedQPS "max")`];
  if (requested !== spec.qps)
    return [`the plan asked -qps ${spec.qps} but fortio's RequestedQPS is ${requested}`];
  const off = Math.abs(result.ActualQPS - requested) / requested;
  if (off <= RATE_TOLERANCE) return [];
  return [
    `the rate was not reached: ActualQPS ${result.ActualQPS.toFixed(1)} is ${pct(off)} off RequestedQPS ${requested} (allowed ${pct(RATE_TOLERANCE)}); the client or the server fell behind`,
  ];
}

/** The bucket fortio interpolates a percentile in (stats/stats.go `CalcPercentile`), or undefined. */
function bucketOf(histogram: FortioHistogram, percentile: number) {
  let before = 100 / histogram.Count;
  for (const bucket of histogram.Data) {
    if (percentile <= bucket.Percent) return { bucket, before };
    before = bucket.Percent;
  }
  return undefined;
}

/**
 * Histogram resolution (docs/facts.md §N3 and N5): `-r` at most a tenth of the measured p50, the
 * result's own `Resolution` (HTTP runs write it) equal to the planned `-r`, and no percentile on a
 * bucket artifact: exactly p/100 of a resolution step, or interpolated inside a bucket holding
 * nearly every call (see `BUCKET_ARTIFACT_SHARE`).
 */
export function resolutionCheck(resolutionSeconds: number, result: FortioResult): string[] {
  const reasons: string[] = [];
  const resolution = isGrpcResult(result) ? resolutionSeconds : result.Resolution;
  if (!isGrpcResult(result) && result.Resolution !== resolutionSeconds) {
    reasons.push(
      `fortio ran with -r ${result.Resolution} s (Resolution), not the planned -r ${resolutionSeconds} s`,
    );
  }
  const histogram = result.DurationHistogram;
  const p50 = histogram.Percentiles.find((entry) => entry.Percentile === 50);
  if (p50 === undefined) {
    reasons.push('the result has no p50 (fortio -p must include 50): the resolution cannot be checked');
  } else if (resolution > p50.Value * RESOLUTION_FRACTION_OF_P50) {
    reasons.push(
      `-r ${resolution} s is more than a tenth of the measured p50 ${ms(p50.Value)}: use -r ${(p50.Value * RESOLUTION_FRACTION_OF_P50).toPrecision(2)} s or finer`,
    );
  }
  for (const { Percentile, Value } of histogram.Percentiles) {
    if (Percentile >= 100 || Value <= 0) continue;
    const steps = Value / resolution;
    const fraction = Percentile / 100;
    if (Math.abs(steps - Math.floor(steps) - fraction) <= GRID_EPSILON) {
      reasons.push(
        `p${Percentile} ${ms(Value)} sits exactly at ${fraction} of a -r ${resolution} s step: a bucket position, not a measurement`,
      );
      continue;
    }
    const found = histogram.Count > 0 ? bucketOf(histogram, Percentile) : undefined;
    if (!found) continue;
    const { bucket, before } = found;
    const share = bucket.Count / histogram.Count;
    if (share < BUCKET_ARTIFACT_SHARE || bucket.End <= bucket.Start) continue;
    const position = (Value - bucket.Start) / (bucket.End - bucket.Start);
    reasons.push(
      `p${Percentile} ${ms(Value)} sits at ${position.toFixed(2)} of the bucket ${ms(bucket.Start)}-${ms(bucket.End)} that holds ${pct(share)} of the calls (from ${before.toFixed(1)}% to ${bucket.Percent.toFixed(1)}%): fortio interpolated it between the bucket's edges, a bucket position, not a measurement`,
    );
  }
  return reasons;
}

/**
 * Little's law at saturation (`-qps 0`): the mean latency `Avg` within 10% of
 * `connections / ActualQPS`. A disagreement means the tool's numbers do not describe the run
 * (time spent outside the measured call, or a histogram that lies).
 */
export function littlesLawCheck(
  spec: Pick<FortioRunSpec, 'qps' | 'connections'>,
  result: FortioResult,
): string[] {
  if (spec.qps !== 0) return [];
  if (!(result.ActualQPS > 0))
    return [`saturation run with ActualQPS ${result.ActualQPS}: Little's law cannot hold`];
  const expected = spec.connections / result.ActualQPS;
  const avg = result.DurationHistogram.Avg;
  const off = Math.abs(avg - expected) / expected;
  if (off <= LITTLES_LAW_TOLERANCE) return [];
  return [
    `Little's law disagrees: Avg ${ms(avg)} is ${pct(off)} off ${spec.connections} connections / ${result.ActualQPS.toFixed(1)} QPS = ${ms(expected)} (allowed ${pct(LITTLES_LAW_TOLERANCE)})`,
  ];
}

/**
 * Connections as planned, and sockets as keep-alive implies: with keep-alive (every mode but
 * `new-connection`) `SocketCount` equals the connections (a larger count means connections were
 * closed and re-opened mid-run); without it (`-keepalive=false`) at least one socket per call.
 * gRPC results carry no socket count.
 */
export function socketCountCheck(
  spec: Pick<FortioRunSpec, 'mode' | 'connections'>,
  result: FortioResult,
): string[] {
  const reasons: string[] = [];
  if (result.NumThreads !== spec.connections) {
    reasons.push(
      `fortio ran ${result.NumThreads} connections (NumThreads), not the planned -c ${spec.connections}`,
    );
  }
  if (isGrpcResult(result)) return reasons;
  const keepAlive = spec.mode !== 'new-connection';
  if (result.DisableKeepAlive === keepAlive) {
    reasons.push(
      `fortio ran with DisableKeepAlive ${result.DisableKeepAlive}, but the ${spec.mode} run needs keep-alive ${keepAlive ? 'on' : 'off (-keepalive=false)'}`,
    );
  } else if (keepAlive && result.SocketCount !== spec.connections) {
    reasons.push(
      `SocketCount ${result.SocketCount} is not the ${spec.connections} connections: with keep-alive ${Math.abs(result.SocketCount - spec.connections)} connection(s) were ${result.SocketCount > spec.connections ? 're-opened mid-run (closed by the server or a proxy)' : 'never opened'}`,
    );
  } else if (!keepAlive && result.SocketCount < result.DurationHistogram.Count) {
    reasons.push(
      `SocketCount ${result.SocketCount} is below the ${result.DurationHistogram.Count} calls of a -keepalive=false run: connections were reused, so this is not new-connection latency`,
    );
  }
  return reasons;
}
