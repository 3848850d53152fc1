import { z } from 'zod';
import {
  type ClusterNode,
  type ClusterSettings,
  clusterNodes,
  NODE_ROLES,
  type NodeRole,
} from './cluster.ts';
import type { LabConfig } from './schema.ts';

/**
 * Where the lab's pods run when the cluster has more than one node (issue 17): replicas on GPU
 * nodes, front ends on a CPU node when there is one, benchmark clients on a GPU node, the study
 * runner on the node whose results folder is kept. The node pools are described by selectors and
 * tolerations from the configuration, so the same `cdk8s synth` output fits the lab's own K3s
 * cluster, an EKS cluster with GPU node groups or an on-premises one.
 */

/** Node label every lab host carries (K3s `--node-label`, set by the bootstrap): its role. */
export const NODE_ROLE_LABEL = 'llm-gateway-lab/node-role';
/** Values of NODE_ROLE_LABEL: a host with GPUs, or one without (the roles of cluster.agents). */
export { NODE_ROLES, type NodeRole };

/**
 * The label K3s puts on its server node: `setNodeLabelsAndAnnotations` in k3s
 * pkg/server/server.go sets `node-role.kubernetes.io/control-plane: "true"` (and `master`).
 * The server's bootstrap uploads its results folder, so the runner lives there by default.
 */
export const K3S_SERVER_LABEL = 'node-role.kubernetes.io/control-plane';

/** Where the front ends go: `auto` is a CPU node when the cluster has one, else a GPU node. */
export const FRONT_END_PLACEMENTS = ['auto', 'gpu', 'cpu'] as const;
export type FrontEndPlacement = (typeof FRONT_END_PLACEMENTS)[number];

/** vLLM issue 23967 (open): `vllm bench serve` needs a visible GPU to start. */
export const CPU_CLIENT_ISSUE = 'https://github.com/vllm-project/vllm/issues/23967';

// Kubernetes label syntax (apimachinery validation IsQualifiedName / IsValidLabelValue).
const LABEL_NAME = '[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?';
const LABEL_KEY = new RegExp(
  `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?${LABEL_NAME}$`,
);
const LABEL_VALUE = new RegExp(`^(${LABEL_NAME})?$`);
/** A RuntimeClass name is a DNS-1123 subdomain. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

const labelKey = z
  .string()
  .max(316)
  .regex(LABEL_KEY, 'must be a Kubernetes label key like "example.com/name" or "name"');

/**
 * Node labels a pod selects. Keys are checked here rather than by a key schema, whose failure
 * zod reports only as "Invalid key in record".
 */
const labelSelector = (emptyMessage: string) =>
  z
    .record(
      z.string(),
      z
        .string()
        .max(63)
        .regex(LABEL_VALUE, 'must be a Kubernetes label value (at most 63 of A-Z a-z 0-9 - _ .)'),
    )
    .superRefine((labels, ctx) => {
      const keys = Object.keys(labels);
      if (keys.length === 0) ctx.addIssue({ code: 'custom', message: emptyMessage });
      for (const key of keys.filter((k) => k.length > 316 || !LABEL_KEY.test(k))) {
        ctx.addIssue({
          code: 'custom',
          path: [key],
          input: key,
          message: 'must be a Kubernetes label key like "example.com/name" or "name"',
        });
      }
    });

const nodeSelector = (role: NodeRole) =>
  labelSelector(`needs at least one label, or ${role} pods could land on any node`)
    .default({ [NODE_ROLE_LABEL]: role })
    .describe(
      `Node labels of the ${role.toUpperCase()} nodes (a pod's nodeSelector); e.g. an EKS node group's eks.amazonaws.com/nodegroup`,
    );

const TolerationSchema = z.strictObject({
  key: labelKey.optional().describe('Taint key; absent with operator Exists: every taint'),
  operator: z.enum(['Exists', 'Equal']).default('Equal').describe('Exists or Equal'),
  value: z.string().max(63).optional().describe('Taint value (operator Equal)'),
  effect: z
    .enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute'])
    .optional()
    .describe('Taint effect; absent: every effect'),
});
export type Toleration = z.infer<typeof TolerationSchema>;

const tolerations = (role: NodeRole, example: string) =>
  z
    .array(TolerationSchema)
    .default([])
    .describe(`Tolerations of the pods placed on ${role.toUpperCase()} nodes (${example})`);

