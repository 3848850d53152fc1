import { describe, expect, it } from 'vitest';
import { reportSections } from '../../lib/report/format.ts';
import { MODEL_TOLERANCE, reportTables } from '../../lib/report/tables.ts';
import { studyPredictions } from '../../lib/study/planner.ts';
import type { StudyRecord } from '../../lib/study/results.ts';
import { fixtureStudy } from './fixture.ts';

const rowOf = (study: StudyRecord, arm: string) => {
  const row = reportTables(study).prefixArms.find((r) => r.arm === arm);
  if (!row) throw new Error(`no row ${arm}`);
  return row;
};

describe('verdicts against kube-proxy', () => {
  it('without repeats: from the simulated spread, and the report says so', () => {
    const study = fixtureStudy();
    const tables = reportTables(study);
    const epp = rowOf(study, 'epp-completions');
    expect(epp.repeats).toBe(1);
    expect(epp.vsBaseline?.hitRate).toMatchObject({ noise: 'simulated', verdict: 'better', unit: 'points' });
    expect(epp.vsBaseline?.hitRate?.difference).toBeCloseTo((0.737 - 0.42) * 100, 0);
    // The band is twice the combined simulated spread of the two predictions.
    const p = study.metadata.config;
    const predicted = studyPredictions(p, study.metadata.kvCacheTokens);
    const spread = (arm: string) => predicted.arms.find((a) => a.arm === arm)?.hitRate.spread ?? Number.NaN;
    expect(epp.vsBaseline?.hitRate?.band).toBeCloseTo(
      2 * Math.hypot(spread('epp-completions'), spread('kube-proxy')),
      10,
    );
    // The prompt-blind EPP over chat is indistinguishable from the baseline.
    expect(rowOf(study, 'epp').vsBaseline?.hitRate?.verdict).toBe('same within noise');
    const arms = reportSections(tables).find((s) => s.id === 'arms');
    expect(arms?.notes[0]).toMatch(
      /^Noise band of the verdicts: the simulated run-to-run spread \(5 client seeds\)/,
    );
    expect(
      arms?.table?.rows.find((r) => r[0] === 'Envoy + GAIE Endpoint Picker over /v1/completions')?.[5],
    ).toMatch(/^\+31\.7 points, better \(noise \+-\d\.\d points, simulated\)$/);
  });

  it('with repeats: from the measured spread over the repeats, averaged rows', () => {
    const study = fixtureStudy({ repeats: 3 });
    const kube = rowOf(study, 'kube-proxy');
    expect(kube.repeats).toBe(3);
    // Repeats move hit rates by 0, +0.6 and -0.6 points: the mean is the first run's.
    expect(kube.hitRate).toBeCloseTo(0.42, 3);
    expect(kube.measuredSpread?.hitRate).toBeCloseTo(0.006, 4);
    const rr = rowOf(study, 'router-round-robin');
    expect(rr.vsBaseline?.hitRate).toMatchObject({ noise: 'measured', verdict: 'same within noise' });
    expect(rr.vsBaseline?.hitRate?.band).toBeCloseTo(2 * Math.hypot(0.006, 0.006), 4);
    expect(rowOf(study, 'epp-completions').vsBaseline?.hitRate).toMatchObject({
      noise: 'measured',
      verdict: 'better',
    });
    const tables = reportTables(study);
    const arms = reportSections(tables).find((s) => s.id === 'arms');
    expect(arms?.notes[0]).toMatch(/the measured spread over the repeats/);
    expect(arms?.table?.rows[0]?.[3]).toBe('42.0% (mean of 3)');
    // Every repeat of the incomplete run is invalid: the arm has no row, and the invalid table has all three.
    expect(tables.prefixArms.map((r) => r.arm)).not.toContain('router-cache-aware-tuned-completions');
    expect(
      tables.invalid.filter((r) => r.runId.startsWith('arm-router-cache-aware-tuned-completions-prefix')),
    ).toHaveLength(3);
  });

  it('a single valid repeat falls back to the simulated spread', () => {
    const study = fixtureStudy({ repeats: 2 });
    const runs = study.runs.map((r) =>
      r.id === 'arm-router-round-robin-prefix-rep2' ? { ...r, valid: false, invalidReasons: ['x'] } : r,
    );
    const rr = rowOf({ ...study, runs }, 'router-round-robin');
    expect(rr.repeats).toBe(1);
    expect(rr.vsBaseline?.hitRate?.noise).toBe('simulated');
  });
});

describe('prediction vs measurement', () => {
  it('flags an arm whose measurement is outside its predicted band, and only that one', () => {
    const tables = reportTables(fixtureStudy());
    const outside = tables.predictionChecks.filter((c) => c.outside);
    // The fixture's cache-aware router over completions measured 64.8% against a prediction near 78%.
    expect(outside.map((c) => [c.arm, c.metric])).toEqual([['router-cache-aware-completions', 'hitRate']]);
    const check = outside[0];
    expect(check?.band).toBeCloseTo(2 * (check?.predicted.spread ?? 0) + MODEL_TOLERANCE.hitRate, 12);
    const section = reportSections(tables).find((s) => s.id === 'prediction-vs-measurement');
    expect(section?.table?.rows.find((r) => r[5] !== 'inside')).toEqual([
      'vllm-router cache-aware over /v1/completions',
      'Hit rate',
      '64.8%',
      expect.stringMatching(/^7\d\.\d%$/),
      expect.stringMatching(/^7\d\.\d% to 8\d\.\d%$/),
      'OUTSIDE the predicted band',
    ]);
    expect(section?.warnings).toEqual([
      'Outside the predicted band: vllm-router cache-aware over /v1/completions. Look here first.',
    ]);
  });

  it('uses the predictions stored in the study JSON when present', () => {
    const study = fixtureStudy();
    const stored = studyPredictions(study.metadata.config);
    const kube = stored.arms.find((a) => a.arm === 'kube-proxy');
    if (!kube) throw new Error('no kube-proxy prediction');
    // A study that ran with a different prediction for kube-proxy keeps showing that one.
    const changed = {
      ...stored,
      arms: stored.arms.map((a) =>
        a.arm === 'kube-proxy' ? { ...a, hitRate: { mean: 0.6, spread: 0.01 } } : a,
      ),
    };
    const tables = reportTables({ ...study, metadata: { ...study.metadata, predictions: changed } });
    expect(tables.predictionsSource).toBe('study');
    expect(tables.prefixArms[0]?.prediction?.hitRate.mean).toBe(0.6);
    expect(
      tables.predictionChecks.find((c) => c.arm === 'kube-proxy' && c.metric === 'hitRate')?.outside,
    ).toBe(true);
    expect(reportTables(study).predictionsSource).toBe('recomputed');
  });
});
