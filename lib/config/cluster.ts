import { z } from 'zod';
import { minimumReadyTimeoutMinutes, WAIT_FOR_AGENTS_MINUTES } from '../facts/budgets.ts';
import { type OnDemandQuota, onDemandQuotaFor } from '../facts/instances.ts';

/**
 * The K3s cluster of the LLM-gateway lab beyond its one host (issue 17): agents that join the
 * server (the GPU host) for more replicas, or a CPU node for the clients and front ends. Each
 * agent entry is a kind of host, `count` of them; `clusterNodes` lists every host, server first.
 */

/** What a node is for: `gpu` nodes run replicas, `cpu` nodes run clients and front ends. */
export const NODE_ROLES = ['gpu', 'cpu'] as const;
export type NodeRole = (typeof NODE_ROLES)[number];

/** The name the server has among the cluster's hosts (stack outputs, messages). */
export const SERVER_HOST = 'server';

/** What the lab needs to know about an instance type: size, GPUs and price. */
export interface InstanceFacts {
  readonly vcpus: number;
  readonly gpus: number;
  readonly memoryGiB: number;
  /** On-demand USD per hour in us-west-2, an estimate for the cost lines. */
  readonly pricePerHourUsd: number;
}

/**
 * Types an agent can name without giving its facts: the L4 family of the default host and two CPU
 * families (EC2 instance type pages; prices are us-west-2 on-demand Linux estimates). Any other
 * type is allowed when the agent gives gpus, vcpus, memoryGiB and pricePerHourUsd itself.
 */
export const INSTANCE_FACTS: Readonly<Record<string, InstanceFacts>> = {
  'g6.xlarge': { vcpus: 4, gpus: 1, memoryGiB: 16, pricePerHourUsd: 0.805 },
  'g6.2xlarge': { vcpus: 8, gpus: 1, memoryGiB: 32, pricePerHourUsd: 0.978 },
  'g6.4xlarge': { vcpus: 16, gpus: 1, memoryGiB: 64, pricePerHourUsd: 1.323 },
  'g6.8xlarge': { vcpus: 32, gpus: 1, memoryGiB: 128, pricePerHourUsd: 2.014 },
  'g6.12xlarge': { vcpus: 48, gpus: 4, memoryGiB: 192, pricePerHourUsd: 4.602 },
  'g6.24xlarge': { vcpus: 96, gpus: 4, memoryGiB: 384, pricePerHourUsd: 6.675 },
  'g6.48xlarge': { vcpus: 192, gpus: 8, memoryGiB: 768, pricePerHourUsd: 13.35 },
  'c7i.xlarge': { vcpus: 4, gpus: 0, memoryGiB: 8, pricePerHourUsd: 0.179 },
  'c7i.2xlarge': { vcpus: 8, gpus: 0, memoryGiB: 16, pricePerHourUsd: 0.357 },
  'c7i.4xlarge': { vcpus: 16, gpus: 0, memoryGiB: 32, pricePerHourUsd: 0.714 },
  'c7i.8xlarge': { vcpus: 32, gpus: 0, memoryGiB: 64, pricePerHourUsd: 1.428 },
  'm7i.xlarge': { vcpus: 4, gpus: 0, memoryGiB: 16, pricePerHourUsd: 0.202 },
  'm7i.2xlarge': { vcpus: 8, gpus: 0, memoryGiB: 32, pricePerHourUsd: 0.403 },
  'm7i.4xlarge': { vcpus: 16, gpus: 0, memoryGiB: 64, pricePerHourUsd: 0.806 },
};

const FACT_KEYS = ['gpus', 'vcpus', 'memoryGiB', 'pricePerHourUsd'] as const;

const AgentSchema = z.strictObject({
  // At most 40 characters, so that `<name>-<count>` stays a short DNS label.
  name: z
    .string()
    .max(40)
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS-1123 label: lowercase letters, digits and "-"')
    .meta({
      description: 'Agent name; its hosts are <name>-1 .. <name>-<count> (construct ids, stack outputs)',
      allowed: 'DNS-1123 label (a-z, 0-9, "-"; at most 40)',
    }),
  role: z
    .enum(NODE_ROLES)
    .describe(
      'gpu: runs replicas (one per GPU); cpu: runs the front ends (placement.frontEnds), never a replica',
    ),
  count: z
    .number()
    .int('must be a whole number of hosts')
    .min(1, 'must be at least 1; remove the entry for no agent of this kind')
    .max(16, 'must be at most 16 hosts per entry')
    .default(1)
    .describe('Hosts of this kind'),
  instanceType: z
    .string()
    .min(1)
    .describe(`EC2 instance type; known without further facts: ${Object.keys(INSTANCE_FACTS).join(', ')}`),
  gpus: z.number().int().nonnegative().optional().describe('GPUs of the type (default: from the type table)'),
  vcpus: z.number().int().positive().optional().describe('vCPUs of the type (default: from the type table)'),
  memoryGiB: z
    .number()
    .int()
    .positive()
    .optional()
    .describe('Memory (GiB) of the type (default: from the type table)'),
  pricePerHourUsd: z
    .number()
    .positive()
    .optional()
    .describe('On-demand price per hour (default: from the type table)'),
});
export type ClusterAgent = z.infer<typeof AgentSchema>;

