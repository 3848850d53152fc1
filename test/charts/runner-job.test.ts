import { Chart, Testing } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import { CONFIGMAP_LIMIT_BYTES, checkRunnerConfigMapSize, runnerJob } from '../../charts/runner-job.ts';

describe('runner Job and ConfigMap (charts/runner-job.ts)', () => {
  it("refuses ConfigMap data at Kubernetes' limit, naming the ConfigMap, its size and what to shrink", () => {
    const under = { 'a.json': 'x'.repeat(CONFIGMAP_LIMIT_BYTES - 7) };
    expect(() => checkRunnerConfigMapSize(under, 'X: the runner ConfigMap', 'the plan')).not.toThrow();
    const at = { 'a.json': 'x'.repeat(CONFIGMAP_LIMIT_BYTES - 6) };
    expect(() =>
      checkRunnerConfigMapSize(at, 'X: the runner ConfigMap of cell c', 'the plan (network.experiments)'),
    ).toThrow(
      `X: the runner ConfigMap of cell c holds ${CONFIGMAP_LIMIT_BYTES} bytes, over Kubernetes' limit of ${CONFIGMAP_LIMIT_BYTES}; shrink the plan (network.experiments) or the bundle`,
    );
  });

  it('runs the bundle once from the ConfigMap as root, with the results folder, where the placement says', () => {
    const chart = new Chart(Testing.app(), 'test');
    runnerJob(chart, {
      name: 'runner',
      namespace: 'plain',
      labels: { a: '1' },
      podLabels: { a: '1', cell: 'mesh' },
      image: 'node:22',
      imagePullPolicy: 'IfNotPresent',
      bundle: 'runner.mjs',
      env: [{ name: 'EXTRA', value: 'x' }],
      placement: { nodeSelector: { cell: 'mesh' } },
    });
    const [job] = Testing.synth(chart);
    expect(job.metadata).toEqual({ name: 'runner', namespace: 'plain', labels: { a: '1' } });
    expect(job.spec.backoffLimit).toBe(0);
    const pod = job.spec.template.spec;
    expect(job.spec.template.metadata.labels).toEqual({ a: '1', cell: 'mesh' });
    expect(pod.serviceAccountName).toBe('runner');
    expect(pod.restartPolicy).toBe('Never');
    expect(pod.nodeSelector).toEqual({ cell: 'mesh' });
    const [container] = pod.containers;
    expect(container.imagePullPolicy).toBe('IfNotPresent');
    expect(container.command[1]).toMatch(/\/runner\.mjs$/);
    expect(container.env.map((e: { name: string }) => e.name)).toEqual([
      'LAB_RUNNER_DIR',
      'LAB_RESULTS_DIR',
      'EXTRA',
    ]);
    expect(pod.volumes[0]).toEqual({ name: 'runner', configMap: { name: 'runner' } });
    expect(pod.volumes[1].hostPath.type).toBe('DirectoryOrCreate');

    const bare = new Chart(Testing.app(), 'bare');
    runnerJob(bare, {
      name: 'r',
      labels: {},
      podLabels: {},
      image: 'node:22',
      bundle: 'b.mjs',
      placement: {},
    });
    const [plain] = Testing.synth(bare);
    expect(plain.metadata.namespace).toBeUndefined();
    expect(plain.spec.template.spec.containers[0].imagePullPolicy).toBeUndefined();
  });
});
