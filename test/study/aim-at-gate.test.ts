import { describe, expect, it } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { defaultLabConfig } from '../../lib/config/load.ts';
import { aimAtGate } from '../../lib/study/benchmark.ts';
import { findRun, studyPlan } from '../../lib/study/plan.ts';

const config = defaultLabConfig();
const plan = studyPlan(config);
const gate = {
  baseUrl: 'http://gate-arm-epp-prefix.vllm.svc.cluster.local:8081',
  readyCheckTimeoutSeconds: 12_300.4,
};

describe('aimAtGate: the runner’s baked client Job, staged', () => {
  it('is exactly the Job benchmarkJob builds for a staged client', () => {
    const [spec] = findRun(plan, 'arm-epp-prefix').benchmarks;
    expect(aimAtGate(benchmarkJob(config, spec), gate)).toEqual(benchmarkJob(config, spec, gate));
  });

  it('leaves the baked Job untouched', () => {
    const [spec] = findRun(plan, 'arm-kube-proxy-prefix').benchmarks;
    const baked = benchmarkJob(config, spec);
    const before = JSON.stringify(baked);
    aimAtGate(baked, gate);
    expect(JSON.stringify(baked)).toBe(before);
  });

  it('refuses a Job without a --base-url, which could not be held at a gate', () => {
    const job = {
      metadata: { name: 'bench-x' },
      spec: { template: { spec: { containers: [{ name: 'bench', args: ['bench', 'serve'] }] } } },
    };
    expect(() => aimAtGate(job, gate)).toThrow('job/bench-x has no --base-url argument to aim at a gate');
  });
});
