import {
  type _InstanceType,
  DescribeInstanceTypeOfferingsCommand,
  DescribeInstanceTypesCommand,
  type InstanceTypeInfo,
} from '@aws-sdk/client-ec2';
import { notChecked } from './errors.ts';
import type { DoctorHost } from './hosts.ts';
import { type CallerContext, type DoctorClients, type DoctorLine, lineOf } from './model.ts';

/**
 * The instance-type lines: per host, the Availability Zones of the region that offer its type or a
 * fallback type (EC2 DescribeInstanceTypeOfferings by availability-zone). An agent launches in the
 * server's AZ only (lib/aws/agents.ts), so its type must be offered where the server can land.
 */

const line = lineOf('instance-types');

/** Type -> the AZs offering it, sorted. */
export type Offerings = ReadonlyMap<string, readonly string[]>;

/** What EC2 says a type is (DescribeInstanceTypes). */
export interface TypeSize {
  readonly vcpus: number;
  readonly gpus: number;
  readonly memoryGiB: number;
}

/** The size of a type from EC2's description; undefined when it lacks the vCPU count. */
export function typeSize(info: InstanceTypeInfo): TypeSize | undefined {
  const vcpus = info.VCpuInfo?.DefaultVCpus;
  if (vcpus === undefined) return undefined;
  const gpus = (info.GpuInfo?.Gpus ?? []).reduce((sum, gpu) => sum + (gpu.Count ?? 0), 0);
  return { vcpus, gpus, memoryGiB: Math.round((info.MemoryInfo?.SizeInMiB ?? 0) / 1024) };
}

/**
 * A warning per host whose primary type EC2 describes differently from the configuration: its
 * vCPUs are what the quota counts, its GPUs the replicas, its memory the pods' budget. Pure.
 */
export function judgeSizes(hosts: readonly DoctorHost[], sizes: ReadonlyMap<string, TypeSize>): DoctorLine[] {
  const lines: DoctorLine[] = [];
  for (const host of hosts) {
    const type = host.types[0] ?? '';
    const size = sizes.get(type);
    if (!size) continue;
    const differ: string[] = [];
    if (size.vcpus !== host.vcpus) differ.push(`${host.vcpus} vCPUs (EC2: ${size.vcpus})`);
    if (host.gpus !== undefined && size.gpus !== host.gpus)
      differ.push(`${host.gpus} GPUs (EC2: ${size.gpus})`);
    if (size.memoryGiB !== host.memoryGiB) differ.push(`${host.memoryGiB} GiB (EC2: ${size.memoryGiB})`);
    if (differ.length === 0) continue;
    lines.push(
      line(
        'warn',
        `${host.name}: ${type} size`,
        `${host.settings} says ${differ.join(', ')}; the quota line counts EC2's vCPUs`,
        `set ${host.settings}'s vcpus, gpus and memoryGiB to the type's: ${size.vcpus}, ${size.gpus}, ${size.memoryGiB}`,
      ),
    );
  }
  return lines;
}

const list = (azs: Iterable<string>) => [...azs].sort().join(', ');

/** The AZs offering any of the types. */
function azsOfAny(offerings: Offerings, types: readonly string[]): Set<string> {
  return new Set(types.flatMap((type) => offerings.get(type) ?? []));
}

function offeringsCommand(types: readonly string[], caller: CallerContext): string {
  return `aws ec2 describe-instance-type-offerings --location-type availability-zone --filters Name=instance-type,Values=${types.join(',')} --region ${caller.region}`;
}

