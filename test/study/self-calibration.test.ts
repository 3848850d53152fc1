import { describe, expect, it } from 'vitest';
import type { ArmPrediction, Estimate, StudyPredictions } from '../../lib/study/arm-predictions.ts';
import {
  armDeviations,
  boundCalibrationPoints,
  deviationDirections,
  fitErrorsByMetric,
} from '../../lib/study/self-calibration.ts';
import { fixtureStudy } from '../report/fixture.ts';

const e = (mean: number, spread = 0): Estimate => ({ mean, spread });
const prediction = (arm: string, hitRate: number, tps: number, promptBlind?: string): ArmPrediction => ({
  arm,
  title: arm,
  model: 'm',
  ...(promptBlind ? { promptBlind } : {}),
  hitRate: e(hitRate, 0.005),
  replicaHitRates: [e(hitRate), e(hitRate)],
  requestsPerReplica: [e(512), e(512)],
  totalTokensPerSecond: e(tps, 100),
  outputTokensPerSecond: e(tps / 18),
  requestsPerSecond: e(tps / 2304),
  meanTtftMs: e(200, 2),
  medianTtftMs: e(180),
  p99TtftMs: e(600, 20),
  meanItlMs: e(28, 0.2),
  meanTpotMs: e(28),
});
const predictions = (arms: ArmPrediction[]): StudyPredictions => ({
  seeds: [42],
  arms,
  partition: prediction('partition', 0.77, 21_500),
});

describe('self-calibration', () => {
  it('takes the valid single-replica runs of a study as calibration points, with their planned workload', () => {
    const points = boundCalibrationPoints(fixtureStudy());
    expect(points.map((p) => [p.label, p.input.prefixes, p.input.replicas])).toEqual([
      ['bound-p128', 128, 1],
      ['bound-p64', 64, 1],
      ['bound-p16', 16, 1],
      ['bound-p8', 8, 1],
    ]);
    expect(points[0]?.measured).toMatchObject({
      totalTokensPerSecond: 12_929,
      meanTtftMs: 215.7,
      meanItlMs: 42.82,
    });
  });

  it('names what a deviation beyond the band means', () => {
    const calibrated = predictions([prediction('cache-aware-completions', 0.78, 21_000)]);
    const rows = armDeviations(
      'cache-aware-completions',
      {
        hitRate: 0.425,
        totalTokensPerSecond: 17_000,
        meanTtftMs: 205,
        p99TtftMs: 1_400,
        meanItlMs: 28.1,
        requests: [700, 325],
      },
      calibrated,
      calibrated,
      0.42,
    );
    const by = new Map(rows.map((r) => [r.metric, r]));
    expect(by.get('hitRate')?.meaning).toMatch(/^routes on load alone/);
    expect(by.get('totalTokensPerSecond')?.meaning).toBe('slower than its model: front-end overhead?');
    expect(by.get('meanTtftMs')?.outside).toBe(false);
    expect(by.get('p99TtftMs')?.meaning).toMatch(/^slower than its model in the tail/);
    expect(by.get('meanItlMs')?.outside).toBe(false);
    expect(by.get('requestsPerReplica')?.meaning).toMatch(/^piles onto one replica/);
    // Inside the band: no meaning, and the a-priori prediction is carried beside the calibrated one.
    const inside = armDeviations(
      'cache-aware-completions',
      {
        hitRate: 0.775,
        totalTokensPerSecond: 21_100,
        meanTtftMs: 201,
        p99TtftMs: 610,
        meanItlMs: 28,
        requests: [512, 513],
      },
      calibrated,
      calibrated,
      0.42,
    );
    expect(inside.every((r) => !r.outside && r.meaning === undefined)).toBe(true);
    expect(inside[0]?.apriori).toEqual(e(0.78, 0.005));
  });

  it("widens a timing band by the fit's own error on the bound runs, and blames the model where the partition deviates too", () => {
    const calibrated = predictions([prediction('round-robin', 0.42, 21_000)]);
    const slowTtft = {
      hitRate: 0.42,
      totalTokensPerSecond: 21_000,
      meanTtftMs: 260,
      p99TtftMs: 600,
      meanItlMs: 28,
      requests: [512, 512],
    };
    const ttft = (rows: ReturnType<typeof armDeviations>) => rows.find((r) => r.metric === 'meanTtftMs');
    // 260 ms against 200 +-(2x2 + 15%): outside, the front end's doing.
    const plain = ttft(armDeviations('round-robin', slowTtft, calibrated, calibrated, 0.42));
    expect(plain?.meaning).toBe('slower than its model: front-end overhead?');
    // A fit that misses the bound runs' mean TTFT by 20% cannot tell 30% apart: the band takes it in.
    const fitErrors = fitErrorsByMetric([
      { label: 'bound-p128', metric: 'meanTtftMs', predicted: 240, measured: 200, relativeError: 0.2 },
      { label: 'bound-p64', metric: 'meanTtftMs', predicted: 160, measured: 200, relativeError: -0.2 },
      { label: 'bound-p64', metric: 'meanItlMs', predicted: 28, measured: 28, relativeError: 0 },
    ]);
    expect(fitErrors).toEqual({ meanTtftMs: 0.2, meanItlMs: 0 });
    const widened = ttft(armDeviations('round-robin', slowTtft, calibrated, calibrated, 0.42, { fitErrors }));
    expect(widened?.band).toBeCloseTo(4 + 0.35 * 200, 6);
    expect(widened?.outside).toBe(false);
    // The ideal partition has no front end: its deviation is the engine's on this host.
    const reference = armDeviations('partition', { ...slowTtft, requests: [] }, calibrated, calibrated, 0.42);
    expect(ttft(reference)?.meaning).toMatch(/^slower than its model with no front end/);
    expect(deviationDirections(reference)).toEqual({ meanTtftMs: 'slower' });
    // An arm slower the same way as the partition shares the model's error, not a front end's.
    const shared = ttft(
      armDeviations('round-robin', slowTtft, calibrated, calibrated, 0.42, {
        reference: deviationDirections(reference),
      }),
    );
    expect(shared?.meaning).toBe(
      "slower than its model, as the ideal partition is: the timing model's error, not this front end's",
    );
  });
});
