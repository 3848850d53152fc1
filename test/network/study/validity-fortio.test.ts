import { describe, expect, it } from 'vitest';
import { parseFortioResult } from '../../../lib/network/study/fortio-result.ts';
import {
  fortioResultCheck,
  littlesLawCheck,
  rateReachedCheck,
  resolutionCheck,
  resultCodesCheck,
  socketCountCheck,
} from '../../../lib/network/study/validity.ts';
import { fortioFixture } from './fixtures/fortio.ts';
import { changed, fixedRate, fixture, saturation } from './validity-kit.ts';

// fortio's result file: codes, rate, resolution, Little's law, sockets (validity.ts).

describe('fortioResultCheck', () => {
  it('fails a missing or unparsable file and passes a fortio result', () => {
    expect(fortioResultCheck(undefined).reasons).toEqual(['the run left no fortio result file']);
    expect(fortioResultCheck('{"RunType":"HTTP"}').reasons).toEqual([
      'fortio result: Labels must be a string, missing',
    ]);
    expect(fortioResultCheck(fortioFixture('http-fixed-rate')).reasons).toEqual([]);
  });
});

describe('resultCodesCheck', () => {
  it('passes all-200 HTTP and all-SERVING gRPC runs', () => {
    expect(resultCodesCheck(fixture('http-fixed-rate'))).toEqual([]);
    expect(resultCodesCheck(fixture('grpc-ping'))).toEqual([]);
  });

  it('fails 503s, socket errors and the error histogram they fill', () => {
    expect(resultCodesCheck(fixture('http-non-200'))).toEqual([
      'fortio RetCodes other than 200: 37 x 503, 3 x -1 (socket error) of 12496 calls',
      '40 calls failed (ErrorsDurationHistogram.Count is 40, must be 0)',
    ]);
  });

  it('fails gRPC calls that were not SERVING and a run fortio reports as failed', () => {
    const grpc = changed('grpc-ping', { RetCodes: { SERVING: 12_490, ERROR: 6 } });
    expect(resultCodesCheck(grpc)).toEqual(['fortio RetCodes other than SERVING: 6 x ERROR of 12496 calls']);
    const aborted = changed('http-fixed-rate', { error: true, message: 'Aborted before even starting' });
    expect(resultCodesCheck(aborted)).toEqual([
      'fortio reports the run failed: Aborted before even starting',
    ]);
  });
});

describe('rateReachedCheck', () => {
  it('passes a fixed-rate run within 1% (ActualQPS 500.6 for 500)', () => {
    expect(rateReachedCheck(fixedRate, fixture('http-fixed-rate'))).toEqual([]);
  });

  it('fails a run that fell behind the requested rate', () => {
    const behind = changed('http-fixed-rate', { ActualQPS: 481.3 });
    expect(rateReachedCheck(fixedRate, behind)).toEqual([
      'the rate was not reached: ActualQPS 481.3 is 3.7% off RequestedQPS 500 (allowed 1.0%); the client or the server fell behind',
    ]);
  });

  it('fails a run at another rate than planned, and saturation against "max"', () => {
    expect(rateReachedCheck({ qps: 1000 }, fixture('http-fixed-rate'))).toEqual([
      "the plan asked -qps 1000 but fortio's RequestedQPS is 500",
    ]);
    expect(rateReachedCheck(fixedRate, fixture('http-saturation'))).toEqual([
      'the plan asked -qps 500 but fortio ran at max (RequestedQPS "max")',
    ]);
    expect(rateReachedCheck(saturation, fixture('http-fixed-rate'))).toEqual([
      'the plan asked -qps 0 (saturation) but fortio ran at RequestedQPS 500',
    ]);
    expect(rateReachedCheck(saturation, fixture('http-saturation'))).toEqual([]);
  });
});

