import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { buildBenchmarkJobsApp } from '../../charts/benchmark-job.ts';
import { buildLabApp } from '../../charts/lab-app.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { tempDir } from '../temp.ts';
import { synthLab } from './synth.ts';
import { validateManifest } from './validate.ts';

const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding']);

describe('the lab app', () => {
  const lab = synthLab();

  test('has one chart per deployable unit, ids sorting in apply order', () => {
    expect(Object.keys(lab.charts)).toEqual([
      '00-namespace',
      '10-gpu',
      '20-model-servers',
      '30-baseline',
      '40-routers',
      '50-epp',
      '60-envoy',
    ]);
  });

  test('every object validates against its schema', () => {
    // namespace 1, device plugin 1, replicas 2, baseline 1, routers 3x2, EPP 9, Envoy 3
    expect(lab.objects).toHaveLength(23);
    for (const object of lab.objects) validateManifest(object);
  });

  test('every object carries the lab label and the right namespace', () => {
    for (const [chart, objects] of Object.entries(lab.charts)) {
      for (const object of objects) {
        expect(object.metadata.labels?.['app.kubernetes.io/part-of'], object.metadata.name).toBe(
          'llm-gateway-lab',
        );
        const expected = CLUSTER_SCOPED.has(object.kind)
          ? undefined
          : chart === '10-gpu'
            ? 'kube-system'
            : 'vllm';
        expect(object.metadata.namespace, `${object.kind} ${object.metadata.name}`).toBe(expected);
      }
    }
  });

  test('object names are unique per kind and namespace', () => {
    const keys = lab.objects.map((o) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  test('the apply order holds no benchmark Job', () => {
    expect(lab.objects.filter((o) => o.kind === 'Job')).toEqual([]);
  });

  test('with every optional arm, everything still validates', () => {
    const full = synthLab({ study: { optionalArms: ['epp-prefix3', 'ai-gateway', 'llmd-precise'] } });
    for (const object of full.objects) validateManifest(object);
    const deployments = full.objects.filter((o) => o.kind === 'Deployment').map((o) => o.metadata.name);
    expect(deployments).toEqual(
      expect.arrayContaining([
        'qwen3-epp',
        'qwen3-epp-prefix3',
        'qwen3-ai-gateway',
        'qwen3-llmd-precise',
        'envoy-epp-prefix3',
      ]),
    );
    expect(Object.keys(full.charts).slice(-2)).toEqual(['70-ai-gateway-config', '71-ai-gateway']);
    expect(full.objects.filter((o) => o.kind === 'StatefulSet').map((o) => o.metadata.name)).toEqual([
      'qwen3',
      'qwen3-kv',
    ]);
  });
});

describe('synth to disk', () => {
  test('writes one file per chart named by its id, and the study Jobs to their own folder', () => {
    const config = parseLabConfig({});
    const outdir = tempDir('lab-dist-');
    buildLabApp(config, { outdir }).synth();
    const plan = studyPlan(config);
    buildBenchmarkJobsApp(config, plan, join(outdir, 'jobs')).synth();

    expect(readdirSync(outdir).sort()).toEqual([
      '00-namespace.yaml',
      '10-gpu.yaml',
      '20-model-servers.yaml',
      '30-baseline.yaml',
      '40-routers.yaml',
      '50-epp.yaml',
      '60-envoy.yaml',
      'jobs',
    ]);
    const jobFiles = readdirSync(join(outdir, 'jobs')).sort();
    expect(jobFiles).toEqual(plan.runs.map((run) => `${run.id}.yaml`).sort());

    const partition = parseAllDocuments(readFileSync(join(outdir, 'jobs', 'partition.yaml'), 'utf8')).map(
      (d) => d.toJSON(),
    );
    expect(partition.map((job) => job.metadata.name)).toEqual(['bench-partition-r0', 'bench-partition-r1']);
    for (const job of partition) validateManifest(job);
  });
});
