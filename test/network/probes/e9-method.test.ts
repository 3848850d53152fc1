import { describe, expect, it } from 'vitest';
import {
  type AttemptRun,
  addAttempt,
  methodCheck,
  type ProbeSample,
  quantizationCheck,
  sampleFromWatch,
  type WatchedTarget,
  watchResult,
} from '../../../lib/network/probes/service-prober.ts';
import {
  freeStaticClusterIps,
  parseServiceRange,
  staticBandSize,
} from '../../../lib/network/service-range.ts';

const STEP = 20;
const T0 = 1_767_225_600_000;

/**
 * A watched address as the prober-first method sees it: probing since `T0`, attempts every 20 ms
 * (each SYN dropped until the rule exists), the Service accepted at `acceptedAt`, its rule
 * programmed `delay` ms later; the first attempt after that connects in 0.1 ms.
 */
function correct(
  acceptedAt: number,
  delay: number,
  options: { rejectAfter?: number; step?: number } = {},
): WatchedTarget {
  const programmed = acceptedAt + delay;
  const rejects =
    options.rejectAfter === undefined ? Number.POSITIVE_INFINITY : acceptedAt + options.rejectAfter;
  const runs: AttemptRun[] = [];
  let t = T0;
  let refused = 0;
  let timedOut = 0;
  while (t < programmed) {
    if (t >= rejects) {
      addAttempt(runs, 'refused', t);
      refused++;
      t += 0.3;
    } else {
      addAttempt(runs, 'timeout', t);
      timedOut++;
      t += options.step ?? STEP + 0.2;
    }
  }
  addAttempt(runs, 'connected', t);
  return {
    target: '10.43.0.20:80',
    probingSinceEpochMs: T0,
    connectedAtEpochMs: t + 0.1,
    attempts: refused + timedOut + 1,
    refused,
    timedOut,
    otherErrors: {},
    attemptRuns: runs,
  };
}

/** Twenty correct samples: Services accepted 2 s apart, programmed 4-1,200 ms later. */
function correctSamples(): ProbeSample[] {
  return Array.from({ length: 20 }, (_, i) => {
    const acceptedAt = T0 + 500 + i * 2_000 + ((i * 7.3) % 11);
    return sampleFromWatch(correct(acceptedAt, 4 + ((i * 613) % 1_200)), acceptedAt);
  });
}

