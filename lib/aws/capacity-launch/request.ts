import { randomUUID } from 'node:crypto';
import { GENERATION_TAG_KEY, RESOURCE_TAG_KEY } from '../tags.ts';
import type { HandlerDeps, ResourceEvent } from './hosts.ts';
import type { LabSubnet, LaunchRequest, OnDemandQuota } from './launch.ts';
import { LAUNCH_INPUTS, LaunchProps, SubnetFields } from './props.ts';

/** What a CloudFormation request asks of the capacity launch, read from its properties. */

export const ATTEMPT_LOG_LIMIT = 1500;

function text(props: Record<string, unknown>, name: string): string {
  const value = props[name];
  if (typeof value !== 'string' || value === '') {
    throw new Error(
      `CapacityLaunch: property ${name} must be a non-empty string, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function list(props: Record<string, unknown>, name: string): unknown[] {
  const value = props[name] ?? [];
  if (!Array.isArray(value)) throw new Error(`CapacityLaunch: property ${name} must be a list`);
  return value;
}

function subnetOf(entry: unknown): LabSubnet {
  const fields = (entry ?? {}) as Record<string, unknown>;
  return {
    subnetId: text(fields, SubnetFields.subnetId),
    availabilityZone: text(fields, SubnetFields.availabilityZone),
  };
}

/** The quota the stack named, if any (the handler derives it from the type otherwise). */
function quotaOf(props: Record<string, unknown>): { quota?: OnDemandQuota } {
  const name = props[LaunchProps.quotaName];
  if (typeof name !== 'string' || name === '') return {};
  const code = props[LaunchProps.quotaCode];
  return { quota: { name, ...(typeof code === 'string' && code !== '' ? { code } : {}) } };
}

/** The stack's total need of the quota, when the stack gave it. */
function stackNeedOf(props: Record<string, unknown>): { stackNeed?: { vcpus: number; hosts: string } } {
  const vcpus = Number(props[LaunchProps.stackVcpusNeeded]);
  const hosts = props[LaunchProps.stackVcpusHosts];
  if (!Number.isFinite(vcpus) || vcpus <= 0 || typeof hosts !== 'string') return {};
  return { stackNeed: { vcpus, hosts } };
}

/**
 * The subnets a launch may use: all of them, or only the required AZ's (a K3s agent joins its
 * server in the server's AZ; the type fallback still applies there, the AZ fallback cannot).
 */
function subnetsWithin(subnets: LabSubnet[], requiredAz: unknown): LabSubnet[] {
  if (typeof requiredAz !== 'string' || requiredAz === '') return subnets;
  const inAz = subnets.filter((s) => s.availabilityZone === requiredAz);
  if (inAz.length === 0) {
    const azs = [...new Set(subnets.map((s) => s.availabilityZone))].sort().join(', ');
    throw new Error(
      `CapacityLaunch: ${LaunchProps.requiredAz} ${requiredAz} has no lab subnet; the subnets are in ${azs}`,
    );
  }
  return inAz;
}

/** The launch request from the resource properties (CloudFormation sends numbers as strings). */
export function parseLaunchRequest(
  props: Record<string, unknown>,
  requestId: string,
  logicalResourceId?: string,
): LaunchRequest {
  const instanceTypes = list(props, LaunchProps.instanceTypes).map(String);
  if (instanceTypes.length === 0)
    throw new Error(`CapacityLaunch: property ${LaunchProps.instanceTypes} is empty`);
  const vcpus = Number(props[LaunchProps.vcpusNeeded]);
  const requiredAz = props[LaunchProps.requiredAz];
  return {
    launchTemplateId: text(props, LaunchProps.launchTemplateId),
    launchTemplateVersion: text(props, LaunchProps.launchTemplateVersion),
    subnets: subnetsWithin(list(props, LaunchProps.subnets).map(subnetOf), requiredAz),
    securityGroupId: text(props, LaunchProps.securityGroupId),
    instanceTypes,
    preferredAzs:
      typeof requiredAz === 'string' && requiredAz !== ''
        ? [requiredAz]
        : list(props, LaunchProps.preferredAzs).map(String),
    vcpusNeeded: Number.isFinite(vcpus) ? vcpus : 0,
    ...quotaOf(props),
    ...stackNeedOf(props),
    stackTag: { key: text(props, LaunchProps.stackTagKey), value: text(props, LaunchProps.stackTagValue) },
    generationTag: { key: GENERATION_TAG_KEY, value: text(props, LaunchProps.generation) },
    ...(logicalResourceId ? { resourceTag: { key: RESOURCE_TAG_KEY, value: logicalResourceId } } : {}),
    requestId,
  };
}

/** The request id the tokens derive from; an event without one (never from CloudFormation) gets a fresh one. */
export function requestIdOf(event: ResourceEvent, deps: HandlerDeps): string {
  if (event.RequestId) return event.RequestId;
  const id = randomUUID();
  deps.log?.(
    `the event has no RequestId: client tokens derive from ${id}, so a repeated call is not idempotent`,
  );
  return id;
}

/** Whether an Update changed anything the instance was launched from. */
export function launchInputsChanged(
  oldProps: Record<string, unknown> | undefined,
  newProps: Record<string, unknown>,
): boolean {
  const pick = (props: Record<string, unknown> | undefined) =>
    JSON.stringify(LAUNCH_INPUTS.map((name) => props?.[name] ?? null));
  return pick(oldProps) !== pick(newProps);
}

/** The attempt log as one attribute; the newest lines are kept when it must be shortened. */
export function attemptLogAttribute(lines: readonly string[], limit = ATTEMPT_LOG_LIMIT): string {
  const whole = lines.join('\n');
  if (whole.length <= limit) return whole;
  const kept: string[] = [];
  let size = 0;
  for (const line of [...lines].reverse()) {
    if (size + line.length + 1 > limit - 80) break;
    kept.unshift(line);
    size += line.length + 1;
  }
  const omitted = lines.length - kept.length;
  return [`(${omitted} earlier lines omitted; the launch function's log has them all)`, ...kept].join('\n');
}

/** Whether the event is an Update that replaces the host (its launch inputs changed). */
export function isReplacement(event: ResourceEvent): boolean {
  return (
    event.RequestType === 'Update' &&
    launchInputsChanged(event.OldResourceProperties, event.ResourceProperties)
  );
}

/** The launch request of the event, its instances tagged with the resource's logical id. */
export function launchRequestOf(event: ResourceEvent, deps: HandlerDeps): LaunchRequest {
  return parseLaunchRequest(event.ResourceProperties, requestIdOf(event, deps), event.LogicalResourceId);
}
