import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import {
  DescribeInstancesCommand,
  type EC2Client,
  type Instance,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { INSTANCE_ID, isInstanceGone } from '../../facts/instances.ts';
import {
  errorFacts,
  instancesByClientToken,
  type LaunchRequest,
  launchWithFallback,
  requestClientTokens,
} from './launch.ts';
import type { LaunchAttributes } from './props.ts';
import { launchVerdict, readStanding, type StackRef } from './standing.ts';

/** The part of the Provider framework's event this handler reads. */
export interface ResourceEvent {
  readonly RequestType: 'Create' | 'Update' | 'Delete';
  /** Unique per CloudFormation operation on the resource; the launch's client tokens derive from it. */
  readonly RequestId?: string;
  /** The stack's ARN; CloudFormation sends it with every request. */
  readonly StackId?: string;
  /** The resource's name in the template; it tags what the resource launches. */
  readonly LogicalResourceId?: string;
  readonly ResourceProperties: Record<string, unknown>;
  readonly OldResourceProperties?: Record<string, unknown>;
  readonly PhysicalResourceId?: string;
  /**
   * Set by onEvent and handed to every isComplete call of the same request (the Provider
   * framework starts its waiter with `{...request, ...onEventResult}`: aws-cdk-lib 2.276.0,
   * custom-resources/lib/provider-framework/runtime/framework.js, `createResponseEvent`): the
   * resource's status time when this request began, so a newer request on it can be told apart.
   */
  readonly LaunchMark?: string;
  /** Set by onEvent: the instance this request launched (or adopted), which it ends if superseded. */
  readonly LaunchedInstance?: string;
  /** Set by onEvent when a rollback answered without a host: isComplete has nothing to wait for. */
  readonly NoHost?: boolean;
}

export type LaunchData = Record<(typeof LaunchAttributes)[keyof typeof LaunchAttributes], string>;

export interface OnEventResponse {
  readonly PhysicalResourceId: string;
  readonly Data?: LaunchData;
  /** Passed on to isComplete by the framework (see ResourceEvent), never to CloudFormation. */
  readonly LaunchMark?: string;
  readonly LaunchedInstance?: string;
  readonly NoHost?: boolean;
}

export interface HandlerDeps {
  /** For RunInstances, its offerings and token lookups: built with `maxAttempts: 1`. */
  readonly launchEc2: EC2Client;
  /** For DescribeInstances and TerminateInstances: the SDK's own retries are welcome there. */
  readonly ec2: EC2Client;
  /** For the stack's and the resource's status (DescribeStacks, DescribeStackResource). */
  readonly cfn: CloudFormationClient;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly log?: (line: string) => void;
}

/** The stack and resource the event names; CloudFormation always sends both. */
export function stackRefOf(event: ResourceEvent): StackRef {
  const { StackId: stackId, LogicalResourceId: logicalResourceId } = event;
  if (!stackId || !logicalResourceId) {
    throw new Error(
      `CapacityLaunch: the ${event.RequestType} request has no StackId or LogicalResourceId (got ${JSON.stringify(stackId)}, ${JSON.stringify(logicalResourceId)}); CloudFormation sends both`,
    );
  }
  return { stackId, logicalResourceId };
}

/** The instance, or undefined when EC2 does not know the id. */
export async function describeInstance(ec2: EC2Client, instanceId: string): Promise<Instance | undefined> {
  try {
    const answer = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
    return answer.Reservations?.[0]?.Instances?.[0];
  } catch (err) {
    if (isInstanceGone(err)) return undefined;
    throw err;
  }
}

/** Terminates; an instance EC2 no longer knows counts as terminated. */
export async function terminateInstance(instanceId: string, deps: HandlerDeps): Promise<void> {
  try {
    await deps.ec2.send(new TerminateInstancesCommand({ InstanceIds: [instanceId] }));
  } catch (err) {
    if (!isInstanceGone(err)) throw err;
    deps.log?.(`${instanceId}: ${errorFacts(err).code}, counted as terminated`);
  }
}

export function hostResponse(instance: Instance, attemptLog: string): OnEventResponse {
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

/** The attributes of a resource that holds no host (a rollback launches none). */
export function noHostData(physicalId: string, why: string): LaunchData {
  return {
    InstanceId: physicalId,
    AvailabilityZone: 'none',
    InstanceType: 'none',
    AttemptLog: `no host: ${why}`,
    PrivateIpAddress: 'none',
  };
}

/** How often, and how far apart, a new launch is looked up until DescribeInstances lists it. */
export const VISIBILITY_LOOKUPS = 8;
export const VISIBILITY_DELAY_MS = 5000;

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Waits until the request's client-token lookup lists the new instance. DescribeInstances is
 * eventually consistent, and a later call of the same request finds its launch only by that
 * lookup; one that saw nothing would launch again, possibly in an AZ that had no capacity a
 * moment ago. When the instance stays unlisted, it is terminated (by id, which needs no listing)
 * and the request fails: better no host than one nobody tracks.
 */
export async function awaitListed(request: LaunchRequest, instanceId: string, deps: HandlerDeps) {
  const tokens = requestClientTokens(request);
  for (let lookup = 1; lookup <= VISIBILITY_LOOKUPS; lookup++) {
    const found = await instancesByClientToken(deps.ec2, tokens);
    if (found.some((i) => i.InstanceId === instanceId)) return;
    await (deps.sleep ?? defaultSleep)(VISIBILITY_DELAY_MS);
  }
  await terminateInstance(instanceId, deps);
  throw new Error(
    `CapacityLaunch: launched ${instanceId}, but DescribeInstances did not list it by its client token within ${(VISIBILITY_LOOKUPS * VISIBILITY_DELAY_MS) / 1000}s; terminated it rather than risk a second launch. Deploy again.`,
  );
}

/**
 * Launches for a request that still stands, and checks again right after RunInstances: when
 * CloudFormation cancelled or superseded the request meanwhile, the new instance is terminated
 * at once and the request fails (CloudFormation ignores that answer; nothing is left running).
 */
export async function launchIfStanding(
  request: LaunchRequest,
  event: ResourceEvent,
  mark: string | undefined,
  deps: HandlerDeps,
) {
  const result = await launchWithFallback(request, {
    ec2: deps.launchEc2,
    sleep: deps.sleep,
    log: deps.log,
  });
  const after = launchVerdict(
    event.RequestType === 'Create' ? 'Create' : 'Update',
    await readStanding(deps.cfn, stackRefOf(event)),
    mark,
  );
  if (!after.launch) {
    deps.log?.(`launched ${result.instanceId}, but ${after.why}: terminating it`);
    await terminateInstance(result.instanceId, deps);
    throw new Error(`CapacityLaunch: launched ${result.instanceId}, but ${after.why}; terminated it`);
  }
  await awaitListed(request, result.instanceId, deps);
  return result;
}

/** Ends every instance but `keep`; used for duplicates of a resource's host. */
export async function terminateAllBut(
  instances: readonly Instance[],
  keep: string | undefined,
  deps: HandlerDeps,
  why: string,
): Promise<string[]> {
  const ids = instances.map((i) => i.InstanceId ?? '').filter((id) => INSTANCE_ID.test(id) && id !== keep);
  for (const id of ids) {
    deps.log?.(`terminating ${id}: ${why}`);
    await terminateInstance(id, deps);
  }
  return ids;
}