describe('E9 samples from the prober-first method', () => {
  it('derives latency, attempts since the acceptance, the first-attempt delay and the resolution', () => {
    const acceptedAt = T0 + 1_000.5;
    const sample = sampleFromWatch(correct(acceptedAt, 95), acceptedAt);
    expect(sample.connected).toBe(true);
    // Programmed at +95 ms; the attempt grid of 20.2 ms reaches it at the next step.
    expect(sample.latencyMs).toBeGreaterThanOrEqual(95);
    expect(sample.latencyMs).toBeLessThan(95 + STEP + 1);
    expect(sample.firstAttemptAfterMs).toBeLessThanOrEqual(STEP + 0.2);
    expect(sample.attemptsAfterStart).toBe(Math.round((sample.latencyMs as number) / 20.2) + 1);
    expect(sample.attempts).toBeGreaterThan(sample.attemptsAfterStart as number);
    expect(sample.resolutionMs).toBeCloseTo(20.2, 5);
    expect(sample.timeoutStepMs).toBeCloseTo(20.2, 5);
  });

  it('counts ten thousand refusals (kube-proxy REJECT before the endpoint) without losing the first attempt after the acceptance', () => {
    const acceptedAt = T0 + 30_000.7;
    const watched = correct(acceptedAt, 1_040, { rejectAfter: 15 });
    expect(watched.refused).toBeGreaterThan(3_000);
    expect(watched.attemptRuns).toHaveLength(3);
    const sample = sampleFromWatch(watched, acceptedAt);
    expect(sample.firstAttemptAfterMs).toBeLessThanOrEqual(STEP + 0.2);
    expect(sample.latencyMs).toBeGreaterThanOrEqual(1_040);
    expect(sample.latencyMs).toBeLessThan(1_041);
    // Refusals come 0.3 ms apart: the sample is that fine; the timed-out attempts still 20.2 ms.
    expect(sample.resolutionMs).toBeCloseTo(0.3, 5);
    // The timed-out attempt in flight at the acceptance ended after it; the next ones are counted.
    expect(Math.abs((sample.attemptsAfterStart as number) - (watched.refused + 2))).toBeLessThanOrEqual(1);
    expect(methodCheck([sample], STEP).verdict).toBe('datapath');
  });

  it('passes correct samples: the connects sit on 20 ms steps of the attempt grid, as expected', () => {
    const samples = correctSamples();
    // Measured from the first attempt after the acceptance, every connect is a whole number of
    // attempt steps: the old check, fed those values, would have called a correct run clustered.
    const onGrid = samples.map((s) => (s.latencyMs as number) - s.firstAttemptAfterMs - 0.1);
    expect(quantizationCheck(onGrid, 20.2).verdict).toBe('clustered');
    const check = methodCheck(samples, STEP);
    expect(check).toMatchObject({
      verdict: 'datapath',
      firstAttemptConnects: 0,
      lateFirstAttempts: 0,
      connectedBeforeStart: 0,
      reasons: [],
    });
    expect(check.medianStepMs).toBeCloseTo(20.2, 5);
  });

  it('fails a pod-start measurement: Services made first, the prober started 4 s later connects at once', () => {
    const samples = Array.from({ length: 20 }, (_, i) => {
      const acceptedAt = T0 + i * 3;
      const proberStart = T0 + 4_000 + i * 0.4;
      // The rule was programmed long before the prober's first attempt: that attempt connects.
      const watched: WatchedTarget = {
        target: `10.43.0.${20 + i}:80`,
        probingSinceEpochMs: proberStart,
        connectedAtEpochMs: proberStart + 0.1,
        attempts: 1,
        refused: 0,
        timedOut: 0,
        otherErrors: {},
        attemptRuns: [
          { outcome: 'connected', count: 1, firstStartEpochMs: proberStart, lastStartEpochMs: proberStart },
        ],
      };
      return sampleFromWatch(watched, acceptedAt);
    });
    expect(samples[0].latencyMs).toBeGreaterThan(3_900);
    const check = methodCheck(samples, STEP);
    expect(check.verdict).toBe('method');
    expect(check.firstAttemptConnects).toBe(20);
    expect(check.lateFirstAttempts).toBe(20);
    expect(check.reasons[0]).toBe(
      "20 of 20 samples connected on the prober's first attempt: the prober started after the Service was programmed, so the samples time the prober's start, not the datapath",
    );
    expect(check.reasons[1]).toContain('the prober was not probing when the Service was created');
  });

  it('fails samples quantized by a 200 ms attempt limit, and an address that answered before its Service', () => {
    const coarse = Array.from({ length: 10 }, (_, i) => {
      const acceptedAt = T0 + 300 + i * 2_000;
      // Attempts 200 ms apart whatever the 20 ms timeout.
      return sampleFromWatch(correct(acceptedAt, 300 + i * 37, { step: 200 }), acceptedAt);
    });
    const check = methodCheck(coarse, STEP);
    expect(check.verdict).toBe('method');
    expect(check.reasons.join('\n')).toContain('not its 20 ms timeout: every sample is quantized to');
    const early = sampleFromWatch(correct(T0 + 100, 0), T0 + 500);
    expect(early.latencyMs).toBeLessThan(0);
    expect(methodCheck([early], STEP).reasons.join('\n')).toContain(
      '1 of 1 addresses answered before their Service was accepted',
    );
  });

  it('keeps only addresses whose Service was created as samples', () => {
    const a = correct(T0 + 400, 30);
    const result = watchResult(
      {
        probe: 'service-prober',
        mode: 'watch',
        attemptTimeoutMs: STEP,
        giveUpMs: 60_000,
        watched: [a, { ...a, target: '10.43.0.21:80' }],
      },
      new Map([[a.target, T0 + 400]]),
    );
    expect(result.samples.map((s) => s.target)).toEqual(['10.43.0.20:80']);
    expect(result.method?.verdict).toBe('datapath');
  });
});

describe('free ClusterIPs of the static band', () => {
  it('sizes the band as the API server does: min(max(16, size / 16), 256)', () => {
    expect(staticBandSize(parseServiceRange('10.43.0.0/16'))).toBe(256);
    expect(staticBandSize(parseServiceRange('10.96.0.0/24'))).toBe(16);
    expect(staticBandSize(parseServiceRange('10.96.0.0/20'))).toBe(256);
    expect(staticBandSize(parseServiceRange('10.96.0.0/22'))).toBe(64);
  });

  it('skips the network, kubernetes, cluster DNS and used addresses', () => {
    expect(freeStaticClusterIps('10.43.0.0/16', ['10.43.0.3', '10.43.0.5'], 6)).toEqual([
      '10.43.0.2',
      '10.43.0.4',
      '10.43.0.6',
      '10.43.0.7',
      '10.43.0.8',
      '10.43.0.9',
    ]);
    expect(freeStaticClusterIps('10.43.0.0/16', [], 9)).toContain('10.43.0.11');
    expect(freeStaticClusterIps('10.43.0.0/16', [], 9)).not.toContain('10.43.0.10');
    expect(() => freeStaticClusterIps('10.96.0.0/24', [], 20)).toThrow(
      'the static band of 10.96.0.0/24 (its first 16 addresses) has 13 free addresses, E9 needs 20 (experiments.serviceScale.samples)',
    );
    expect(() => freeStaticClusterIps('10.43.0.0', [], 1)).toThrow(
      "network.serviceCidr must be an IPv4 CIDR with a prefix from /8 to /30, got '10.43.0.0'",
    );
  });
});
