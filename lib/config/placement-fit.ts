import {
  type FitNode,
  type FitPods,
  fitOnNodes,
  type NodeFit,
  unplacedByNodes,
  unplacedText,
} from '../study/node-fit.ts';
import { type BudgetPlace, cpuMillis, memoryMiB, REQUESTS, type ResourceBudget } from '../study/resources.ts';
import type { ClusterNode } from './cluster.ts';
import {
  clusterHasCpuNode,
  K3S_SERVER_LABEL,
  knownClusterNodes,
  labPlacement,
  NODE_ROLE_LABEL,
  nodePool,
  type PlacementProblem,
} from './placement.ts';
import type { LabConfig } from './schema.ts';

/**
 * The placement judged against what the lab's pods request (lib/study/resources.ts): the resource
 * budget fitted node by node, which hosts a replica fits on, and the warnings that follow. Above
 * the study model in the layers (docs/architecture.md), as placement.ts's settings are below it.
 */

/** A host of the cluster for the per-node budget: its capacity and the labels pods select it by. */
export interface BudgetNode extends FitNode {
  /** The agent entry it comes from; undefined for the server. */
  readonly agent?: string;
  readonly labels: Readonly<Record<string, string>>;
}

/**
 * The cluster's hosts with the labels the lab's own cluster gives them: the role label and the
 * configured node pool's selector (the bootstrap's `--node-label`), and on the server K3s's
 * control-plane label (K3S_SERVER_LABEL), which the runner's default selector picks.
 */
export function budgetNodes(config: LabConfig): BudgetNode[] {
  return knownClusterNodes(config).map((node) => ({
    name: node.name,
    agent: node.agent,
    pool: node.role,
    cpuMillis: node.vcpus * 1000,
    memoryMiB: node.memoryGiB * 1024,
    gpus: node.gpus,
    labels: {
      ...nodePool(config.placement, node.role).nodeSelector,
      [NODE_ROLE_LABEL]: node.role,
      ...(node.agent === undefined ? { [K3S_SERVER_LABEL]: 'true' } : {}),
    },
  }));
}

/** Names of the nodes that carry every label of a pod's node selector. */
export function nodesSelected(
  nodes: readonly BudgetNode[],
  selector: Readonly<Record<string, string>>,
): string[] {
  return nodes
    .filter((node) => Object.entries(selector).every(([key, value]) => node.labels[key] === value))
    .map((node) => node.name);
}

/**
 * The resource budget fitted node by node: each kind of pod goes to the nodes its placement
 * selects (replicas and the device plugin to GPU nodes, front ends as placement.frontEnds says,
 * the runner and the clients pinned beside it to the runner's node, K3s's add-ons anywhere).
 */
export function labBudgetFit(
  config: LabConfig,
  budget: ResourceBudget,
  nodes = budgetNodes(config),
): NodeFit {
  const placement = labPlacement(config);
  const selectors: Record<Exclude<BudgetPlace, 'anyNode'>, Readonly<Record<string, string>>> = {
    replicas: placement.replicas.nodeSelector,
    frontEnds: placement.frontEnds.nodeSelector,
    modelCacheReaders: placement.modelCacheReaders.nodeSelector,
    runner: placement.runner.nodeSelector,
  };
  const pods = budget.placed.map(
    (line): FitPods => ({
      ...line,
      nodes:
        line.placedOn === 'anyNode'
          ? nodes.map((node) => node.name)
          : nodesSelected(nodes, selectors[line.placedOn]),
    }),
  );
  return fitOnNodes(pods, nodes);
}

/**
 * Per-node budget problems of a cluster of several hosts, for the configuration rules: one per
 * set of nodes the pods that find no room could go to, at those hosts' setting (the server's
 * instance.* when it is one of them, else the first agent entry among them). Pods whose selector
 * matches no host of the lab's own cluster (a runnerNodeSelector of your own) are not fitted.
 */
