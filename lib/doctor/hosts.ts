import { clusterNodes, INSTANCE_FACTS, type QuotaHost } from '../config/cluster.ts';
import type { LabConfig } from '../config/schema.ts';
import { onDemandQuotaFor } from '../facts/instances.ts';

/**
 * The hosts a configuration's `cdk deploy` launches, as `lab doctor` checks them: the types each
 * may launch as, the AMI parameter it boots from, the vCPUs it counts against which quota and what
 * it costs. Pure: the same lists the stack (lib/aws/lab-stack.ts, agents.ts) builds its launches from.
 */

/** One host the stack launches. */
export interface DoctorHost extends QuotaHost {
  /** `server`, `gpu-1` (an agent), `cell dp-iptables` (a network-lab cell). */
  readonly name: string;
  /** The primary type, then the fallback types in the order the launch tries them. */
  readonly types: readonly string[];
  /** The public SSM parameter the launch template's AMI resolves from at deploy time. */
  readonly amiParameter: string;
  readonly pricePerHourUsd: number;
  /** GPUs the lab counts on; undefined when it counts none it could miss (a cpu agent). */
  readonly gpus?: number;
  readonly memoryGiB: number;
  /** Where the configuration gives this host's size: `instance`, `cluster.agents[gpu]`, `network.instance`. */
  readonly settings: string;
  /**
   * Whether the launch is held to the server's Availability Zone (a K3s agent joins over the VPC:
   * lib/aws/agents.ts gives its launch the server's AZ).
   */
  readonly inServerAz: boolean;
}

/** Every host of the configuration, in launch order: the server and its agents, or one per cell. */
export function doctorHosts(config: LabConfig): DoctorHost[] {
  if (config.lab === 'network') {
    const { instance } = config.network;
    return config.network.cells.map((cell) => {
      const type = cell.instanceType ?? instance.type;
      // A cell that names its own type: the type table's facts when it knows them (the settings
      // network.instance.* describe network.instance.type).
      const facts = type === instance.type ? undefined : INSTANCE_FACTS[type];
      return {
        name: `cell ${cell.name}`,
        types: [type, ...instance.fallbackTypes],
        amiParameter: instance.amiParameter,
        vcpus: facts?.vcpus ?? instance.vcpus,
        quota: onDemandQuotaFor(type),
        pricePerHourUsd: facts?.pricePerHourUsd ?? instance.pricePerHourUsd,
        gpus: facts?.gpus ?? instance.gpus,
        memoryGiB: facts?.memoryGiB ?? instance.memoryGiB,
        settings: facts ? `the instance table (${type})` : 'network.instance',
        inServerAz: false,
      };
    });
  }
  return clusterNodes(config).map((node) => ({
    name: node.name,
    types:
      node.agent === undefined ? [node.instanceType, ...config.instance.fallbackTypes] : [node.instanceType],
    amiParameter: config.instance.amiParameter,
    vcpus: node.vcpus,
    quota: node.quota,
    pricePerHourUsd: node.pricePerHourUsd,
    // A cpu agent's GPUs are left out of the cluster's count (and warned about by the configuration).
    ...(node.role === 'gpu' || node.agent === undefined ? { gpus: node.gpus } : {}),
    memoryGiB: node.memoryGiB,
    settings: node.agent === undefined ? 'instance' : `cluster.agents[${node.agent}]`,
    inServerAz: node.agent !== undefined,
  }));
}

/** The configuration's preferred Availability Zones (the server's, or the cells'). */
export function preferredAzs(config: LabConfig): readonly string[] {
  return config.lab === 'network' ? config.network.instance.preferredAzs : config.instance.preferredAzs;
}

/** The on-demand price per hour of a type from the lab's instance table, the configuration's own types first. */
export function pricePerHour(config: LabConfig, instanceType: string): number | undefined {
  for (const host of doctorHosts(config)) {
    if (host.types[0] === instanceType) return host.pricePerHourUsd;
  }
  return INSTANCE_FACTS[instanceType]?.pricePerHourUsd;
}