describe('resolutionCheck', () => {
  it('passes -r 0.00001 on sub-millisecond latencies', () => {
    expect(resolutionCheck(0.00001, fixture('http-fixed-rate'))).toEqual([]);
    expect(resolutionCheck(0.00001, fixture('grpc-ping'))).toEqual([]);
    expect(resolutionCheck(0.00001, fixture('http-saturation'))).toEqual([]);
  });

  it("fails fortio's default -r 0.001: too coarse, and p50/p90/p99 are positions in one bucket", () => {
    const reasons = resolutionCheck(0.001, fixture('http-resolution-1ms'));
    expect(reasons[0]).toBe(
      '-r 0.001 s is more than a tenth of the measured p50 0.589 ms: use -r 0.000059 s or finer',
    );
    expect(reasons.slice(1)).toEqual([
      "p50 0.589 ms sits at 0.50 of the bucket 0.179 ms-1.00 ms that holds 100.0% of the calls (from 0.0% to 100.0%): fortio interpolated it between the bucket's edges, a bucket position, not a measurement",
      "p90 0.918 ms sits at 0.90 of the bucket 0.179 ms-1.00 ms that holds 100.0% of the calls (from 0.0% to 100.0%): fortio interpolated it between the bucket's edges, a bucket position, not a measurement",
      "p99 0.992 ms sits at 0.99 of the bucket 0.179 ms-1.00 ms that holds 100.0% of the calls (from 0.0% to 100.0%): fortio interpolated it between the bucket's edges, a bucket position, not a measurement",
    ]);
  });

  it('fails a run whose file says another -r than planned', () => {
    expect(resolutionCheck(0.00001, fixture('http-resolution-1ms'))[0]).toBe(
      'fortio ran with -r 0.001 s (Resolution), not the planned -r 0.00001 s',
    );
  });

  it('fails percentiles exactly at 0.5/0.9/0.99 of a resolution step', () => {
    const json = JSON.parse(fortioFixture('grpc-ping'));
    json.DurationHistogram.Percentiles = [
      { Percentile: 50, Value: 0.000505 },
      { Percentile: 90, Value: 0.000689 },
      { Percentile: 99, Value: 0.00088 },
    ];
    expect(resolutionCheck(0.00001, parseFortioResult(JSON.stringify(json)))).toEqual([
      'p50 0.505 ms sits exactly at 0.5 of a -r 0.00001 s step: a bucket position, not a measurement',
      'p90 0.689 ms sits exactly at 0.9 of a -r 0.00001 s step: a bucket position, not a measurement',
    ]);
  });

  it('fails a result without p50', () => {
    const json = JSON.parse(fortioFixture('http-fixed-rate'));
    json.DurationHistogram.Percentiles = [{ Percentile: 99, Value: 0.000765 }];
    expect(resolutionCheck(0.00001, parseFortioResult(JSON.stringify(json)))).toEqual([
      'the result has no p50 (fortio -p must include 50): the resolution cannot be checked',
    ]);
  });
});

describe('littlesLawCheck', () => {
  it('passes a saturation run whose Avg agrees with connections / ActualQPS', () => {
    expect(littlesLawCheck(saturation, fixture('http-saturation'))).toEqual([]);
  });

  it('fails when the mean latency disagrees with the throughput by more than 10%', () => {
    const json = JSON.parse(fortioFixture('http-saturation'));
    json.DurationHistogram.Avg = 0.00121;
    expect(littlesLawCheck(saturation, parseFortioResult(JSON.stringify(json)))).toEqual([
      "Little's law disagrees: Avg 1.21 ms is 25.7% off 16 connections / 9819.0 QPS = 1.63 ms (allowed 10.0%)",
    ]);
  });

  it('does not apply to fixed-rate runs', () => {
    expect(littlesLawCheck(fixedRate, fixture('http-fixed-rate'))).toEqual([]);
  });
});

describe('socketCountCheck', () => {
  it('passes keep-alive runs with one socket per connection, and keepalive=false with one per call', () => {
    expect(socketCountCheck(fixedRate, fixture('http-fixed-rate'))).toEqual([]);
    expect(
      socketCountCheck({ mode: 'new-connection', connections: 16 }, fixture('http-no-keepalive')),
    ).toEqual([]);
    expect(socketCountCheck({ mode: 'grpc', connections: 16 }, fixture('grpc-ping'))).toEqual([]);
  });

  it('fails connections re-opened mid-run under keep-alive', () => {
    expect(socketCountCheck(fixedRate, fixture('http-non-200'))).toEqual([
      'SocketCount 18 is not the 16 connections: with keep-alive 2 connection(s) were re-opened mid-run (closed by the server or a proxy)',
    ]);
  });

  it('fails the wrong keep-alive setting, reused sockets and fewer connections than planned', () => {
    expect(socketCountCheck({ mode: 'new-connection', connections: 16 }, fixture('http-fixed-rate'))).toEqual(
      [
        'fortio ran with DisableKeepAlive false, but the new-connection run needs keep-alive off (-keepalive=false)',
      ],
    );
    const reused = changed('http-no-keepalive', { SocketCount: 400 });
    expect(socketCountCheck({ mode: 'new-connection', connections: 16 }, reused)).toEqual([
      'SocketCount 400 is below the 992 calls of a -keepalive=false run: connections were reused, so this is not new-connection latency',
    ]);
    expect(socketCountCheck({ ...fixedRate, connections: 32 }, fixture('http-fixed-rate'))[0]).toBe(
      'fortio ran 16 connections (NumThreads), not the planned -c 32',
    );
  });
});
