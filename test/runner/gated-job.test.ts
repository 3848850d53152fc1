import { buildSync } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import { gatedJob } from '../../lib/runner/gated-job.ts';
import type { ClientGate } from '../../lib/study/benchmark.ts';
import { findRun, studyPlan } from '../../lib/study/plan.ts';
import { gateServiceName } from '../../lib/study/staging.ts';

const gateOf = (config: LabConfig, id: string): ClientGate => ({
  baseUrl: `http://${gateServiceName(id)}.${config.namespace}.svc.cluster.local:8000`,
  readyCheckTimeoutSeconds: 1_200,
});

/** What the runner reads: the configuration and the Jobs as JSON (runner ConfigMap). */
const viaJson = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

describe("the runner's staged client Job", () => {
  it('is exactly benchmarkJob(config, spec, gate), built from the ConfigMap Job, for every client', () => {
    for (const overrides of [
      {},
      { study: { optionalArms: ['epp-prefix3', 'ai-gateway', 'llmd-precise'] } },
      { study: { parallelism: 2 } },
    ]) {
      const config = parseLabConfig(overrides);
      for (const spec of studyPlan(config).runs.flatMap((run) => run.benchmarks)) {
        const gate = gateOf(config, spec.id);
        const fromConfigMap = viaJson(benchmarkJob(config, spec));
        expect(gatedJob(fromConfigMap, viaJson(config), spec, gate), spec.id).toEqual(
          benchmarkJob(config, spec, gate),
        );
      }
    }
  });

  it('is the ConfigMap Job itself without a gate, and leaves the ConfigMap Job untouched', () => {
    const config = parseLabConfig({});
    const [spec] = findRun(studyPlan(config), 'arm-router-cache-aware-prefix').benchmarks;
    const job = viaJson(benchmarkJob(config, spec));
    const before = JSON.stringify(job);
    expect(gatedJob(job, config, spec)).toBe(job);
    gatedJob(job, config, spec, gateOf(config, spec.id));
    expect(JSON.stringify(job)).toBe(before);
  });

  it('refuses a Job whose client is not the published one of its benchmark', () => {
    const config = parseLabConfig({});
    const plan = studyPlan(config);
    const [spec] = findRun(plan, 'arm-router-cache-aware-prefix').benchmarks;
    const [other] = findRun(plan, 'arm-kube-proxy-prefix').benchmarks;
    expect(() => gatedJob(benchmarkJob(config, other), config, spec, gateOf(config, spec.id))).toThrow(
      'job/bench-arm-kube-proxy-prefix: its container "bench" does not run the published client of benchmark arm-router-cache-aware-prefix, so it cannot be staged',
    );
    const changed = parseLabConfig({ model: { servedName: 'llama' } });
    expect(() => gatedJob(benchmarkJob(config, spec), changed, spec, gateOf(config, spec.id))).toThrow(
      "the runner's jobs.json and configuration disagree",
    );
  });

  it("keeps the runner's bundle free of cdk8s (the ConfigMap holds at most 1 MiB)", () => {
    for (const entry of ['lib/runner/main.ts', 'charts/gate-service.ts']) {
      const { metafile } = buildSync({
        entryPoints: [entry],
        bundle: true,
        platform: 'node',
        format: 'esm',
        write: false,
        metafile: true,
      });
      const modules = Object.keys(metafile.inputs).filter((path) => path.includes('node_modules'));
      expect(modules, entry).toEqual([]);
    }
  });
});
