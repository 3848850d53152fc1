import {
  DescribeInstancesCommand,
  EC2Client,
  type Instance,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { INSTANCE_ID, isInstanceGone } from '../instances.ts';
import { errorFacts, type LabSubnet, type LaunchRequest, launchWithFallback } from './launch.ts';
import { LAUNCH_INPUTS, type LaunchAttributes, LaunchProps, SubnetFields } from './props.ts';

/** The part of the Provider framework's event this handler reads. */
export interface ResourceEvent {
  readonly RequestType: 'Create' | 'Update' | 'Delete';
  readonly ResourceProperties: Record<string, unknown>;
  readonly OldResourceProperties?: Record<string, unknown>;
  readonly PhysicalResourceId?: string;
}

export type LaunchData = Record<(typeof LaunchAttributes)[keyof typeof LaunchAttributes], string>;

export interface OnEventResponse {
  readonly PhysicalResourceId: string;
  readonly Data?: LaunchData;
}

export interface IsCompleteResponse {
  readonly IsComplete: boolean;
}

export interface HandlerDeps {
  /** For RunInstances and its offerings lookup: built with `maxAttempts: 1`. */
  readonly launchEc2: EC2Client;
  /** For DescribeInstances and TerminateInstances: the SDK's own retries are welcome there. */
  readonly ec2: EC2Client;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly log?: (line: string) => void;
}

// A CloudFormation response is at most 4 KB, attributes included.
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

/** The launch request from the resource properties (CloudFormation sends numbers as strings). */
export function parseLaunchRequest(props: Record<string, unknown>): LaunchRequest {
  const instanceTypes = list(props, LaunchProps.instanceTypes).map(String);
  if (instanceTypes.length === 0)
    throw new Error(`CapacityLaunch: property ${LaunchProps.instanceTypes} is empty`);
  const vcpus = Number(props[LaunchProps.vcpusNeeded]);
  return {
    launchTemplateId: text(props, LaunchProps.launchTemplateId),
    launchTemplateVersion: text(props, LaunchProps.launchTemplateVersion),
    subnets: list(props, LaunchProps.subnets).map(subnetOf),
    securityGroupId: text(props, LaunchProps.securityGroupId),
    instanceTypes,
    preferredAzs: list(props, LaunchProps.preferredAzs).map(String),
    vcpusNeeded: Number.isFinite(vcpus) ? vcpus : 0,
    stackTag: { key: text(props, LaunchProps.stackTagKey), value: text(props, LaunchProps.stackTagValue) },
  };
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

/** The instance, or undefined when EC2 does not know the id. */
async function describeInstance(ec2: EC2Client, instanceId: string): Promise<Instance | undefined> {
  try {
    const answer = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
    return answer.Reservations?.[0]?.Instances?.[0];
  } catch (err) {
    if (isInstanceGone(err)) return undefined;
    throw err;
  }
}

async function launch(props: Record<string, unknown>, deps: HandlerDeps): Promise<OnEventResponse> {
  const result = await launchWithFallback(parseLaunchRequest(props), {
    ec2: deps.launchEc2,
    sleep: deps.sleep,
    log: deps.log,
  });
  return {
    PhysicalResourceId: result.instanceId,
    Data: {
      InstanceId: result.instanceId,
      AvailabilityZone: result.availabilityZone,
      InstanceType: result.instanceType,
      AttemptLog: attemptLogAttribute(result.log),
    },
  };
}

async function update(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
  const current = event.PhysicalResourceId ?? '';
  if (launchInputsChanged(event.OldResourceProperties, event.ResourceProperties)) {
    deps.log?.(`launch inputs changed: launching a new instance; CloudFormation then deletes ${current}`);
    return launch(event.ResourceProperties, deps);
  }
  const instance = INSTANCE_ID.test(current) ? await describeInstance(deps.ec2, current) : undefined;
  const state = instance?.State?.Name;
  if (state === 'pending' || state === 'running') {
    const az = instance?.Placement?.AvailabilityZone ?? '';
    const type = instance?.InstanceType ?? '';
    return {
      PhysicalResourceId: current,
      Data: {
        InstanceId: current,
        AvailabilityZone: az,
        InstanceType: type,
        AttemptLog: `${type}: kept ${current} in ${az}, launch inputs unchanged`,
      },
    };
  }
  // The lifetime guard or a person ended it: an unchanged stack still means a running lab.
  deps.log?.(`${current} is ${state ?? 'gone'}: launching a new instance`);
  return launch(event.ResourceProperties, deps);
}

async function terminate(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
  const instanceId = event.PhysicalResourceId ?? '';
  if (!INSTANCE_ID.test(instanceId)) {
    deps.log?.(`${instanceId} is not an instance id: nothing was launched, nothing to terminate`);
    return { PhysicalResourceId: instanceId };
  }
  try {
    await deps.ec2.send(new TerminateInstancesCommand({ InstanceIds: [instanceId] }));
  } catch (err) {
    if (!isInstanceGone(err)) throw err;
    deps.log?.(`${instanceId}: ${errorFacts(err).code}, counted as terminated`);
  }
  return { PhysicalResourceId: instanceId };
}

/** `onEvent` of the Provider framework: launch, keep or replace, terminate. */
export async function handleEvent(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
  switch (event.RequestType) {
    case 'Create':
      return launch(event.ResourceProperties, deps);
    case 'Update':
      return update(event, deps);
    case 'Delete':
      return terminate(event, deps);
  }
}

/** `isComplete` of the Provider framework: running after Create/Update, terminated after Delete. */
export async function checkComplete(event: ResourceEvent, deps: HandlerDeps): Promise<IsCompleteResponse> {
  const instanceId = event.PhysicalResourceId ?? '';
  if (event.RequestType === 'Delete') {
    if (!INSTANCE_ID.test(instanceId)) return { IsComplete: true };
    const instance = await describeInstance(deps.ec2, instanceId);
    return { IsComplete: instance === undefined || instance.State?.Name === 'terminated' };
  }
  // Right after RunInstances, DescribeInstances may not know the id yet: wait for it.
  const instance = await describeInstance(deps.ec2, instanceId);
  const state = instance?.State?.Name;
  if (state === undefined || state === 'pending') return { IsComplete: false };
  if (state === 'running') return { IsComplete: true };
  const reason = instance?.StateReason;
  // EC2 can accept RunInstances and withdraw the capacity while the instance is pending.
  const advice = reason?.Code?.startsWith('Server.Insufficient')
    ? '. The capacity was withdrawn after the launch; deploy again to try the Availability Zones once more'
    : '';
  throw new Error(
    `${instanceId} (${instance?.InstanceType} in ${instance?.Placement?.AvailabilityZone}) went to ` +
      `${state} instead of running: ${reason?.Code ?? 'no code'}: ${reason?.Message ?? 'no reason given'}${advice}`,
  );
}

let live: HandlerDeps | undefined;

function liveDeps(): HandlerDeps {
  live ??= {
    // maxAttempts 1: the SDK would retry InsufficientInstanceCapacity (a 5xx) in the same AZ.
    launchEc2: new EC2Client({ maxAttempts: 1 }),
    ec2: new EC2Client({}),
    log: (line) => console.log(line),
  };
  return live;
}

export const onEvent = (event: ResourceEvent) => handleEvent(event, liveDeps());
export const isComplete = (event: ResourceEvent) => checkComplete(event, liveDeps());
