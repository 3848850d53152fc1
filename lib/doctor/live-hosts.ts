import type { InstanceSummary } from './instances.ts';
import { type CallerContext, type DoctorLine, lineOf } from './model.ts';

/**
 * The live-host lines: instances of any lab stack still alive in the region (found by the stack tag
 * every lab launch puts on its instances), with what each costs per hour. A forgotten host of an
 * earlier lab keeps billing and holds vCPU quota the new one needs.
 */

const line = lineOf('live-hosts');

/** Price per hour of a type (the lab's price table); undefined when the lab does not know it. */
export type PriceOf = (instanceType: string) => number | undefined;

function hostText(instance: InstanceSummary, priceOf: PriceOf, now: Date): string {
  const price = priceOf(instance.instanceType);
  const cost = price === undefined ? 'price unknown' : `${price.toFixed(2)} USD/h`;
  const since = instance.launchTime
    ? `, up ${((now.getTime() - instance.launchTime.getTime()) / 3_600_000).toFixed(1)} h`
    : '';
  const state = instance.state === 'running' ? '' : ` ${instance.state}`;
  return `${instance.instanceId} ${instance.instanceType}${state} (${cost}${since})`;
}

/** One line per lab stack with live hosts, or one pass line. Pure. */
export function judgeLiveHosts(
  instances: readonly InstanceSummary[],
  stackName: string,
  priceOf: PriceOf,
  caller: CallerContext,
  now: Date,
): DoctorLine[] {
  const byStack = new Map<string, InstanceSummary[]>();
  for (const instance of instances) {
    if (instance.labStack === undefined) continue;
    byStack.set(instance.labStack, [...(byStack.get(instance.labStack) ?? []), instance]);
  }
  if (byStack.size === 0) {
    return [line('pass', caller.region, 'no live lab host in the region (by the llm-gateway-lab:stack tag)')];
  }
  return [...byStack].map(([stack, hosts]) => {
    const running = hosts.filter((host) => host.state === 'running' || host.state === 'pending');
    const perHour = running.reduce((sum, host) => sum + (priceOf(host.instanceType) ?? 0), 0);
    const listed = hosts.map((host) => hostText(host, priceOf, now)).join('; ');
    const total = `${perHour.toFixed(2)} USD/h on demand in all`;
    if (stack === stackName) {
      return line(
        'warn',
        `stack ${stack} (this one)`,
        `already has ${hosts.length} live host(s): ${listed}; ${total}`,
        `a deploy updates this lab (a changed host is terminated before its replacement launches); when done: npx cdk destroy ${stack}`,
      );
    }
    return line(
      'warn',
      `stack ${stack}`,
      `${hosts.length} live host(s) of another lab: ${listed}; ${total}`,
      `if it is forgotten: npx cdk destroy ${stack} (lab teardown --stack ${stack} first if the destroy fails); its running hosts count against the same quotas`,
    );
  });
}
