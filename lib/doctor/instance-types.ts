import { DescribeInstanceTypeOfferingsCommand } from '@aws-sdk/client-ec2';
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

/** Reads the offerings of every type of every host (paged). Reads only. */
export async function checkInstanceTypes(
  clients: DoctorClients,
  hosts: readonly DoctorHost[],
  preferredAzs: readonly string[],
  caller: CallerContext,
): Promise<DoctorLine[]> {
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
    return [notChecked('instance-types', types.join(', '), 'ec2:DescribeInstanceTypeOfferings', error)];
  }
  for (const azs of offerings.values()) azs.sort();
  return judgeInstanceTypes(hosts, offerings, preferredAzs, caller);
}
