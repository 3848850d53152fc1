import { describe, expect, it } from 'vitest';
import {
  actualSeconds,
  type FortioHistogram,
  fortioProtocol,
  isGrpcResult,
  meanMs,
  nonOkCodes,
  okCode,
  parseFortioResult,
  percentileMs,
  requestedQps,
} from '../../../lib/network/study/fortio-result.ts';
import { FORTIO_FIXTURES, fortioFixture } from './fixtures/fortio.ts';

/** fortio's histogram invariants: buckets cover [Min, Max], cumulative percent ends at 100. */
function expectConsistent(histogram: FortioHistogram): void {
  const { Data, Count } = histogram;
  expect(Data.reduce((sum, bucket) => sum + bucket.Count, 0)).toBe(Count);
  expect(Data[0].Start).toBe(histogram.Min);
  expect(Data.at(-1)?.End).toBe(histogram.Max);
  expect(Data.at(-1)?.Percent).toBe(100);
  expect(histogram.Avg).toBeCloseTo(histogram.Sum / Count, 12);
}

describe('parseFortioResult on realistic result files', () => {
  it('reads an HTTP fixed-rate run: seconds in the histogram, nanoseconds in ActualDuration', () => {
    const result = parseFortioResult(fortioFixture('http-fixed-rate'));
    expect(fortioProtocol(result)).toBe('http');
    expect(result.RunType).toBe('HTTP');
    expect(result.Version).toBe('1.75.2');
    expect(requestedQps(result)).toBe(500);
    expect(result.RequestedDuration).toBe('25s');
    // 500 QPS x 25 s over 16 connections: 781 calls each, 12,496 in all.
    expect(result.DurationHistogram.Count).toBe(12_496);
    expect(result.NumThreads).toBe(16);
    expect(actualSeconds(result)).toBeCloseTo(24.961, 3);
    expect(result.ActualQPS).toBeCloseTo(result.DurationHistogram.Count / actualSeconds(result), 6);
    expect(meanMs(result)).toBeCloseTo(0.428, 3);
    expect(percentileMs(result, 50)).toBeCloseTo(0.4135, 4);
    expect(percentileMs(result, 99)).toBeCloseTo(0.7654, 4);
    expect(percentileMs(result, 75)).toBeUndefined();
    if (isGrpcResult(result)) throw new Error('expected HTTP');
    expect(result.Resolution).toBe(0.00001);
    expect(result.DisableKeepAlive).toBe(false);
    expect(result.SocketCount).toBe(16);
    expect(result.Sockets).toHaveLength(16);
    expect(result.RetCodes).toEqual({ '200': 12_496 });
    expect(nonOkCodes(result)).toEqual({});
    expectConsistent(result.DurationHistogram);
  });

  it('reads an empty error histogram (Data null, no Percentiles) as empty lists', () => {
    const result = parseFortioResult(fortioFixture('http-fixed-rate'));
    expect(result.ErrorsDurationHistogram).toEqual({
      Count: 0,
      Min: 0,
      Max: 0,
      Sum: 0,
      Avg: 0,
      StdDev: 0,
      Data: [],
      Percentiles: [],
    });
  });

  it('reads a saturation run: RequestedQPS is "max"', () => {
    const result = parseFortioResult(fortioFixture('http-saturation'));
    expect(result.RequestedQPS).toBe('max');
    expect(requestedQps(result)).toBeNull();
    expect(result.ActualQPS).toBeCloseTo(9819, 0);
    // Little's law, the cross-check the validity checks make: 16 / ActualQPS ~ Avg.
    expect(16 / result.ActualQPS).toBeCloseTo(result.DurationHistogram.Avg, 4);
    expectConsistent(result.DurationHistogram);
  });

  it('reads a gRPC ping run: SERVING counts, no HTTP fields', () => {
    const result = parseFortioResult(fortioFixture('grpc-ping'));
    expect(isGrpcResult(result)).toBe(true);
    expect(fortioProtocol(result)).toBe('grpc');
    expect(okCode(result)).toBe('SERVING');
    expect(result.RunType).toBe('GRPC Ping');
    if (!isGrpcResult(result)) throw new Error('unreachable');
    expect(result.Ping).toBe(true);
    expect(result.Streams).toBe(1);
    expect(result.Destination).toBe('fortio-server.plain:8079');
    expect(result.RetCodes).toEqual({ SERVING: 12_496 });
    expect(nonOkCodes(result)).toEqual({});
    expect('SocketCount' in result).toBe(false);
  });

  it('reads a keep-alive=false run: one socket per call plus one per connection warm-up', () => {
    const result = parseFortioResult(fortioFixture('http-no-keepalive'));
    if (isGrpcResult(result)) throw new Error('expected HTTP');
    expect(result.DisableKeepAlive).toBe(true);
    expect(result.SocketCount).toBe(result.DurationHistogram.Count + result.NumThreads);
  });

  it('reads a run at fortio default -r 0.001: the percentiles are positions in one bucket', () => {
    const result = parseFortioResult(fortioFixture('http-resolution-1ms'));
    if (isGrpcResult(result)) throw new Error('expected HTTP');
    expect(result.Resolution).toBe(0.001);
    const [first] = result.DurationHistogram.Data;
    expect(first.End).toBe(0.001);
    expect(first.Percent).toBeGreaterThan(99.9);
    // The mean says 0.40 ms, the "median" says 0.59 ms: the median is half-way along the bucket.
    expect(meanMs(result)).toBeCloseTo(0.399, 3);
    const position = ((percentileMs(result, 50) ?? 0) / 1000 - first.Start) / (first.End - first.Start);
    expect(position).toBeCloseTo(0.5, 3);
    expectConsistent(result.DurationHistogram);
  });

  it('reads non-200 codes (503 and socket errors -1) and their error histogram', () => {
    const result = parseFortioResult(fortioFixture('http-non-200'));
    expect(nonOkCodes(result)).toEqual({ '503': 37, '-1': 3 });
    expect(result.ErrorsDurationHistogram.Count).toBe(40);
    expect(result.ErrorsDurationHistogram.Percentiles.map((entry) => entry.Percentile)).toEqual([50, 90, 99]);
    expectConsistent(result.ErrorsDurationHistogram);
  });

  it.each(FORTIO_FIXTURES)('parses %s with consistent histograms', (name) => {
    const result = parseFortioResult(fortioFixture(name));
    expectConsistent(result.DurationHistogram);
    expect(result.DurationHistogram.Percentiles.map((entry) => entry.Percentile)).toEqual([50, 90, 99]);
  });
});