export const ClusterSchema = z
  .strictObject({
    agents: z
      .array(AgentSchema)
      .default([])
      .describe(
        'K3s agents joining the GPU host in its Availability Zone (none by default: the one-host lab); the GPU host, instance.*, is the server',
      ),
  })
  .prefault({});
export type ClusterConfig = z.output<typeof ClusterSchema>;

/** The settings the cluster is made of: the server's instance and the agents. */
export interface ClusterSettings {
  readonly instance: {
    readonly type: string;
    readonly gpus: number;
    readonly vcpus: number;
    readonly memoryGiB: number;
    readonly pricePerHourUsd: number;
  };
  readonly cluster: ClusterConfig;
}

/** One host of the cluster: the server (the GPU host) or one agent host. */
export interface ClusterNode {
  /** `server`, or `<agent name>-<n>` counting from 1. */
  readonly name: string;
  /** The agent entry the host comes from; undefined for the server. */
  readonly agent?: string;
  readonly role: NodeRole;
  readonly instanceType: string;
  readonly gpus: number;
  readonly vcpus: number;
  readonly memoryGiB: number;
  readonly pricePerHourUsd: number;
  /** The On-Demand vCPU quota the host counts against. */
  readonly quota: OnDemandQuota;
}

/** The agent's instance facts: its own settings over the type table; undefined when some are missing. */
export function agentFacts(agent: ClusterAgent): InstanceFacts | undefined {
  const known = INSTANCE_FACTS[agent.instanceType];
  const facts = {
    gpus: agent.gpus ?? known?.gpus,
    vcpus: agent.vcpus ?? known?.vcpus,
    memoryGiB: agent.memoryGiB ?? known?.memoryGiB,
    pricePerHourUsd: agent.pricePerHourUsd ?? known?.pricePerHourUsd,
  };
  return FACT_KEYS.every((key) => facts[key] !== undefined) ? (facts as InstanceFacts) : undefined;
}

/** The agent hosts of one entry, `<name>-1` .. `<name>-<count>`. */
export function agentHostNames(agent: Pick<ClusterAgent, 'name' | 'count'>): string[] {
  return Array.from({ length: agent.count }, (_, i) => `${agent.name}-${i + 1}`);
}

/** Every host of the cluster, the server first, then each agent entry's hosts in order. */
export function clusterNodes(config: ClusterSettings): ClusterNode[] {
  const { instance } = config;
  const server: ClusterNode = {
    name: SERVER_HOST,
    role: instance.gpus > 0 ? 'gpu' : 'cpu',
    instanceType: instance.type,
    gpus: instance.gpus,
    vcpus: instance.vcpus,
    memoryGiB: instance.memoryGiB,
    pricePerHourUsd: instance.pricePerHourUsd,
    quota: onDemandQuotaFor(instance.type),
  };
  const agents = config.cluster.agents.flatMap((agent) => {
    const facts = agentFacts(agent);
    if (!facts) throw new Error(`cluster.agents ${agent.name}: ${unknownTypeMessage(agent.instanceType)}`);
    // A cpu agent on a GPU type keeps its GPUs out of the replicas' count (it is not a GPU node).
    const gpus = agent.role === 'gpu' ? facts.gpus : 0;
    return agentHostNames(agent).map(
      (name): ClusterNode => ({
        name,
        agent: agent.name,
        role: agent.role,
        instanceType: agent.instanceType,
        gpus,
        vcpus: facts.vcpus,
        memoryGiB: facts.memoryGiB,
        pricePerHourUsd: facts.pricePerHourUsd,
        quota: onDemandQuotaFor(agent.instanceType),
      }),
    );
  });
  return [server, ...agents];
}

/** GPUs the replicas can use: the server's and every GPU agent's. */
export function clusterGpuCount(config: ClusterSettings): number {
  return clusterNodes(config).reduce((sum, node) => sum + (node.role === 'gpu' ? node.gpus : 0), 0);
}

/** The agent hosts only (the server is launched and bootstrapped on its own). */
export function agentNodes(config: ClusterSettings): ClusterNode[] {
  return clusterNodes(config).filter((node) => node.agent !== undefined);
}

/** What a host counts against a quota: its vCPUs, in its On-Demand quota. */
export interface QuotaHost {
  readonly name: string;
  readonly vcpus: number;
  readonly quota: OnDemandQuota;
}

/** vCPUs the cluster runs at once, per On-Demand quota, with the hosts that make up each sum. */
export interface QuotaNeed<Host extends QuotaHost = ClusterNode> {
  readonly quota: OnDemandQuota;
  readonly vcpus: number;
  readonly hosts: readonly Host[];
}

