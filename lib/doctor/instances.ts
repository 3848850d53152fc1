import { DescribeInstancesCommand } from '@aws-sdk/client-ec2';
import { STACK_TAG_KEY } from '../aws/tags.ts';
import { INSTANCE_FACTS } from '../config/cluster.ts';
import type { DoctorClients } from './model.ts';

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
  readonly launchTime?: Date;
}

/** States of an instance that still exists; terminated and shutting-down ones are gone. */
export const LIVE_STATES = ['pending', 'running', 'stopping', 'stopped'];
/** States that count against a Running On-Demand quota. */
export const RUNNING_STATES: ReadonlySet<string> = new Set(['pending', 'running']);

/** Reads every live instance of the region (paged). Reads only; throws the SDK's error. */
export async function readInstances(clients: DoctorClients): Promise<InstanceSummary[]> {
  const instances: InstanceSummary[] = [];
  let NextToken: string | undefined;
  do {
    const page = await clients.ec2.send(
      new DescribeInstancesCommand({
        Filters: [{ Name: 'instance-state-name', Values: LIVE_STATES }],
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
        const labStack = instance.Tags?.find((tag) => tag.Key === STACK_TAG_KEY)?.Value;
        instances.push({
          instanceId: instance.InstanceId,
          instanceType: type,
          state: instance.State?.Name ?? 'unknown',
          vcpus,
          ...(labStack === undefined ? {} : { labStack }),
          ...(instance.LaunchTime ? { launchTime: instance.LaunchTime } : {}),
        });
      }
    }
    NextToken = page.NextToken;
  } while (NextToken);
  return instances;
}
