import { randomUUID } from 'node:crypto';
import {
  DescribeInstancesCommand,
  EC2Client,
  type Instance,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { INSTANCE_ID, isInstanceGone } from '../instances.ts';
import { GENERATION_TAG_KEY } from '../tags.ts';
import {
  errorFacts,
  instancesByClientToken,
  type LabSubnet,
  type LaunchRequest,
  launchWithFallback,
  liveHosts,
  type OnDemandQuota,
  requestClientTokens,
} from './launch.ts';
import { LAUNCH_INPUTS, type LaunchAttributes, LaunchProps, SubnetFields } from './props.ts';
import { withCappedReason } from './reason.ts';

/** The part of the Provider framework's event this handler reads. */
export interface ResourceEvent {
  readonly RequestType: 'Create' | 'Update' | 'Delete';
  /** Unique per CloudFormation operation on the resource; the launch's client tokens derive from it. */
  readonly RequestId?: string;
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
  /** Set when a replacement completes: the new instance (the framework passes it to CloudFormation). */
  readonly PhysicalResourceId?: string;
  /** A replacement's whole Data; otherwise only what onEvent could not know yet (the private IP). */
  readonly Data?: Partial<LaunchData>;
}

export interface HandlerDeps {
  /** For RunInstances, its offerings and token lookups: built with `maxAttempts: 1`. */
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

/** The quota the stack named, if any (the handler derives it from the type otherwise). */
function quotaOf(props: Record<string, unknown>): { quota?: OnDemandQuota } {
  const name = props[LaunchProps.quotaName];
  if (typeof name !== 'string' || name === '') return {};
  const code = props[LaunchProps.quotaCode];
  return { quota: { name, ...(typeof code === 'string' && code !== '' ? { code } : {}) } };
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
export function parseLaunchRequest(props: Record<string, unknown>, requestId: string): LaunchRequest {
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
    stackTag: { key: text(props, LaunchProps.stackTagKey), value: text(props, LaunchProps.stackTagValue) },
    generationTag: { key: GENERATION_TAG_KEY, value: text(props, LaunchProps.generation) },
    requestId,
  };
}

/** The request id the tokens derive from; an event without one (never from CloudFormation) gets a fresh one. */
function requestIdOf(event: ResourceEvent, deps: HandlerDeps): string {
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

function hostResponse(instance: Instance, attemptLog: string): OnEventResponse {
  const id = instance.InstanceId ?? '';
  return {
    PhysicalResourceId: id,
    Data: {
      InstanceId: id,
      AvailabilityZone: instance.Placement?.AvailabilityZone ?? '',
      InstanceType: instance.InstanceType ?? '',
      AttemptLog: attemptLog,
      PrivateIpAddress: instance.PrivateIpAddress ?? '',
    },
  };
}

/**
 * A live instance of this stack and generation, launched by an earlier call (a duplicated or
 * retried Create, a launch whose reply was lost): adopted instead of launching another. Should
 * there be more than one, the oldest is kept and the others are terminated: the lab is one host.
 */
async function adoptLiveHost(request: LaunchRequest, deps: HandlerDeps): Promise<Instance | undefined> {
  const [host, ...extra] = await liveHosts(deps.ec2, request.stackTag, request.generationTag);
  if (host === undefined) return undefined;
  deps.log?.(
    `adopting ${host.InstanceId}: it already carries this stack's tag and generation ${request.generationTag.value}`,
  );
  const extraIds = extra.map((i) => i.InstanceId ?? '').filter((id) => INSTANCE_ID.test(id));
  if (extraIds.length > 0) {
    deps.log?.(`terminating duplicate host(s) of the same generation: ${extraIds.join(', ')}`);
    await deps.ec2.send(new TerminateInstancesCommand({ InstanceIds: extraIds }));
  }
  return host;
}

async function launch(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
  const request = parseLaunchRequest(event.ResourceProperties, requestIdOf(event, deps));
  const adopted = await adoptLiveHost(request, deps);
  if (adopted) {
    const { InstanceId: id, InstanceType: type, Placement } = adopted;
    return hostResponse(
      adopted,
      `${type}: adopted ${id} in ${Placement?.AvailabilityZone}, launched for this generation before`,
    );
  }
  const result = await launchWithFallback(request, {
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
      // Known once isComplete sees the instance (its answer's Data is merged over this one).
      PrivateIpAddress: '',
    },
  };
}

/** Whether the event is an Update that replaces the host (its launch inputs changed). */
export function isReplacement(event: ResourceEvent): boolean {
  return (
    event.RequestType === 'Update' &&
    launchInputsChanged(event.OldResourceProperties, event.ResourceProperties)
  );
}

/**
 * The first half of a replacement: end the old host. The new one is launched by `isComplete` once
 * the old one is `terminated`, so that both never run at once: the account's vCPU quota needs room
 * for one host (48 vCPUs for a g6.12xlarge), not two.
 */
async function startReplacement(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
  const current = event.PhysicalResourceId ?? '';
  if (INSTANCE_ID.test(current)) {
    deps.log?.(
      `launch inputs changed: terminating ${current} first, then launching its replacement once it is terminated (one host at a time fits the vCPU quota)`,
    );
    await terminateInstance(current, deps);
  } else {
    deps.log?.(`launch inputs changed; ${current} is not an instance: launching the replacement`);
  }
  return { PhysicalResourceId: current };
}

async function update(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
  const current = event.PhysicalResourceId ?? '';
  if (isReplacement(event)) return startReplacement(event, deps);
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
        PrivateIpAddress: instance?.PrivateIpAddress ?? '',
      },
    };
  }
  // The lifetime guard or a person ended it: an unchanged stack still means a running lab.
  deps.log?.(`${current} is ${state ?? 'gone'}: launching a new instance`);
  return launch(event, deps);
}

