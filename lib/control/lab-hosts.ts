import { STACK_TAG_KEY } from '../aws/tags.ts';
import { type InstanceSummary, readInstances } from '../doctor/instances.ts';
import type { PriceOf } from '../doctor/live-hosts.ts';
import { formatElapsed } from '../runner/status.ts';
import type { ControlContext } from './context.ts';

/**
 * `lab status`'s host lines: every live host of the stack (the server, its K3s agents, or the
 * network lab's cells), found by the stack tag every launch puts on its instances, with its type,
 * Availability Zone, state, uptime and what it costs per hour and has cost so far. A host that
 * outlives the others (an agent whose server is gone) shows here, billing.
 */

/** `CapacityLaunchResource1A2B3C4D` -> `server`; `AgentGpu1LaunchResource...` -> `AgentGpu1`. */
export function hostLabel(labResource: string | undefined): string {
  if (labResource === undefined) return 'untagged';
  if (labResource.startsWith('CapacityLaunch')) return 'server';
  return labResource.replace(/Launch(Resource)?[0-9A-F]{8}$/, '').replace(/Launch$/, '');
}

/** The stack's live hosts (pending, running, stopping, stopped). */
export async function readLabHosts(ctx: ControlContext, stackName: string): Promise<InstanceSummary[]> {
  try {
    return await readInstances(ctx.clients, [{ Name: `tag:${STACK_TAG_KEY}`, Values: [stackName] }]);
  } catch (error) {
    throw ctx.errors.explainAwsError(error, 'ec2:DescribeInstances', ctx);
  }
}

/** Bills for the instance: pending and running (a stopped one bills only its volume). */
const billing = (host: InstanceSummary) => host.state === 'running' || host.state === 'pending';

/** The lines: a total, then one per host. Pure. */
export function labHostLines(hosts: readonly InstanceSummary[], priceOf: PriceOf, now: Date): string[] {
  if (hosts.length === 0) return ['hosts:     none live (every host of the stack has ended)'];
  const rows = hosts.map((host) => {
    const price = priceOf(host.instanceType);
    const upMs = host.launchTime ? Math.max(0, now.getTime() - host.launchTime.getTime()) : undefined;
    const perHour = billing(host) ? (price ?? 0) : 0;
    const soFar = upMs !== undefined && price !== undefined && billing(host) ? (upMs / 3_600_000) * price : 0;
    const cost =
      price === undefined
        ? 'price unknown'
        : `${price.toFixed(2)} USD/h${upMs === undefined ? '' : `, about ${soFar.toFixed(2)} USD so far`}`;
    const up = upMs === undefined ? 'launch time unknown' : `up ${formatElapsed(upMs)}`;
    const where = host.availabilityZone ?? 'AZ unknown';
    return {
      perHour,
      soFar,
      line: `  ${hostLabel(host.labResource)}: ${host.instanceId} ${host.instanceType} in ${where}, ${host.state}, ${up}, ${cost}`,
    };
  });
  const perHour = rows.reduce((sum, row) => sum + row.perHour, 0);
  const soFar = rows.reduce((sum, row) => sum + row.soFar, 0);
  return [
    `hosts:     ${hosts.length} live, ${perHour.toFixed(2)} USD/h on demand together, about ${soFar.toFixed(2)} USD so far (instances only)`,
    ...rows.map((row) => row.line),
  ];
}

/** Writes the stack's host lines. */
export async function showLabHosts(ctx: ControlContext, stackName: string, priceOf: PriceOf): Promise<void> {
  const hosts = await readLabHosts(ctx, stackName);
  for (const line of labHostLines(hosts, priceOf, ctx.now())) ctx.write(line);
}
