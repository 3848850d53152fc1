import { Testing } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { StudyRunnerChart } from '../../charts/study-runner.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { CLUSTER_RESERVE, cpuMillis, memoryMiB, resourceBudget } from '../../lib/study/resources.ts';
import { synthLab } from './synth.ts';
import type { Manifest } from './validate.ts';

const ALL_ARMS = { study: { optionalArms: ['epp-prefix3', 'ai-gateway', 'llmd-precise'] } };

interface Sum {
  cpu: number;
  memory: number;
}

/** Requests of one pod template: the larger of its init containers and the sum of its containers. */
function podRequests(spec: Record<string, unknown>): Sum {
  const of = (list: unknown) =>
    ((list ?? []) as { resources?: { requests?: { cpu?: string; memory?: string } } }[]).map((c) => ({
      cpu: c.resources?.requests?.cpu ? cpuMillis(c.resources.requests.cpu) : 0,
      memory: c.resources?.requests?.memory ? memoryMiB(c.resources.requests.memory) : 0,
    }));
  const containers = of(spec.containers).reduce(
    (a, b) => ({ cpu: a.cpu + b.cpu, memory: a.memory + b.memory }),
    {
      cpu: 0,
      memory: 0,
    },
  );
  const init = of(spec.initContainers);
  return {
    cpu: Math.max(containers.cpu, ...init.map((c) => c.cpu)),
    memory: Math.max(containers.memory, ...init.map((c) => c.memory)),
  };
}

/** What the synthesized manifests ask the scheduler for, read from the objects themselves. */
function manifestRequests(objects: readonly Manifest[]): Sum {
  const total = { cpu: 0, memory: 0 };
  const add = (r: Sum, times: number) => {
    total.cpu += r.cpu * times;
    total.memory += r.memory * times;
  };
  for (const o of objects) {
    if (['Deployment', 'StatefulSet', 'DaemonSet', 'Job'].includes(o.kind)) {
      add(
        podRequests(o.spec.template.spec),
        o.kind === 'DaemonSet' || o.kind === 'Job' ? 1 : (o.spec.replicas ?? 1),
      );
    }
    if (o.kind === 'EnvoyProxy') {
      const deployment = o.spec.provider.kubernetes.envoyDeployment;
      add(podRequests({ containers: [deployment.container] }), deployment.replicas ?? 1);
    }
  }
  return total;
}

describe('resource budget (what can run at once fits the host)', () => {
  it('fits the g6.12xlarge with every optional arm, and matches the requests the manifests carry', () => {
    const lab = synthLab(ALL_ARMS);
    const budget = resourceBudget(lab.config);
    expect(budget.fits).toBe(true);
    expect(budget.cpuMillis).toBeLessThanOrEqual(48_000);
    expect(budget.memoryMiB).toBeLessThanOrEqual(192 * 1024);

    // The largest set of clients one run starts: the ideal partition's, one per replica.
    const partition = studyPlan(lab.config).runs.find((run) => run.id === 'partition');
    const clients = (partition?.benchmarks ?? []).map(
      (spec) => benchmarkJob(lab.config, spec) as unknown as Manifest,
    );
    expect(clients).toHaveLength(2);
    const runner = Testing.synth(
      new StudyRunnerChart(Testing.app(), 'runner', { config: lab.config, plan: studyPlan(lab.config) }),
    ) as Manifest[];
    const summed = manifestRequests([...lab.objects, ...clients, ...runner]);
    const reserve = { cpu: cpuMillis(CLUSTER_RESERVE.cpu), memory: memoryMiB(CLUSTER_RESERVE.memory) };
    expect(summed.cpu + reserve.cpu).toBe(budget.cpuMillis);
    expect(summed.memory + reserve.memory).toBe(budget.memoryMiB);
  });

  it('gives every Envoy scheduling room instead of a core per worker', () => {
    const lab = synthLab(ALL_ARMS);
    const envoys = lab.objects.filter((o) => o.kind === 'Deployment' && o.metadata.name.startsWith('envoy-'));
    expect(envoys).toHaveLength(3);
    for (const envoy of envoys) {
      const c = envoy.spec.template.spec.containers[0];
      expect(c.resources.requests.cpu).toBe('2');
      // Workers still follow the configuration.
      expect(c.args).toContain('8');
    }
  });
});