/** Terminates; an instance EC2 no longer knows counts as terminated. */
async function terminateInstance(instanceId: string, deps: HandlerDeps): Promise<void> {
  try {
    await deps.ec2.send(new TerminateInstancesCommand({ InstanceIds: [instanceId] }));
  } catch (err) {
    if (!isInstanceGone(err)) throw err;
    deps.log?.(`${instanceId}: ${errorFacts(err).code}, counted as terminated`);
  }
}

async function terminate(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
  const instanceId = event.PhysicalResourceId ?? '';
  if (!INSTANCE_ID.test(instanceId)) {
    deps.log?.(`${instanceId} is not an instance id: nothing was launched, nothing to terminate`);
    return { PhysicalResourceId: instanceId };
  }
  await terminateInstance(instanceId, deps);
  return { PhysicalResourceId: instanceId };
}

/** `onEvent` of the Provider framework: launch, keep or replace, terminate. */
export async function handleEvent(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
  switch (event.RequestType) {
    case 'Create':
      return launch(event, deps);
    case 'Update':
      return update(event, deps);
    case 'Delete':
      return terminate(event, deps);
  }
}

/**
 * What a failed start means. `Client.InternalError` ("Client error on launch") on an encrypted
 * root volume is, in practice, a KMS key the launching principal may not use: the template
 * encrypts with the account's default EBS key, and when that default is a customer-managed key
 * whose policy does not let the launch function's role create grants, EC2 ends the instance at
 * once (AWS re:Post knowledge center, "kms-iam-ec2-permission").
 */
export function startFailureAdvice(code: string | undefined): string {
  if (code?.startsWith('Server.Insufficient')) {
    // EC2 can accept RunInstances and withdraw the capacity while the instance is pending.
    return '. The capacity was withdrawn after the launch; deploy again to try the Availability Zones once more';
  }
  if (code === 'Client.InternalError') {
    return (
      '. The root volume is encrypted with the default EBS key of the account and region ' +
      '(aws ec2 get-ebs-default-kms-key-id); when that is a customer-managed KMS key, its key policy must ' +
      "let the capacity launch function's role use it (kms:CreateGrant, kms:Decrypt, kms:DescribeKey, " +
      'kms:GenerateDataKeyWithoutPlaintext, kms:ReEncrypt*), or set the default back to the AWS managed key ' +
      '(aws ec2 reset-ebs-default-kms-key-id); see "The testbed on AWS" in the README'
    );
  }
  return '';
}

/** Running: done; pending: wait; anything else: fail with EC2's reason. */
function hostState(instance: Instance | undefined, instanceId: string): 'wait' | 'running' {
  const state = instance?.State?.Name;
  // Right after RunInstances, DescribeInstances may not know the id yet: wait for it.
  if (state === undefined || state === 'pending') return 'wait';
  if (state === 'running') return 'running';
  const reason = instance?.StateReason;
  throw new Error(
    `${instanceId} (${instance?.InstanceType} in ${instance?.Placement?.AvailabilityZone}) went to ` +
      `${state} instead of running: ${reason?.Code ?? 'no code'}: ${reason?.Message ?? 'no reason given'}` +
      startFailureAdvice(reason?.Code),
  );
}