export function budgetFitProblems(config: LabConfig, budget: ResourceBudget): PlacementProblem[] {
  const nodes = budgetNodes(config);
  const unplaced = labBudgetFit(config, budget, nodes).unplaced.filter((u) => u.nodes.length > 0);
  return unplacedByNodes(unplaced).map((groups) => {
    const loads = groups[0].nodes;
    // The server's instance.* when it is among the nodes (the runner and clients live there), else the agent entry.
    const agents = loads.map((l) => nodes.find((n) => n.name === l.node.name)?.agent);
    const index = agents.includes(undefined)
      ? -1
      : config.cluster.agents.findIndex((a) => a.name === agents[0]);
    const free = Math.max(...loads.map((l) => l.node.memoryMiB - l.memoryMiB));
    const short = groups.some((u) => u.pods.memoryMiB > free) ? 'memoryGiB' : 'vcpus';
    const path = index >= 0 ? ['cluster', 'agents', index, 'instanceType'] : ['instance', short];
    const remedy = loads.every((l) => l.node.pool === 'cpu')
      ? 'Use a larger CPU type or more cpu agents (cluster.agents), enable fewer optional arms (study.optionalArms), or put the front ends on the GPU nodes (placement.frontEnds: gpu)'
      : 'Enable fewer optional arms (study.optionalArms), lower vllm.replicas or benchmark.memoryLimitGi, or use larger hosts or more GPU agents (cluster.agents)';
    return {
      path,
      message: `the pods that run at once fit the cluster in sum but not node by node: ${unplacedText(groups)}. ${remedy}`,
    };
  });
}

/**
 * Whether one vLLM replica's CPU and memory requests fit the host at all (lib/study/resources.ts):
 * a GPU host smaller than that (a g6.xlarge has 16 GiB, a replica requests 32Gi) keeps its GPU idle.
 */
export function replicaFits(node: Pick<ClusterNode, 'vcpus' | 'memoryGiB'>): boolean {
  return (
    node.vcpus * 1000 >= cpuMillis(REQUESTS.replica.cpu) &&
    node.memoryGiB * 1024 >= memoryMiB(REQUESTS.replica.memory)
  );
}

/** GPU hosts a replica fits on. */
export function replicaHosts(nodes: readonly ClusterNode[]): ClusterNode[] {
  return nodes.filter((node) => node.role === 'gpu' && node.gpus > 0 && replicaFits(node));
}

/** GPUs the replicas can take: those of the GPU hosts a replica fits on. */
export function replicaGpuCount(nodes: readonly ClusterNode[]): number {
  return replicaHosts(nodes).reduce((sum, node) => sum + node.gpus, 0);
}

/**
 * Where the replicas' GPUs are, for messages: `server g6.12xlarge: 4, gpu-1..gpu-2 g6.12xlarge: 4 each`.
 */
export function gpuWhereabouts(nodes: readonly ClusterNode[]): string {
  const groups = new Map<string, ClusterNode[]>();
  for (const node of replicaHosts(nodes)) {
    const key = node.agent ?? node.name;
    groups.set(key, [...(groups.get(key) ?? []), node]);
  }
  return [...groups.values()]
    .map((hosts) => {
      const [first] = hosts;
      if (hosts.length === 1) return `${first.name} ${first.instanceType}: ${first.gpus}`;
      return `${first.name}..${hosts[hosts.length - 1].name} ${first.instanceType}: ${first.gpus} each`;
    })
    .join(', ');
}

/** Valid placements that cannot work on the lab's own cluster, said before any money is spent. */
export function placementWarnings(config: LabConfig): string[] {
  const warnings: string[] = [];
  if (config.placement.frontEnds === 'cpu' && !clusterHasCpuNode(config)) {
    warnings.push(
      "placement.frontEnds is cpu but cluster.agents has no cpu agent: on the lab's own cluster the routers, EPPs and Envoys would stay Pending (fine on a cluster of your own whose CPU nodes carry placement.cpuNodes.nodeSelector). Add a cpu agent or use auto",
    );
  }
  const small = new Set(
    knownClusterNodes(config)
      .filter((node) => node.agent !== undefined && node.role === 'gpu' && !replicaFits(node))
      .map((node) => `${node.agent} (${node.instanceType}: ${node.vcpus} vCPUs, ${node.memoryGiB} GiB)`),
  );
  for (const agent of small) {
    warnings.push(
      `placement: cluster.agents ${agent} runs no replica: a vLLM replica requests ${REQUESTS.replica.cpu} CPUs and ${REQUESTS.replica.memory} (lib/study/resources.ts), more than the host has, so its GPU is paid for but idle; use a larger GPU type (e.g. g6.4xlarge)`,
    );
  }
  return warnings;
}
