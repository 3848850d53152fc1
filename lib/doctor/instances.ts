import { DescribeInstancesCommand, type EC2Client, type Filter } from '@aws-sdk/client-ec2';
import { RESOURCE_TAG_KEY, STACK_TAG_KEY } from '../aws/tags.ts';
import { INSTANCE_FACTS } from '../config/cluster.ts';
import { LIVE_STATES } from '../facts/instances.ts';

/**
 * The region's instances that still exist (pending, running, stopping, stopped), read once for two
 * lines: the running ones count against the vCPU quotas, the lab's (by its stack tag,
 * lib/aws/tags.ts) are the live lab hosts.
 */

export interface InstanceSummary {
  readonly instanceId: string;
  readonly instanceType: string;
  readonly state: string;
  readonly vcpus: number;
  /** The lab stack the instance belongs to (its STACK_TAG_KEY tag); undefined for anything else. */
  readonly labStack?: string;
  /** The stack resource that launched it (its RESOURCE_TAG_KEY tag: the launch's logical id). */
  readonly labResource?: string;
  readonly availabilityZone?: string;
  readonly launchTime?: Date;
}

/** States that count against a Running On-Demand quota. */
export const RUNNING_STATES: ReadonlySet<string> = new Set(['pending', 'running']);

/**
 * Reads every live instance of the region (paged), or only those `filters` select (`lab status`:
 * one stack's tag). Reads only; throws the SDK's error.
 */
export async function readInstances(
  clients: { readonly ec2: EC2Client },
  filters: readonly Filter[] = [],
): Promise<InstanceSummary[]> {
  const instances: InstanceSummary[] = [];
  let NextToken: string | undefined;
  do {
    const page = await clients.ec2.send(
      new DescribeInstancesCommand({
        Filters: [...filters, { Name: 'instance-state-name', Values: [...LIVE_STATES] }],
        ...(NextToken ? { NextToken } : {}),
      }),
    );
    for (const reservation of page.Reservations ?? []) {
      for (const instance of reservation.Instances ?? []) {
        if (!instance.InstanceId) continue;
        const type = instance.InstanceType ?? 'unknown';
        const cpu = instance.CpuOptions;
        // vCPUs as the quota counts them: cores times threads per core (the launch's CPU options).
        const vcpus =
          cpu?.CoreCount !== undefined
            ? cpu.CoreCount * (cpu.ThreadsPerCore ?? 1)
            : (INSTANCE_FACTS[type]?.vcpus ?? 0);
        const tag = (key: string) => instance.Tags?.find((t) => t.Key === key)?.Value;
        const labStack = tag(STACK_TAG_KEY);
        const labResource = tag(RESOURCE_TAG_KEY);
        const availabilityZone = instance.Placement?.AvailabilityZone;
        instances.push({
          instanceId: instance.InstanceId,
          instanceType: type,
          state: instance.State?.Name ?? 'unknown',
          vcpus,
          ...(labStack === undefined ? {} : { labStack }),
          ...(labResource === undefined ? {} : { labResource }),
          ...(availabilityZone === undefined ? {} : { availabilityZone }),
          ...(instance.LaunchTime ? { launchTime: instance.LaunchTime } : {}),
        });
      }
    }
    NextToken = page.NextToken;
  } while (NextToken);
  return instances;
}
