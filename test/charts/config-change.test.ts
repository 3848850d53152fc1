import { describe, expect, test } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { container, find, synthLab } from './synth.ts';
import { validateManifest } from './validate.ts';

describe('a changed configuration changes the output coherently', () => {
  const lab = synthLab({
    vllm: { replicas: 3, blockSize: 64 },
    model: { name: 'Qwen/Qwen3-1.7B', servedName: 'qwen3-big' },
    workload: { concurrency: 8, partitionSeeds: [1, 2, 3] },
  });
  const { objects, config } = lab;

  test('everything still validates', () => {
    for (const object of objects) validateManifest(object);
  });

  test('three replicas with the new model, served name and block size', () => {
    const sts = find(objects, 'StatefulSet', 'qwen3-big');
    expect(sts.spec.replicas).toBe(3);
    expect(sts.spec.serviceName).toBe('qwen3-big-headless');
    const args = container(sts, 'vllm').args;
    expect(args).toContain('--model=Qwen/Qwen3-1.7B');
    expect(args).toContain('--served-model-name=qwen3-big');
    expect(args).toContain('--block-size=64');
    expect(find(objects, 'Service', 'qwen3-big-nodeport').spec.selector).toEqual({ app: 'qwen3-big' });
  });

  test('every router lists the three replicas', () => {
    const script: string = container(find(objects, 'Deployment', 'vllm-router-round-robin')).command[2];
    for (const i of [0, 1, 2]) {
      expect(script).toContain(`http://qwen3-big-${i}.qwen3-big-headless.vllm.svc.cluster.local:8000`);
    }
    expect(script.match(/svc\.cluster\.local:8000/g)).toHaveLength(3);
  });

  test('the pool and EPP follow the new names', () => {
    expect(find(objects, 'InferencePool', 'qwen3-big-pool').spec.selector.matchLabels).toEqual({
      app: 'qwen3-big',
    });
    expect(container(find(objects, 'Deployment', 'qwen3-big-epp')).args[1]).toBe('qwen3-big-pool');
  });

  test('the benchmark Jobs carry the new model, concurrency and a client per replica', () => {
    const plan = studyPlan(config);
    const arm = plan.runs.find((r) => r.id === 'arm-kube-proxy-prefix');
    if (!arm) throw new Error('no kube-proxy arm run');
    // biome-ignore lint/suspicious/noExplicitAny: reading the plain manifest
    const args: string[] = (benchmarkJob(config, arm.benchmarks[0]).spec as any).template.spec.containers[0]
      .args;
    expect(args).toContain('--model=Qwen/Qwen3-1.7B');
    expect(args).toContain('--served-model-name=qwen3-big');
    expect(args).toContain('--max-concurrency=8');
    expect(args).toContain('--base-url=http://qwen3-big-nodeport.vllm.svc.cluster.local:8000');
    const partition = plan.runs.find((r) => r.id === 'partition');
    expect(partition?.benchmarks.map((b) => benchmarkJob(config, b).metadata.name)).toEqual([
      'bench-partition-r0',
      'bench-partition-r1',
      'bench-partition-r2',
    ]);
  });

  test('Envoy concurrency follows envoy.concurrency', () => {
    const other = synthLab({ envoy: { concurrency: 4 } });
    expect(container(find(other.objects, 'Deployment', 'envoy-epp')).args).toContain('4');
    expect(container(find(other.objects, 'Deployment', 'envoy-epp')).args.slice(-2)).toEqual([
      '--concurrency',
      '4',
    ]);
  });
});
