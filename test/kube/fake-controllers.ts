import type { KubeObject } from '../../lib/kube/cluster-api.ts';
import type { FakeClusterState, FakeNode, Stored } from './fake-api-types.ts';
import { gpuRequest, type PodSpec, podSpecOf } from './fake-api-util.ts';
import { established } from './fake-discovery.ts';
import { type FakePod, jobStatus, podsOf } from './fake-pods.ts';
import { claimBound, claimsReady } from './fake-storage.ts';

/**
 * The fake API server's controllers (test/kube/fake-api-server.ts), played on the fake clock:
 * the status each object would have at the clock's now, the nodes with the GPUs a running device
 * plugin advertises, and the pods of the live workloads.
 */

/** Where a running device plugin has registered, the node advertises its GPUs. */
export function nodeObjects(state: FakeClusterState): KubeObject[] {
  const plugins = [...state.objects.values()].filter(
    (s) =>
      s.object.kind === 'DaemonSet' &&
      s.deletedAt === undefined &&
      /device-plugin/.test(String(s.object.metadata.name)),
  );
  const registerMs = state.options.pluginRegisterMs ?? 15_000;
  return state.options.nodes.map((node) => {
    const plugin = plugins.find((p) => selects(podSpecOf(p.object), node));
    const advertised =
      node.pluginRunning || (plugin !== undefined && state.now - plugin.changedAt >= registerMs);
    return {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: node.name, labels: node.labels },
      spec: { taints: node.taints ?? [] },
      status: {
        allocatable: {
          cpu: '48',
          memory: '192Gi',
          ...(advertised ? { 'nvidia.com/gpu': String(node.gpus) } : {}),
        },
        conditions: [{ type: 'Ready', status: 'True' }],
      },
    };
  });
}

/** The scheduler's two filters the lab relies on: the node selector and the taints tolerated. */
function selects(pod: PodSpec, node: FakeNode): boolean {
  const selector = pod.nodeSelector ?? {};
  if (!Object.entries(selector).every(([k, v]) => node.labels[k] === v)) return false;
  return (node.taints ?? []).every(
    (taint) =>
      taint.effect === 'PreferNoSchedule' ||
      (pod.tolerations ?? []).some(
        (t) =>
          (t.operator === 'Exists' && (!t.key || t.key === taint.key)) ||
          (t.key === taint.key && t.value === taint.value),
      ),
  );
}

/** The pods of the live Deployments (once available) and Jobs. */
export function livePods(state: FakeClusterState): FakePod[] {
  const workloads = state.options.workloads;
  return podsOf(
    [...state.objects.values()],
    (owner) => {
      const object = withStatus(state, owner as Stored) as { status?: { availableReplicas?: number } };
      return (object.status?.availableReplicas ?? 0) > 0;
    },
    (name) => workloads?.jobState?.(name) ?? 'active',
  );
}

/** The controllers: status as it would be at the fake clock's now. */
export function withStatus(state: FakeClusterState, stored: Stored): Record<string, unknown> {
  const { options, now } = state;
  const object = stored.object;
  const generation = (object.metadata.generation as number) ?? 1;
  const since = now - stored.changedAt;
  const replicas = ((object.spec as { replicas?: number } | undefined)?.replicas ?? 1) as number;
  const pod = podSpecOf(object);
  const fits = options.nodes.filter((n) => selects(pod, n));
  switch (object.kind) {
    case 'CustomResourceDefinition':
      return {
        ...object,
        status: {
          conditions: [{ type: 'Established', status: established(state, stored) ? 'True' : 'False' }],
        },
      };
    case 'PersistentVolumeClaim':
      return { ...object, status: { phase: claimBound(state, stored) ? 'Bound' : 'Pending' } };
    case 'Job':
      return {
        ...object,
        status: jobStatus(options.workloads?.jobState?.(String(object.metadata.name)) ?? 'active'),
      };
    case 'Deployment': {
      const available =
        fits.length > 0 && since >= (options.deploymentReadyMs ?? 20_000) && claimsReady(state, object)
          ? replicas
          : 0;
      return {
        ...object,
        status: {
          observedGeneration: generation,
          replicas,
          updatedReplicas: replicas,
          availableReplicas: available,
        },
      };
    }
    case 'StatefulSet': {
      const gpusEach = gpuRequest(pod);
      const gpus = nodeObjects(state)
        .filter((n) => fits.some((f) => f.name === n.metadata.name))
        .reduce(
          (sum, n) =>
            sum +
            Number((n.status as { allocatable: Record<string, string> }).allocatable['nvidia.com/gpu'] ?? 0),
          0,
        );
      const schedulable = gpusEach === 0 ? replicas : Math.min(replicas, Math.floor(gpus / gpusEach));
      const ready = since >= (options.modelLoadMs ?? 6 * 60_000) ? schedulable : 0;
      return {
        ...object,
        status: {
          observedGeneration: generation,
          replicas,
          updatedReplicas: replicas,
          readyReplicas: ready,
        },
      };
    }
    case 'DaemonSet': {
      const desired = fits.length;
      const available = since >= 10_000 ? desired : 0;
      return {
        ...object,
        status: {
          observedGeneration: generation,
          desiredNumberScheduled: desired,
          updatedNumberScheduled: desired,
          numberAvailable: available,
        },
      };
    }
    default:
      return object;
  }
}