/** The hosts' vCPUs summed per On-Demand quota (the cluster's hosts, or `lab doctor`'s network cells). */
export function vcpusByQuota<Host extends QuotaHost = ClusterNode>(
  nodes: readonly Host[],
): QuotaNeed<Host>[] {
  const needs = new Map<string, { quota: OnDemandQuota; vcpus: number; hosts: Host[] }>();
  for (const node of nodes) {
    const need = needs.get(node.quota.name) ?? { quota: node.quota, vcpus: 0, hosts: [] };
    need.vcpus += node.vcpus;
    need.hosts.push(node);
    needs.set(node.quota.name, need);
  }
  return [...needs.values()];
}

/** Hourly on-demand cost of every host of the cluster. */
export function clusterPricePerHourUsd(nodes: readonly ClusterNode[]): number {
  return nodes.reduce((sum, node) => sum + node.pricePerHourUsd, 0);
}

export interface ClusterProblem {
  readonly path: (string | number)[];
  readonly message: string;
  /** The offending value, shown beside the setting. */
  readonly input: unknown;
}

/**
 * Rules over the agents. Like the other cross-field rules they may see a partly invalid
 * configuration, so every read is guarded.
 */
export function clusterProblems(config: {
  readonly lab?: unknown;
  readonly cluster?: Partial<ClusterConfig>;
  readonly instance?: { readonly readyTimeoutMinutes?: unknown };
}): ClusterProblem[] {
  const agents = config.cluster?.agents;
  if (!Array.isArray(agents)) return [];
  if (config.lab === 'network' && agents.length > 0) {
    return [
      {
        path: ['cluster', 'agents'],
        input: agents.map((agent) => agent?.name),
        message:
          'agents join the LLM-gateway lab only; a network-lab cell is one host (leave cluster.agents empty)',
      },
    ];
  }
  const problems: ClusterProblem[] = [];
  // The server waits for its agents within the same WaitCondition time (lib/facts/budgets.ts).
  const ready = config.instance?.readyTimeoutMinutes;
  const least = minimumReadyTimeoutMinutes(true);
  if (agents.length > 0 && typeof ready === 'number' && Number.isInteger(ready) && ready < least) {
    problems.push({
      path: ['instance', 'readyTimeoutMinutes'],
      input: ready,
      message: `must be at least ${least} with cluster.agents, got ${ready}: the server's bootstrap also waits up to ${WAIT_FOR_AGENTS_MINUTES} minutes for its agents to join and fill their model caches`,
    });
  }
  const seen = new Set<string>();
  agents.forEach((agent: ClusterAgent, i) => {
    if (typeof agent?.name === 'string') {
      if (seen.has(agent.name))
        problems.push({
          path: ['cluster', 'agents', i, 'name'],
          input: agent.name,
          message: `"${agent.name}" is used twice`,
        });
      seen.add(agent.name);
    }
    if (typeof agent?.instanceType !== 'string' || agent.instanceType === '') return;
    const facts = agentFacts(agent);
    if (!facts) {
      const missing = FACT_KEYS.filter((key) => agent[key] === undefined);
      problems.push({
        path: ['cluster', 'agents', i, 'instanceType'],
        input: agent.instanceType,
        message: `${unknownTypeMessage(agent.instanceType)}; missing: ${missing.join(', ')}`,
      });
      return;
    }
    if (agent.role === 'gpu' && facts.gpus === 0) {
      problems.push({
        path: ['cluster', 'agents', i, 'instanceType'],
        input: agent.instanceType,
        message: `"${agent.instanceType}" has no GPU but the agent's role is gpu; use a GPU type (e.g. g6.xlarge) or role cpu`,
      });
    }
  });
  return problems;
}

/** Valid but costly or surprising choices, said before any money is spent. */
export function clusterWarnings(config: ClusterSettings): string[] {
  if (config.cluster.agents.length === 0) return [];
  const warnings: string[] = [];
  for (const agent of config.cluster.agents) {
    const facts = agentFacts(agent);
    if (agent.role === 'cpu' && facts && facts.gpus > 0) {
      warnings.push(
        `cluster.agents ${agent.name}: role cpu on ${agent.instanceType} leaves its ${facts.gpus} GPU(s) unused but paid for; use a CPU type (e.g. c7i.4xlarge) or role gpu`,
      );
    }
  }
  const nodes = clusterNodes(config);
  for (const need of vcpusByQuota(nodes)) {
    const parts = need.hosts.map((host) => `${host.name} ${host.vcpus}`).join(' + ');
    const code = need.quota.code ? ` (quota code ${need.quota.code})` : '';
    warnings.push(
      `cluster: the hosts need ${need.vcpus} vCPUs of "${need.quota.name}"${code} at once (${parts}); check the account's quota in this region before deploying`,
    );
  }
  return warnings;
}

function unknownTypeMessage(instanceType: string): string {
  return `"${instanceType}" is not in the instance table (${Object.keys(INSTANCE_FACTS).join(', ')}); give gpus, vcpus, memoryGiB and pricePerHourUsd for it`;
}
