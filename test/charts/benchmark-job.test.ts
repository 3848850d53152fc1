import { Testing } from 'cdk8s';
import { describe, expect, test } from 'vitest';
import { BenchmarkJob, benchmarkJob, benchmarkJobName } from '../../charts/benchmark-job.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { benchServeArgs } from '../../lib/study/benchmark.ts';
import { findRun, studyPlan } from '../../lib/study/plan.ts';
import { envOf } from './synth.ts';
import { validateManifest } from './validate.ts';

describe('benchmark Jobs', () => {
  const config = parseLabConfig({});
  const plan = studyPlan(config);
  const [spec] = findRun(plan, 'arm-router-cache-aware-prefix').benchmarks;
  const job = benchmarkJob(config, spec);
  // biome-ignore lint/suspicious/noExplicitAny: reading the plain manifest
  const pod = (job.spec as any).template.spec;
  const c = pod.containers[0];

  test('every benchmark of the default study is a valid Job', () => {
    for (const run of plan.runs) for (const s of run.benchmarks) validateManifest(benchmarkJob(config, s));
  });

  test('never retried, never restarted', () => {
    expect(job.metadata).toMatchObject({ name: 'bench-arm-router-cache-aware-prefix', namespace: 'vllm' });
    expect(job.spec.backoffLimit).toBe(0);
    expect(pod.restartPolicy).toBe('Never');
  });

  test('sees the GPUs through the runtime class but requests none', () => {
    expect(pod.runtimeClassName).toBe('nvidia');
    expect(envOf(c)).toEqual({
      NVIDIA_VISIBLE_DEVICES: 'all',
      NVIDIA_DRIVER_CAPABILITIES: 'compute,utility',
      HF_HOME: '/models',
    });
    expect(JSON.stringify(c.resources)).not.toContain('nvidia.com/gpu');
    expect(c.resources.limits).toEqual({ memory: '12Gi' });
  });

  test('runs vllm bench serve with the study arguments, writing to /out on the host', () => {
    expect(c.image).toBe('vllm/vllm-openai:v0.11.0');
    expect(c.command).toEqual(['vllm']);
    expect(c.args).toEqual(benchServeArgs(config, spec));
    expect(c.args).toContain('--base-url=http://vllm-router-cache-aware.vllm.svc.cluster.local:8000');
    expect(c.args).toContain('--served-model-name=qwen3');
    expect(c.volumeMounts).toContainEqual({ name: 'results', mountPath: '/out' });
    expect(pod.volumes).toContainEqual({
      name: 'results',
      hostPath: { path: '/var/lib/lab/results/arm-router-cache-aware-prefix', type: 'DirectoryOrCreate' },
    });
    expect(pod.volumes).toContainEqual({
      name: 'model-cache',
      hostPath: { path: '/var/lib/lab/models', type: 'DirectoryOrCreate' },
    });
  });

  test('a staged Job differs from the published one only in its client arguments', () => {
    const gate = {
      baseUrl: 'http://gate-arm-router-cache-aware-prefix.vllm.svc.cluster.local:8000',
      readyCheckTimeoutSeconds: 600,
    };
    expect(benchmarkJob(config, spec, undefined)).toEqual(job);
    const staged = benchmarkJob(config, spec, gate);
    validateManifest(staged);
    // biome-ignore lint/suspicious/noExplicitAny: reading the plain manifest
    const stagedClient = (staged.spec as any).template.spec.containers[0];
    expect(stagedClient.args).toEqual(benchServeArgs(config, spec, gate));
    expect(stagedClient.args).toContain(`--base-url=${gate.baseUrl}`);
    expect(stagedClient.args).toContain('--ready-check-timeout-sec=600');
    expect(c.args).not.toContain('--ready-check-timeout-sec=600');
    // Same name, labels, pod and volumes: the runner finds and cleans a staged Job as any other.
    const withoutArgs = (manifest: typeof job) =>
      JSON.parse(JSON.stringify(manifest), (key, value) => (key === 'args' ? undefined : value));
    expect(withoutArgs(staged)).toEqual(withoutArgs(job));
  });

  test('the BenchmarkJob construct renders exactly the pure Job', () => {
    const chart = Testing.chart();
    new BenchmarkJob(chart, 'job', { config, spec });
    expect(Testing.synth(chart)).toEqual([job]);
  });

  test('names that are not DNS labels are refused with the benchmark id', () => {
    expect(() => benchmarkJobName({ id: 'x'.repeat(60) })).toThrow(/benchmark "x+".*at most 63/);
    expect(() => benchmarkJobName({ id: 'Upper' })).toThrow(/DNS-1123/);
  });
});