const GpuNodesSchema = z
  .strictObject({
    nodeSelector: nodeSelector('gpu'),
    tolerations: tolerations(
      'gpu',
      'e.g. key nvidia.com/gpu, operator Exists: EKS GPU node groups are often tainted so',
    ),
    // K3s registers RuntimeClass `nvidia` over a runc default; the EKS accelerated AMI instead
    // makes nvidia containerd's default runtime (amazon-eks-ami nodeadm/internal/containerd/
    // runtime_config_nvidia.go, nvidiaRuntimeConfigMixin.Apply) and creates no RuntimeClass.
    runtimeClassName: z
      .union([
        z
          .string()
          .max(253)
          .regex(DNS_SUBDOMAIN, 'must be a RuntimeClass name (DNS-1123 subdomain), or null for none'),
        z.null(),
      ])
      .default('nvidia')
      .meta({ allowed: 'RuntimeClass name (DNS-1123 subdomain) or null' })
      .describe(
        'RuntimeClass of the pods that use a GPU; null where containerd already runs every pod with the NVIDIA runtime (the EKS GPU AMIs; see docs/cluster.md)',
      ),
  })
  .prefault({});

const CpuNodesSchema = z
  .strictObject({
    nodeSelector: nodeSelector('cpu'),
    tolerations: tolerations('cpu', 'e.g. a taint that keeps other workloads off the gateway nodes'),
  })
  .prefault({});

export const PlacementSchema = z
  .strictObject({
    frontEnds: z
      .enum(FRONT_END_PLACEMENTS)
      .default('auto')
      .describe(
        'Nodes of the routers, EPPs and Envoys: auto (a CPU node when the cluster has one, else a GPU node), gpu or cpu',
      ),
    clients: z
      .enum(NODE_ROLES)
      .default('gpu')
      .describe(
        `Nodes of the benchmark clients: gpu only, for \`vllm bench serve\` exits with "Failed to infer device type" without a visible GPU (${CPU_CLIENT_ISSUE})`,
      ),
    runnerNodeSelector: labelSelector(
      'needs at least one label: the runner must land on the node whose results folder is kept',
    )
      .default({ [K3S_SERVER_LABEL]: 'true' })
      .describe(
        "Node labels of the study runner's node; the benchmark clients run on that node and write their results into its results folder (default: the K3s server, whose bootstrap uploads that folder)",
      ),
    gpuNodes: GpuNodesSchema,
    cpuNodes: CpuNodesSchema,
  })
  .prefault({});

export type Placement = z.output<typeof PlacementSchema>;

/** The node pool a kind of pod is placed on. */
export interface NodePool {
  readonly role: NodeRole;
  readonly nodeSelector: Readonly<Record<string, string>>;
  readonly tolerations: readonly Toleration[];
}

/** The configured GPU or CPU node pool. */
export function nodePool(placement: Placement, role: NodeRole): NodePool {
  const pool = role === 'gpu' ? placement.gpuNodes : placement.cpuNodes;
  return { role, nodeSelector: pool.nodeSelector, tolerations: pool.tolerations };
}

/**
 * The role of the front ends' nodes: `auto` picks a CPU node when the cluster has one, so the
 * gateways do not compete with the model servers for CPU.
 */
export function frontEndRole(placement: Placement, clusterHasCpuNode: boolean): NodeRole {
  if (placement.frontEnds === 'auto') return clusterHasCpuNode ? 'cpu' : 'gpu';
  return placement.frontEnds;
}

/** Where each kind of lab pod goes, resolved for one cluster. */
export interface LabPlacement {
  /** vLLM replicas: GPU nodes, one GPU each, spread over every GPU node. */
  readonly replicas: NodePool;
  /** Routers, EPPs and Envoys that need nothing from the node. */
  readonly frontEnds: NodePool;
  /**
   * Front-end pods that read the model cache (the llm-d EPP seeds its tokenizer from it): only GPU
   * nodes have the cache filled by the bootstrap.
   */
  readonly modelCacheReaders: NodePool;
  /** Benchmark clients (`vllm bench serve`): they need a visible GPU. */
  readonly clients: NodePool;
  /**
   * The study runner: on a clients' node (the clients are pinned to the runner's node, so their
   * result files land in the runner's results folder), further narrowed by `runnerNodeSelector`.
   */
  readonly runner: NodePool;
  /** RuntimeClass of the pods that use a GPU; undefined: none is set (the node's default runtime). */
  readonly gpuRuntimeClass: string | undefined;
  /**
   * Labels of the runner's node, which the replicas prefer to avoid when the cluster has another
   * GPU node: that node also holds the runner and every client (8 of 12 GiB in the partition of
   * 8 replicas), so it should carry the fewest replicas. Absent on a single GPU node.
   */
  readonly replicasAvoid?: Readonly<Record<string, string>>;
}