describe('parseFortioResult errors name the field', () => {
  const fixed = () => JSON.parse(fortioFixture('http-fixed-rate')) as Record<string, unknown>;

  it('rejects an empty file and text that is not JSON', () => {
    expect(() => parseFortioResult('  \n')).toThrow('fortio result: the file is empty');
    expect(() => parseFortioResult('Aborting because of error 503')).toThrow(/fortio result: not valid JSON/);
    expect(() => parseFortioResult('[]')).toThrow('fortio result: the result must be an object, got []');
  });

  it('names a missing top-level field', () => {
    const json = fixed();
    delete json.ActualQPS;
    expect(() => parseFortioResult(JSON.stringify(json))).toThrow(
      'fortio result: ActualQPS must be a number, missing',
    );
  });

  it('names a mistyped field: RequestedQPS is a string in fortio JSON', () => {
    const json = fixed();
    json.RequestedQPS = 500;
    expect(() => parseFortioResult(JSON.stringify(json))).toThrow(
      'fortio result: RequestedQPS must be a string, got 500',
    );
  });

  it('names a nested histogram field with its path', () => {
    const json = fixed();
    const histogram = json.DurationHistogram as { Percentiles: { Value: unknown }[] };
    histogram.Percentiles[1].Value = '0.5ms';
    expect(() => parseFortioResult(JSON.stringify(json))).toThrow(
      'fortio result: DurationHistogram.Percentiles[1].Value must be a number, got "0.5ms"',
    );
  });

  it('names a missing HTTP field and a mistyped return code count', () => {
    const json = fixed();
    delete json.SocketCount;
    expect(() => parseFortioResult(JSON.stringify(json))).toThrow(
      'fortio result: SocketCount must be a number, missing',
    );
    const codes = fixed();
    codes.RetCodes = { '200': '12496' };
    expect(() => parseFortioResult(JSON.stringify(codes))).toThrow(
      'fortio result: RetCodes.200 must be a number, got "12496"',
    );
  });

  it('rejects run types the lab does not make', () => {
    const json = fixed();
    json.RunType = 'TCP';
    expect(() => parseFortioResult(JSON.stringify(json))).toThrow(
      'fortio result: RunType "TCP" is not a run the network lab makes (HTTP or GRPC ...)',
    );
  });

  it('rejects a RequestedQPS that is neither a number nor "max"', () => {
    const result = { ...parseFortioResult(fortioFixture('http-fixed-rate')), RequestedQPS: 'fast' };
    expect(() => requestedQps(result)).toThrow(
      'fortio result: RequestedQPS must be a number or "max", got "fast"',
    );
  });
});
