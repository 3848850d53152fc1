import { buildSync } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import type { JobObject } from '../../lib/runner/ports.ts';
import { aimAtGate } from '../../lib/study/benchmark.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { gateServiceName } from '../../lib/study/staging.ts';

describe("the runner's bundle and its staged clients", () => {
  it('imports no package (cdk8s would put megabytes into a ConfigMap of at most 1 MiB)', () => {
    // charts/gate-service.ts is bundled through the stager; it once pulled cdk8s-plus-34 (2 MB).
    for (const entry of ['lib/runner/main.ts', 'charts/gate-service.ts']) {
      const { metafile } = buildSync({
        entryPoints: [entry],
        bundle: true,
        platform: 'node',
        format: 'esm',
        write: false,
        metafile: true,
      });
      expect(
        Object.keys(metafile.inputs).filter((path) => path.includes('node_modules')),
        entry,
      ).toEqual([]);
    }
  });

  it('stages every client of the serial, the all-arms and the parallel study as benchmarkJob(config, spec, gate)', () => {
    for (const overrides of [
      {},
      { study: { optionalArms: ['epp-prefix3', 'ai-gateway', 'llmd-precise'] } },
      { study: { parallelism: 2 } },
    ]) {
      const config = parseLabConfig(overrides);
      for (const spec of studyPlan(config).runs.flatMap((run) => run.benchmarks)) {
        const gate = {
          baseUrl: `http://${gateServiceName(spec.id)}.${config.namespace}.svc.cluster.local:8000`,
          readyCheckTimeoutSeconds: 1_200,
        };
        // As the runner reads it: the ConfigMap's jobs.json.
        const baked = JSON.parse(JSON.stringify(benchmarkJob(config, spec))) as JobObject;
        expect(aimAtGate(baked, gate), spec.id).toEqual(benchmarkJob(config, spec, gate));
      }
    }
  });
});