/** The placement of every lab pod, given whether the cluster has a CPU node. */
export function resolvePlacement(placement: Placement, clusterHasCpuNode: boolean): LabPlacement {
  const gpu = nodePool(placement, 'gpu');
  const clients = nodePool(placement, placement.clients);
  return {
    replicas: gpu,
    frontEnds: nodePool(placement, frontEndRole(placement, clusterHasCpuNode)),
    modelCacheReaders: gpu,
    clients,
    runner: { ...clients, nodeSelector: { ...clients.nodeSelector, ...placement.runnerNodeSelector } },
    gpuRuntimeClass: placement.gpuNodes.runtimeClassName ?? undefined,
  };
}

/** Roles of the nodes of the cluster this configuration describes: the GPU host, and CPU agents if any. */
export function clusterNodeRoles(config: LabConfig): NodeRole[] {
  return clusterHasCpuNode(config) ? ['gpu', 'cpu'] : ['gpu'];
}

/**
 * vCPUs and memory of every host together (the host alone without agents): the resource budget's
 * first test; with agents labBudgetFit then fits the pods node by node.
 */
export function clusterCapacity(config: LabConfig): { vcpus: number; memoryGiB: number } {
  const hosts = knownClusterNodes(config);
  if (hosts.length <= 1) return { vcpus: config.instance.vcpus, memoryGiB: config.instance.memoryGiB };
  return {
    vcpus: hosts.reduce((sum, node) => sum + node.vcpus, 0),
    memoryGiB: hosts.reduce((sum, node) => sum + node.memoryGiB, 0),
  };
}

/** The placement of every lab pod in the cluster this configuration describes. */
export function labPlacement(config: LabConfig): LabPlacement {
  const placement = resolvePlacement(config.placement, clusterHasCpuNode(config));
  const gpuNodes = knownClusterNodes(config).filter((node) => node.role === 'gpu').length;
  return gpuNodes > 1 ? { ...placement, replicasAvoid: config.placement.runnerNodeSelector } : placement;
}

/** The cluster's hosts, or none when an agent's instance facts are unknown (reported by its own rule). */
export function knownClusterNodes(config: ClusterSettings): ClusterNode[] {
  try {
    return clusterNodes(config);
  } catch {
    return [];
  }
}

export function clusterHasCpuNode(config: ClusterSettings): boolean {
  return knownClusterNodes(config).some((node) => node.role === 'cpu');
}

/** Problems of the placement settings against the cluster, for the configuration rules. */
export interface PlacementProblem {
  readonly path: (string | number)[];
  readonly message: string;
}

/**
 * Cross-field rules of `placement`. Guarded reads: they may see a partly invalid configuration.
 */
export function placementProblems(config: { readonly placement?: Partial<Placement> }): PlacementProblem[] {
  const placement = config.placement;
  if (!placement) return [];
  const problems: PlacementProblem[] = [];
  if (placement.clients === 'cpu') {
    problems.push({
      path: ['placement', 'clients'],
      message: `cannot be cpu: \`vllm bench serve\` builds an engine configuration and exits with "RuntimeError: Failed to infer device type" where no GPU is visible (vLLM issue 23967, open: ${CPU_CLIENT_ISSUE}); no CPU-capable client is verified, so the clients stay on GPU nodes, where they see the GPUs without taking one. Allowed: gpu`,
    });
  }
  const gpu = placement.gpuNodes?.nodeSelector;
  const cpu = placement.cpuNodes?.nodeSelector;
  if (gpu && cpu && Object.keys(gpu).length > 0 && sameLabels(gpu, cpu)) {
    problems.push({
      path: ['placement', 'cpuNodes', 'nodeSelector'],
      message: `selects the same nodes as placement.gpuNodes.nodeSelector (${JSON.stringify(gpu)}); give the CPU nodes their own labels (default: ${NODE_ROLE_LABEL}: cpu)`,
    });
  }
  return problems;
}

function sameLabels(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => b[key] === a[key]);
}