/**
 * The second half of a replacement, one step per call: wait until the old host is `terminated`,
 * then launch (or find what an earlier call of this request launched, by its client tokens, or a
 * live host of the new generation), then wait until the new host runs. Completes with the new
 * instance as physical id, so CloudFormation then sends a Delete for the old one, which is gone.
 */
async function continueReplacement(event: ResourceEvent, deps: HandlerDeps): Promise<IsCompleteResponse> {
  const old = event.PhysicalResourceId ?? '';
  if (INSTANCE_ID.test(old)) {
    const instance = await describeInstance(deps.ec2, old);
    const state = instance?.State?.Name;
    if (instance !== undefined && state !== 'terminated') {
      // Terminating is idempotent; a stopped or still running host is asked again.
      if (state !== 'shutting-down') await terminateInstance(old, deps);
      deps.log?.(`waiting for ${old} to terminate (now ${state}) before launching its replacement`);
      return { IsComplete: false };
    }
  }
  const request = parseLaunchRequest(event.ResourceProperties, requestIdOf(event, deps));
  const [launched] = await instancesByClientToken(deps.ec2, requestClientTokens(request));
  const host = launched ?? (await adoptLiveHost(request, deps));
  if (host === undefined) {
    const result = await launchWithFallback(request, {
      ec2: deps.launchEc2,
      sleep: deps.sleep,
      log: deps.log,
    });
    deps.log?.(`replacement of ${old}: launched ${result.instanceId}; waiting for it to run`);
    return { IsComplete: false };
  }
  const id = host.InstanceId ?? '';
  if (hostState(host, id) === 'wait') return { IsComplete: false };
  const { Data } = hostResponse(
    host,
    `${host.InstanceType}: ${id} in ${host.Placement?.AvailabilityZone} replaced ${old} (terminated first; every attempt is in the launch function's log)`,
  );
  return { IsComplete: true, PhysicalResourceId: id, Data };
}

/** `isComplete` of the Provider framework: running after Create/Update, terminated after Delete. */
export async function checkComplete(event: ResourceEvent, deps: HandlerDeps): Promise<IsCompleteResponse> {
  const instanceId = event.PhysicalResourceId ?? '';
  if (event.RequestType === 'Delete') {
    if (!INSTANCE_ID.test(instanceId)) return { IsComplete: true };
    const instance = await describeInstance(deps.ec2, instanceId);
    return { IsComplete: instance === undefined || instance.State?.Name === 'terminated' };
  }
  if (isReplacement(event)) return continueReplacement(event, deps);
  const instance = await describeInstance(deps.ec2, instanceId);
  if (hostState(instance, instanceId) !== 'running') return { IsComplete: false };
  // The Provider framework merges this Data over onEvent's (aws-cdk-lib custom-resources
  // provider-framework/runtime/framework.js, isComplete: `Data: {...event.Data, ...isCompleteResult.Data}`).
  return { IsComplete: true, Data: { PrivateIpAddress: instance?.PrivateIpAddress ?? '' } };
}

/**
 * Every EC2 call gives up after this long: the default Node handler has no request timeout, so a
 * lost reply would otherwise hang the function until Lambda kills it, with no lookup and no reason.
 * The handler options are those of @smithy/node-http-handler (requestTimeout, connectionTimeout);
 * a timeout raises an error named `TimeoutError` (its `NodeHttpHandler.handle`).
 */
export const EC2_REQUEST_TIMEOUTS = { connectionTimeout: 5_000, requestTimeout: 30_000 } as const;

let live: HandlerDeps | undefined;

function liveDeps(): HandlerDeps {
  live ??= {
    // maxAttempts 1: the SDK would retry InsufficientInstanceCapacity (a 5xx) in the same AZ.
    launchEc2: new EC2Client({ maxAttempts: 1, requestHandler: { ...EC2_REQUEST_TIMEOUTS } }),
    ec2: new EC2Client({ requestHandler: { ...EC2_REQUEST_TIMEOUTS } }),
    log: (line) => console.log(line),
  };
  return live;
}

export const onEvent = (event: ResourceEvent) =>
  withCappedReason(() => handleEvent(event, liveDeps()), console.log);
export const isComplete = (event: ResourceEvent) =>
  withCappedReason(() => checkComplete(event, liveDeps()), console.log);
