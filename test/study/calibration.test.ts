import { describe, expect, it } from 'vitest';
import {
  type CalibrationPoint,
  calibrationErrors,
  fitTimingModel,
  labSpecCalibrationPoints,
  rmsRelativeError,
} from '../../lib/study/calibration.ts';
import { DEFAULT_SIMULATION_MODEL, type SimulationInput, simulate } from '../../lib/study/simulator.ts';

const WORKLOAD: SimulationInput = {
  replicas: 1,
  kvCacheTokensPerReplica: 163_472,
  blockSize: 16,
  prefixes: 128,
  prefixLen: 2048,
  suffixLen: 128,
  chatTemplateTokens: 10,
  outputLen: 128,
  prompts: 1024,
  concurrency: 32,
  seed: 42,
};

describe('timing calibration', () => {
  it('the default coefficients reproduce docs/facts.md §4.1 in sample: tok/s within 7%, ITL within 9%, mean TTFT within 20%', () => {
    const rows = calibrationErrors(labSpecCalibrationPoints(WORKLOAD), DEFAULT_SIMULATION_MODEL);
    expect(rows).toHaveLength(12);
    for (const row of rows) {
      const limit = row.metric === 'meanTtftMs' ? 0.2 : row.metric === 'meanItlMs' ? 0.09 : 0.07;
      expect(Math.abs(row.relativeError), `${row.label} ${row.metric}`).toBeLessThan(limit);
    }
    expect(rmsRelativeError(rows)).toBeLessThan(0.1);
  });

  it('recovers the coefficients a set of runs was made with', () => {
    const small = { ...WORKLOAD, prompts: 192, concurrency: 16 };
    const truth = {
      ...DEFAULT_SIMULATION_MODEL,
      stepOverheadMs: 8,
      prefillMsPerToken: 0.04,
      frontEndMsPerRequest: 20,
    };
    const points: CalibrationPoint[] = [32, 8].map((prefixes) => {
      const input = { ...small, prefixes };
      const { timing } = simulate(input, 'single-replica', truth);
      return { label: `${prefixes}`, input, measured: { ...timing } };
    });
    const fit = fitTimingModel(points, DEFAULT_SIMULATION_MODEL, { maxEvaluations: 120 });
    expect(fit.rmsBefore).toBeGreaterThan(0.1);
    expect(fit.rmsAfter).toBeLessThan(0.03);
    expect(fit.rmsAfter).toBeLessThan(fit.rmsBefore / 4);
  });

  it('refuses to fit nothing', () => {
    expect(() => fitTimingModel([], DEFAULT_SIMULATION_MODEL)).toThrow(/at least one single-replica run/);
  });
});
