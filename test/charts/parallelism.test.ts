import { describe, expect, test } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { checkManifests, type KubeObject } from '../../lib/check/index.ts';
import { configWarnings } from '../../lib/config/warnings.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { container, find, synthLab } from './synth.ts';

/** The second replica pair of `study.parallelism: 2` in the charts (lib/study/pairs.ts). */

const serial = synthLab();
const two = synthLab({ study: { parallelism: 2 } });
const names = (lab: typeof two) => lab.objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();

describe('charts with study.parallelism: 2', () => {
  test('add exactly a second set of replicas and core front ends, named -b', () => {
    const added = names(two).filter((n) => !names(serial).includes(n));
    expect(names(serial).every((n) => names(two).includes(n))).toBe(true);
    expect(added).toEqual(
      [
        'StatefulSet/qwen3-b',
        'Service/qwen3-b-headless',
        'Service/qwen3-nodeport-b',
        ...['round-robin', 'cache-aware', 'cache-aware-tuned'].flatMap((v) => [
          `Deployment/vllm-router-${v}-b`,
          `Service/vllm-router-${v}-b`,
        ]),
        'InferencePool/qwen3-pool-b',
        'ConfigMap/qwen3-epp-b-config',
        'ServiceAccount/qwen3-epp-b',
        'Role/qwen3-epp-b',
        'RoleBinding/qwen3-epp-b',
        'ClusterRole/vllm-qwen3-epp-b-auth',
        'ClusterRoleBinding/vllm-qwen3-epp-b-auth',
        'Deployment/qwen3-epp-b',
        'Service/qwen3-epp-b',
        'ConfigMap/envoy-epp-b-config',
        'Deployment/envoy-epp-b',
        'Service/envoy-epp-b',
      ].sort(),
    );
  });

  test('wire pair 1 to its own replicas only', () => {
    const sts = find(two.objects, 'StatefulSet', 'qwen3-b');
    expect(sts.spec.serviceName).toBe('qwen3-b-headless');
    expect(sts.spec.selector.matchLabels).toEqual({ app: 'qwen3-b' });
    expect(sts.spec.replicas).toBe(2);
    expect(find(two.objects, 'Service', 'qwen3-nodeport-b').spec).toMatchObject({
      selector: { app: 'qwen3-b' },
      ports: [{ nodePort: 30801 }],
    });
    const router = container(find(two.objects, 'Deployment', 'vllm-router-cache-aware-b'));
    expect(router.command[2]).toContain(
      '--worker-urls http://qwen3-b-0.qwen3-b-headless.vllm.svc.cluster.local:8000 http://qwen3-b-1.qwen3-b-headless.vllm.svc.cluster.local:8000 ',
    );
    expect(find(two.objects, 'InferencePool', 'qwen3-pool-b').spec).toMatchObject({
      selector: { matchLabels: { app: 'qwen3-b' } },
      endpointPickerRef: { name: 'qwen3-epp-b' },
    });
    const epp = container(find(two.objects, 'Deployment', 'qwen3-epp-b'));
    expect(epp.args.slice(0, 2)).toEqual(['--pool-name', 'qwen3-pool-b']);
    expect(JSON.stringify(find(two.objects, 'ConfigMap', 'envoy-epp-b-config'))).toContain(
      'qwen3-epp-b.vllm.svc.cluster.local',
    );
  });

  test('pass lab check with every Job of the study, the resource budget included', () => {
    const jobs = studyPlan(two.config).runs.flatMap((run) =>
      run.benchmarks.map((spec) => benchmarkJob(two.config, spec)),
    );
    expect(checkManifests([...two.objects, ...jobs] as unknown as KubeObject[])).toEqual([]);
  });

  test('the configuration says what the second pair costs in GPUs and what concurrent runs share', () => {
    expect(configWarnings(two.config)).toContain(
      "study.parallelism is 2: two runs execute at once on separate replica pairs (no GPU, cache or front end shared), but they share the host's 48 vCPUs and its PCIe bus, so a run's latency can differ from a serial run's. Each record's overlappedWith names the runs beside it; set study.parallelism to 1 for runs that never overlap.",
    );
    expect(configWarnings(serial.config).some((w) => w.includes('parallelism'))).toBe(false);
    expect(() => synthLab({ study: { parallelism: 2, optionalArms: ['llmd-precise'] } })).toThrow(
      "study.parallelism = 2: a second pair of 2 replica(s) runs beside the standard 2 and llm-d's 2, needing 6 GPUs; the cluster has 4 GPU(s) a replica fits beside (server g6.12xlarge: 4). Allowed here: 1; or lower vllm.replicas to 1; or add GPU agents (cluster.agents)",
    );
    expect(() => synthLab({ study: { parallelism: 3 } })).toThrow('study.parallelism');
  });
});
