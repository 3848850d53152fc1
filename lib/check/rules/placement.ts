import {
  CPU_CLIENT_ISSUE,
  type LabPlacement,
  NODE_ROLE_LABEL,
  NODE_ROLES,
  type NodePool,
  type NodeRole,
} from '../../config/placement.ts';
import { type KubeObject, list, record, stringMap } from '../manifest.ts';
import { type PodTemplate, podTemplateOf, type Testbed, unique } from '../testbed.ts';
import { PLACEMENT, type Violation, violation } from '../violation.ts';

/**
 * Placement on a cluster of several nodes (issue 17): replicas select the GPU nodes, benchmark
 * clients a GPU node, front ends the nodes the configuration gives them, and no pod selects a
 * node role the cluster has no node for (it would stay Pending and the study would wait on it).
 */

/** What the manifests are judged against: the configuration's placement and the cluster's node roles. */
export interface PlacementExpectation {
  readonly placement: LabPlacement;
  /** Roles of the nodes the cluster has (`gpu`, and `cpu` when it has a CPU node). */
  readonly clusterRoles: readonly NodeRole[];
}

const json = (value: unknown) => JSON.stringify(value);

/** Labels of `wanted` that the pod's nodeSelector lacks or sets to another value. */
function missingLabels(pod: PodTemplate, wanted: Readonly<Record<string, string>>): string[] {
  const actual = stringMap(pod.spec.nodeSelector);
  return Object.entries(wanted)
    .filter(([key, value]) => actual[key] !== value)
    .map(([key]) => key);
}

function selectorViolation(pod: PodTemplate, pool: NodePool, what: string, why: string): Violation[] {
  if (missingLabels(pod, pool.nodeSelector).length === 0) return [];
  const actual = stringMap(pod.spec.nodeSelector);
  const has = Object.keys(actual).length === 0 ? 'is not set' : `is ${json(actual)}`;
  return [
    violation(
      pod.object,
      `${pod.path}.nodeSelector`,
      PLACEMENT,
      `${has}; ${what} must select ${json(pool.nodeSelector)} (placement.${pool.role}Nodes.nodeSelector): ${why}`,
    ),
  ];
}

/** The vLLM replicas select the GPU nodes. */
export function replicasSelectGpuNodes(testbed: Testbed, expected: PlacementExpectation): Violation[] {
  return unique(testbed.servers.map((ref) => ref.pod)).flatMap((pod) =>
    selectorViolation(
      pod,
      expected.placement.replicas,
      'a vLLM replica',
      'it needs a GPU of its own, and the configured GPU nodes are the ones the study was planned for',
    ),
  );
}

/** The benchmark clients run on a GPU node, never a CPU node (vLLM issue 23967). */
export function clientsOnGpuNodes(testbed: Testbed, expected: PlacementExpectation): Violation[] {
  return unique(testbed.benchClients.map((ref) => ref.pod)).flatMap((pod) => {
    if (stringMap(pod.spec.nodeSelector)[NODE_ROLE_LABEL] === 'cpu') {
      return [
        violation(
          pod.object,
          `${pod.path}.nodeSelector`,
          PLACEMENT,
          `selects ${NODE_ROLE_LABEL}: cpu; the benchmark client must run on a GPU node: \`vllm bench serve\` exits with "Failed to infer device type" where no GPU is visible (${CPU_CLIENT_ISSUE})`,
        ),
      ];
    }
    return selectorViolation(
      pod,
      expected.placement.clients,
      'the benchmark client',
      '`vllm bench serve` needs a visible GPU to start (vLLM issue 23967)',
    );
  });
}

/** A pod that mounts a host folder (the model cache) depends on what that node's bootstrap filled. */
function mountsHostFolder(pod: PodTemplate): boolean {
  return list(pod.spec.volumes).some((volume) => record(volume).hostPath !== undefined);
}

/** Routers, EPPs and Envoys run where `placement.frontEnds` puts them; a cache reader on a GPU node. */
export function frontEndsWhereConfigured(testbed: Testbed, expected: PlacementExpectation): Violation[] {
  const { frontEnds, modelCacheReaders } = expected.placement;
  const pods = unique([...testbed.routers, ...testbed.epps, ...testbed.envoys].map((ref) => ref.pod));
  return pods.flatMap((pod) => {
    // The router's wheelhouse is optional (it installs from PyPI without it); the llm-d EPP's
    // tokenizer seed is not: only a GPU node has the model cache filled.
    const readsCache = testbed.epps.some((ref) => ref.pod === pod) && mountsHostFolder(pod);
    return readsCache
      ? selectorViolation(
          pod,
          modelCacheReaders,
          'a front end that reads the model cache',
          'only the GPU nodes have the model cache filled by their bootstrap',
        )
      : selectorViolation(
          pod,
          frontEnds,
          'a front end',
          `placement.frontEnds puts it on ${frontEnds.role.toUpperCase()} nodes${frontEnds.role === 'cpu' ? ', off the CPUs of the model servers' : ''}`,
        );
  });
}

/** No pod selects a node role the cluster has no node for, or a role the lab does not know. */
export function rolesExistInCluster(
  objects: readonly KubeObject[],
  expected: PlacementExpectation,
): Violation[] {
  return objects.flatMap((object) => {
    const pod = podTemplateOf(object);
    if (!pod) return [];
    const role = stringMap(pod.spec.nodeSelector)[NODE_ROLE_LABEL];
    if (role === undefined) return [];
    const field = `${pod.path}.nodeSelector["${NODE_ROLE_LABEL}"]`;
    if (!(NODE_ROLES as readonly string[]).includes(role)) {
      return [violation(object, field, PLACEMENT, `is "${role}"; allowed: ${NODE_ROLES.join(', ')}`)];
    }
    if (expected.clusterRoles.includes(role as NodeRole)) return [];
    return [
      violation(
        object,
        field,
        PLACEMENT,
        `is "${role}" but the cluster has no ${role.toUpperCase()} node (it has ${expected.clusterRoles.map((r) => r.toUpperCase()).join(' and ') || 'none'}): the pod would stay Pending`,
      ),
    ];
  });
}

export function placementViolations(testbed: Testbed, expected: PlacementExpectation): Violation[] {
  return [
    ...replicasSelectGpuNodes(testbed, expected),
    ...clientsOnGpuNodes(testbed, expected),
    ...frontEndsWhereConfigured(testbed, expected),
    ...rolesExistInCluster(testbed.objects, expected),
  ];
}
