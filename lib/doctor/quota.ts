import {
  GetAWSDefaultServiceQuotaCommand,
  GetServiceQuotaCommand,
  type ServiceQuota,
} from '@aws-sdk/client-service-quotas';
import { awsErrorName } from '../aws-cli/errors.ts';
import { type QuotaNeed, vcpusByQuota } from '../config/cluster.ts';
import { onDemandQuotaFor } from '../facts/instances.ts';
import { notChecked } from './errors.ts';
import type { DoctorHost } from './hosts.ts';
import { type InstanceSummary, RUNNING_STATES } from './instances.ts';
import { type CallerContext, type DoctorClients, type DoctorLine, lineOf } from './model.ts';

/**
 * The quota lines: per On-Demand vCPU quota the stack's hosts count against (the buckets of
 * lib/facts/instances.ts onDemandQuotaFor, summed by lib/config/cluster.ts vcpusByQuota), the
 * account's value from Service Quotas against what the stack runs at once plus what other running
 * instances already use, with the command to ask for more.
 */

const line = lineOf('quota');

/** Where a quota is raised: the console page and the CLI request for a value. */
export function quotaIncrease(code: string, desired: number, caller: CallerContext): string {
  return `request ${desired} vCPUs: aws service-quotas request-service-quota-increase --service-code ec2 --quota-code ${code} --desired-value ${desired} --region ${caller.region} (or https://${caller.region}.console.aws.amazon.com/servicequotas/home/services/ec2/quotas/${code})`;
}

/** vCPUs running instances use per quota name, leaving out this stack's own hosts (a relaunch replaces them). */
export function vcpusInUse(instances: readonly InstanceSummary[], stackName: string): Map<string, number> {
  const used = new Map<string, number>();
  for (const instance of instances) {
    if (!RUNNING_STATES.has(instance.state) || instance.labStack === stackName) continue;
    const quota = onDemandQuotaFor(instance.instanceType).name;
    used.set(quota, (used.get(quota) ?? 0) + instance.vcpus);
  }
  return used;
}

/** Judges one quota. `inUse` undefined: the running instances could not be read. Pure. */
export function judgeQuota(
  need: QuotaNeed<DoctorHost>,
  value: number,
  inUse: number | undefined,
  caller: CallerContext,
): DoctorLine {
  const code = need.quota.code ?? '';
  const subject = `${need.quota.name} (${code})`;
  const parts = need.hosts.map((host) => `${host.name} ${host.vcpus}`).join(' + ');
  const needs = `the stack needs ${need.vcpus} vCPUs at once (${parts})`;
  const used = inUse ?? 0;
  if (need.vcpus > value) {
    return line(
      'fail',
      subject,
      `quota ${value} vCPUs; ${needs}`,
      quotaIncrease(code, need.vcpus + used, caller),
    );
  }
  if (inUse === undefined) {
    return line(
      'warn',
      subject,
      `quota ${value} vCPUs; ${needs}; what other instances use was not read`,
      `make sure running instances leave ${need.vcpus} vCPUs free`,
    );
  }
  if (need.vcpus > value - used) {
    return line(
      'fail',
      subject,
      `quota ${value} vCPUs, ${used} in use by running instances; ${needs}`,
      `stop instances using ${need.vcpus - (value - used)} vCPUs of this quota, or ${quotaIncrease(code, need.vcpus + used, caller)}`,
    );
  }
  return line(
    'pass',
    subject,
    `quota ${value} vCPUs, ${used} in use by other instances; ${needs}: ${value - used - need.vcpus} to spare`,
  );
}

/**
 * A quota's value with the name Service Quotas gives its code, or why Service Quotas gave no value
 * (its ErrorReason).
 */
type QuotaRead = { readonly value: number; readonly name?: string } | { readonly reason: string };

/**
 * Whether Service Quotas' name for a code is the quota the lab means. The codes in
 * lib/facts/instances.ts are not all confirmed in AWS's documentation (docs/facts.md §2), so a
 * value is judged only when its code answers with the lab's name (case and spacing aside).
 */
function sameQuotaName(served: string, expected: string): boolean {
  const norm = (text: string) => text.toLowerCase().replace(/\s+/g, ' ').trim();
  return norm(served) === norm(expected);
}

/** The quota's value: the applied one, else AWS's default (a quota never adjusted). */
async function quotaValue(clients: DoctorClients, code: string): Promise<QuotaRead> {
  let quota: ServiceQuota | undefined;
  try {
    quota = (
      await clients.serviceQuotas.send(new GetServiceQuotaCommand({ ServiceCode: 'ec2', QuotaCode: code }))
    ).Quota;
  } catch (error) {
    if (awsErrorName(error) !== 'NoSuchResourceException') throw error;
    quota = (
      await clients.serviceQuotas.send(
        new GetAWSDefaultServiceQuotaCommand({ ServiceCode: 'ec2', QuotaCode: code }),
      )
    ).Quota;
  }
  if (quota?.Value !== undefined)
    return { value: quota.Value, ...(quota.QuotaName === undefined ? {} : { name: quota.QuotaName }) };
  // Service Quotas answers with an ErrorReason instead of a value when it could not read the quota.
  const reason = quota?.ErrorReason;
  return { reason: reason ? `${reason.ErrorCode}: ${reason.ErrorMessage ?? ''}`.trim() : 'no value given' };
}

/** Reads each quota the hosts count against. `instances` undefined: they could not be read. */
export async function checkQuotas(
  clients: DoctorClients,
  hosts: readonly DoctorHost[],
  stackName: string,
  instances: readonly InstanceSummary[] | undefined,
  caller: CallerContext,
): Promise<DoctorLine[]> {
  const used = instances && vcpusInUse(instances, stackName);
  const lines: DoctorLine[] = [];
  for (const need of vcpusByQuota(hosts)) {
    const { code, name } = need.quota;
    if (code === undefined) {
      lines.push(
        line(
          'warn',
          name,
          `not checked: the lab knows no quota code for it; the stack needs ${need.vcpus} vCPUs of it at once`,
          `find "${name}" under Service Quotas > Amazon EC2 in ${caller.region} and make sure it allows ${need.vcpus}`,
        ),
      );
      continue;
    }
    try {
      const read = await quotaValue(clients, code);
      if ('value' in read && read.name !== undefined && !sameQuotaName(read.name, name)) {
        lines.push(
          line(
            'warn',
            `${name} (${code})`,
            `not judged: Service Quotas names ${code} "${read.name}", not "${name}" (the lab's quota code is wrong: lib/facts/instances.ts); the stack needs ${need.vcpus} vCPUs of "${name}" at once`,
            `find "${name}" under Service Quotas > Amazon EC2 in ${caller.region} and make sure it allows ${need.vcpus}`,
          ),
        );
        continue;
      }
      lines.push(
        'value' in read
          ? judgeQuota(need, read.value, used ? (used.get(name) ?? 0) : undefined, caller)
          : line(
              'warn',
              `${name} (${code})`,
              `not checked: Service Quotas gave no value (${read.reason}); the stack needs ${need.vcpus} vCPUs of it at once`,
              `open https://${caller.region}.console.aws.amazon.com/servicequotas/home/services/ec2/quotas/${code} and make sure it allows ${need.vcpus}`,
            ),
      );
    } catch (error) {
      lines.push(notChecked('quota', `${name} (${code})`, 'servicequotas:GetServiceQuota', error));
    }
  }
  return lines;
}