/** Judges every host against the offerings. Pure. */
export function judgeInstanceTypes(
  hosts: readonly DoctorHost[],
  offerings: Offerings,
  preferredAzs: readonly string[],
  caller: CallerContext,
): DoctorLine[] {
  const server = hosts.find((host) => !host.inServerAz);
  const serverAzs = server ? azsOfAny(offerings, server.types) : new Set<string>();
  return hosts.map((host) => {
    const [primary = '', ...fallbacks] = host.types;
    const subject = `${host.name}: ${host.types.join(' or ')}`;
    const any = azsOfAny(offerings, host.types);
    if (any.size === 0) {
      return line(
        'fail',
        subject,
        `not offered in any Availability Zone of ${caller.region}`,
        `choose a type this region offers, or another region (${offeringsCommand(host.types, caller)})`,
      );
    }
    if (host.inServerAz) {
      const shared = [...any].filter((az) => serverAzs.has(az));
      if (shared.length === 0) {
        return line(
          'fail',
          subject,
          `offered in ${list(any)}, but the server's types only in ${list(serverAzs)}: an agent launches in the server's Availability Zone`,
          'choose agent and server types offered in a common Availability Zone',
        );
      }
      const missing = [...serverAzs].filter((az) => !any.has(az));
      if (missing.length > 0) {
        return line(
          'warn',
          subject,
          `offered in ${list(shared)} of the server's ${list(serverAzs)}: a server launched in ${list(missing)} leaves this agent without capacity`,
          `set instance.preferredAzs to [${shared.sort().join(', ')}]`,
        );
      }
      return line('pass', subject, `offered in the server's Availability Zones ${list(shared)}`);
    }
    const primaryAzs = offerings.get(primary) ?? [];
    if (primaryAzs.length === 0) {
      const used = fallbacks.filter((type) => (offerings.get(type) ?? []).length > 0);
      return line(
        'warn',
        subject,
        `${primary} is not offered in ${caller.region}; the launch would use ${used.join(' or ')} (${list(any)})`,
        `make ${used[0]} the type (its vCPUs, memory and price) or choose another region`,
      );
    }
    const unoffered = preferredAzs.filter((az) => !any.has(az));
    if (unoffered.length > 0) {
      return line(
        'warn',
        subject,
        `offered in ${list(any)}; the preferred Availability Zones ${unoffered.join(', ')} offer none of these types`,
        'drop them from preferredAzs (the launch skips them anyway)',
      );
    }
    const byType = host.types
      .map((type) => `${type} in ${list(offerings.get(type) ?? []) || 'no AZ'}`)
      .join('; ');
    return line('pass', subject, `offered: ${byType}`);
  });
}

/** The lines, and each offered primary type's size as EC2 describes it. */
export interface InstanceTypesChecked {
  readonly lines: DoctorLine[];
  readonly sizes: ReadonlyMap<string, TypeSize>;
}

/** Reads the offerings of every type of every host (paged), then the offered primary types' sizes. Reads only. */
export async function checkInstanceTypes(
  clients: DoctorClients,
  hosts: readonly DoctorHost[],
  preferredAzs: readonly string[],
  caller: CallerContext,
): Promise<InstanceTypesChecked> {
  const types = [...new Set(hosts.flatMap((host) => host.types))];
  const offerings = new Map<string, string[]>(types.map((type) => [type, []]));
  try {
    let NextToken: string | undefined;
    do {
      const page = await clients.ec2.send(
        new DescribeInstanceTypeOfferingsCommand({
          LocationType: 'availability-zone',
          Filters: [{ Name: 'instance-type', Values: types }],
          ...(NextToken ? { NextToken } : {}),
        }),
      );
      for (const offering of page.InstanceTypeOfferings ?? []) {
        const azs = offering.InstanceType ? offerings.get(offering.InstanceType) : undefined;
        if (azs && offering.Location) azs.push(offering.Location);
      }
      NextToken = page.NextToken;
    } while (NextToken);
  } catch (error) {
    return {
      lines: [notChecked('instance-types', types.join(', '), 'ec2:DescribeInstanceTypeOfferings', error)],
      sizes: new Map(),
    };
  }
  for (const azs of offerings.values()) azs.sort();
  const lines = judgeInstanceTypes(hosts, offerings, preferredAzs, caller);
  // Only offered types: EC2 rejects the whole request for a type the region does not have.
  const primaries = [...new Set(hosts.map((host) => host.types[0] ?? ''))].filter(
    (type) => (offerings.get(type) ?? []).length > 0,
  );
  const sizes = new Map<string, TypeSize>();
  if (primaries.length === 0) return { lines, sizes };
  try {
    const described = await clients.ec2.send(
      new DescribeInstanceTypesCommand({ InstanceTypes: primaries as _InstanceType[] }),
    );
    for (const info of described.InstanceTypes ?? []) {
      const size = typeSize(info);
      if (info.InstanceType && size) sizes.set(info.InstanceType, size);
    }
  } catch (error) {
    return {
      lines: [
        ...lines,
        notChecked('instance-types', `${primaries.join(', ')} size`, 'ec2:DescribeInstanceTypes', error),
      ],
      sizes,
    };
  }
  return { lines: [...lines, ...judgeSizes(hosts, sizes)], sizes };
}
