import { describe, expect, test } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { BUDGET, checkManifests, type KubeObject } from '../../lib/check/index.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { synthLab } from './synth.ts';

/** The synthesized charts plus every benchmark Job of the study, as `lab check` sees dist/. */
function synthesizedTestbed(overrides: unknown = {}): KubeObject[] {
  const lab = synthLab(overrides);
  const jobs = studyPlan(lab.config).runs.flatMap((run) =>
    run.benchmarks.map((spec) => benchmarkJob(lab.config, spec)),
  );
  return [...lab.objects, ...jobs] as unknown as KubeObject[];
}

describe('lab check on the synthesized testbed', () => {
  test('the default synth has no violation', () => {
    expect(checkManifests(synthesizedTestbed())).toEqual([]);
  });

  test('with every optional arm, no violation: the resource budget fits the g6.12xlarge too', () => {
    const all = { study: { optionalArms: ['epp-prefix3', 'ai-gateway', 'llmd-precise'] } };
    expect(checkManifests(synthesizedTestbed(all))).toEqual([]);
    // The same manifests on a node of half the CPUs do not fit, and the budget rule says so.
    const small = checkManifests(synthesizedTestbed(all), { nodeCpu: 24 });
    expect(small.map((v) => v.lesson)).toEqual([BUDGET]);
  });

  test('the checker does see the synthesized objects: breaking one fails it', () => {
    const objects = synthesizedTestbed();
    const sts = objects.find((o) => o.kind === 'StatefulSet') as unknown as {
      spec: { template: { spec: { runtimeClassName?: string } } };
    };
    delete sts.spec.template.spec.runtimeClassName;
    expect(checkManifests(objects).map((v) => v.lesson)).toContain(1);
  });
});
