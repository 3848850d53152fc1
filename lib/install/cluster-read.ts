import {
  type AccessQuestion,
  type ClusterApi,
  describeAccess,
  type KubeObject,
} from '../kube/cluster-api.ts';
import {
  type ClusterCheck,
  clusterChecks,
  GPU_RESOURCE,
  nodesFor,
  storageClassInfo,
} from './cluster-checks.ts';
import type { InstallPlan } from './plan.ts';
import { groupOf, resourceOfKind } from './steps.ts';

/**
 * Reads what the cluster checks judge (nodes, RuntimeClasses, access reviews) and judges it: the
 * one source of the checks `lab install` runs before applying and `lab doctor --kubeconfig` prints.
 */

/** Nodes, RuntimeClasses and the access reviews, then the pure checks. */
export async function readClusterChecks(plan: InstallPlan, api: ClusterApi): Promise<ClusterCheck[]> {
  const nodes = await api.list('v1', 'Node');
  const runtimeClasses = (await api.list('node.k8s.io/v1', 'RuntimeClass')).map((rc) => rc.metadata.name);
  const storageClasses = (await api.list('storage.k8s.io/v1', 'StorageClass')).map(storageClassInfo);
  const questions = accessQuestions(plan);
  const refused: string[] = [];
  for (const q of questions) {
    if (!(await api.canI(q))) refused.push(describeAccess(q));
  }
  const checks = clusterChecks(plan.needs, { nodes, runtimeClasses, refused, storageClasses });
  // Without a device plugin yet, a GPU count of zero is expected: the lab installs one first.
  return checks.map((check) =>
    check.id === 'gpus' &&
    check.outcome === 'fail' &&
    nodesFor(plan.needs.placement.replicas, nodes).length > 0 &&
    noGpuAdvertised(nodes, plan)
      ? {
          ...check,
          outcome: 'warn' as const,
          message: `${check.message}; no GPU is advertised yet, so the lab's device plugin (${plan.devicePluginChart}) is installed first and the GPUs are counted before the replicas`,
        }
      : check,
  );
}

function noGpuAdvertised(nodes: readonly KubeObject[], plan: InstallPlan): boolean {
  return nodesFor(plan.needs.placement.replicas, nodes).every((node) => {
    const allocatable = (node.status as { allocatable?: Record<string, string> } | undefined)?.allocatable;
    return !allocatable?.[GPU_RESOURCE] || allocatable[GPU_RESOURCE] === '0';
  });
}

/**
 * One `patch` per kind and namespace the lab applies (server-side apply is a patch), the CRDs
 * of the release assets (their other kinds are known only once downloaded), and what the study
 * commands read afterwards (plan.studyAccess: pods/proxy, pods/log).
 */
function accessQuestions(plan: InstallPlan): AccessQuestion[] {
  const seen = new Map<string, AccessQuestion>();
  if (plan.steps.some((step) => step.kind === 'manifest')) {
    seen.set('crds', { verb: 'patch', group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions' });
  }
  for (const step of plan.steps) {
    if (step.kind !== 'chart') continue;
    for (const object of step.objects) {
      const group = groupOf(object.apiVersion);
      const resource = resourceOfKind(object.kind);
      const namespace = object.metadata.namespace;
      const key = `${group}/${resource}/${namespace ?? ''}`;
      if (!seen.has(key))
        seen.set(key, { verb: 'patch', group, resource, ...(namespace ? { namespace } : {}) });
    }
  }
  return [...seen.values(), ...plan.studyAccess];
}
