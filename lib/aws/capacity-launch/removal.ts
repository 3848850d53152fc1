import { INSTANCE_ID } from '../../facts/instances.ts';
import { RESOURCE_TAG_KEY } from '../tags.ts';
import {
  describeInstance,
  type HandlerDeps,
  type OnEventResponse,
  type ResourceEvent,
  stackRefOf,
  terminateInstance,
} from './hosts.ts';
import { type StackTag, unendedInstances } from './launch.ts';
import { LaunchProps } from './props.ts';
import { keepsResource, readStanding } from './standing.ts';

/**
 * Delete: end the resource's host and everything else it may have launched. A Delete whose
 * physical id is not an instance id comes after a cancelled create, with an id CloudFormation
 * generated (aws-cloudformation/cloudformation-coverage-roadmap#1814), while the cancelled
 * launch may still be running: every instance tagged for this stack and this logical resource,
 * of any generation, is terminated. Only when the stack keeps the resource (the cleanup after a
 * replacement or a rollback) is the host it now records spared.
 */

interface Sweep {
  readonly tags: readonly StackTag[];
  /** The host the stack keeps for this resource, if any. */
  readonly keep?: string;
}

function tagsOf(event: ResourceEvent): StackTag[] {
  const props = event.ResourceProperties;
  const key = props[LaunchProps.stackTagKey];
  const value = props[LaunchProps.stackTagValue];
  if (typeof key !== 'string' || key === '' || typeof value !== 'string' || value === '') {
    throw new Error(
      `CapacityLaunch: the Delete request has no ${LaunchProps.stackTagKey}/${LaunchProps.stackTagValue} (got ${JSON.stringify(key)}, ${JSON.stringify(value)})`,
    );
  }
  return [
    { key, value },
    { key: RESOURCE_TAG_KEY, value: stackRefOf(event).logicalResourceId },
  ];
}

async function sweepOf(event: ResourceEvent, deps: HandlerDeps): Promise<Sweep> {
  const tags = tagsOf(event);
  const standing = await readStanding(deps.cfn, stackRefOf(event));
  const recorded = standing.physicalId;
  const keep =
    keepsResource(standing.stackStatus) &&
    recorded !== undefined &&
    recorded !== event.PhysicalResourceId &&
    INSTANCE_ID.test(recorded)
      ? recorded
      : undefined;
  return { tags, keep };
}

/** The resource's instances that are not terminated yet, but the kept one. */
async function leftOver(sweep: Sweep, deps: HandlerDeps) {
  const found = await unendedInstances(deps.ec2, ...sweep.tags);
  return found.filter((i) => i.InstanceId !== sweep.keep);
}

/** Asks EC2 to end each one that is not already on its way. */
async function endAll(sweep: Sweep, deps: HandlerDeps): Promise<number> {
  const left = await leftOver(sweep, deps);
  for (const instance of left) {
    const id = instance.InstanceId ?? '';
    if (!INSTANCE_ID.test(id) || instance.State?.Name === 'shutting-down') continue;
    deps.log?.(`terminating ${id} (${instance.State?.Name}): tagged for this resource, which is deleted`);
    await terminateInstance(id, deps);
  }
  return left.length;
}

/** onEvent for Delete. */
export async function startRemoval(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
  const physicalId = event.PhysicalResourceId ?? '';
  if (INSTANCE_ID.test(physicalId)) {
    await terminateInstance(physicalId, deps);
  } else {
    deps.log?.(
      `${physicalId} is not an instance id (a cancelled or failed create): ending every instance tagged for this resource`,
    );
  }
  const sweep = await sweepOf(event, deps);
  if (sweep.keep !== undefined) deps.log?.(`the stack keeps ${sweep.keep} for this resource`);
  await endAll(sweep, deps);
  return { PhysicalResourceId: physicalId };
}

/** isComplete for Delete: done when the host and every other instance of the resource are terminated. */
export async function removalComplete(event: ResourceEvent, deps: HandlerDeps): Promise<boolean> {
  const physicalId = event.PhysicalResourceId ?? '';
  if (INSTANCE_ID.test(physicalId)) {
    const instance = await describeInstance(deps.ec2, physicalId);
    if (instance !== undefined && instance.State?.Name !== 'terminated') return false;
  }
  // Asked again on every poll: a cancelled launch may have started one since.
  return (await endAll(await sweepOf(event, deps), deps)) === 0;
}
