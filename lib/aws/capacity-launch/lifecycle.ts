import type { Instance } from '@aws-sdk/client-ec2';
import { INSTANCE_ID } from '../../facts/instances.ts';
import {
  describeInstance,
  type HandlerDeps,
  hostResponse,
  type LaunchData,
  launchIfStanding,
  noHostData,
  type OnEventResponse,
  type ResourceEvent,
  stackRefOf,
  terminateAllBut,
  terminateInstance,
} from './hosts.ts';
import { instancesByClientToken, type LaunchRequest, liveHosts, requestClientTokens } from './launch.ts';
import { LaunchProps } from './props.ts';
import { attemptLogAttribute, isReplacement, launchRequestOf } from './request.ts';
import { launchVerdict, readStanding } from './standing.ts';

/** What isComplete answers; the framework merges Data over onEvent's. */
export interface IsCompleteResponse {
  readonly IsComplete: boolean;
  /** Set when a replacement completes: the new instance (the framework passes it to CloudFormation). */
  readonly PhysicalResourceId?: string;
  /** A replacement's whole Data; otherwise only what onEvent could not know yet (the private IP). */
  readonly Data?: Partial<LaunchData>;
}

/**
 * A live instance of this resource and generation, launched by an earlier call (a duplicated or
 * retried Create, a launch whose reply was lost): adopted instead of launching another. Should
 * there be more than one, the oldest is kept and the others are terminated: the lab is one host.
 */
async function adoptLiveHost(request: LaunchRequest, deps: HandlerDeps): Promise<Instance | undefined> {
  const [host, ...extra] = await liveHosts(
    deps.ec2,
    request.stackTag,
    request.resourceTag,
    request.generationTag,
  );
  if (host === undefined) return undefined;
  deps.log?.(
    `adopting ${host.InstanceId}: it already carries this stack's tag and generation ${request.generationTag.value}`,
  );
  await terminateAllBut(extra, undefined, deps, 'a duplicate host of the same generation');
  return host;
}

/**
 * Launches for a Create, or for an Update whose host is gone: only while the request stands
 * (standing.ts); a rollback answers without a host, a cancelled or superseded request fails.
 */
export async function launch(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
  const type = event.RequestType === 'Create' ? 'Create' : 'Update';
  const standing = await readStanding(deps.cfn, stackRefOf(event));
  const verdict = launchVerdict(type, standing);
  const mark = standing.resourceSince;
  if (!verdict.launch) {
    if (verdict.rollingBack && type === 'Update') {
      const id = event.PhysicalResourceId ?? '';
      deps.log?.(`not relaunching: ${verdict.why}`);
      await endEveryHost(launchRequestOf(event, deps), deps, verdict.why);
      return { PhysicalResourceId: id, Data: noHostData(id, verdict.why), NoHost: true };
    }
    throw new Error(`CapacityLaunch: launching nothing: ${verdict.why}`);
  }
  const request = launchRequestOf(event, deps);
  const adopted = await adoptLiveHost(request, deps);
  if (adopted) {
    const { InstanceId: id, InstanceType: instanceType, Placement } = adopted;
    return {
      ...hostResponse(
        adopted,
        `${instanceType}: adopted ${id} in ${Placement?.AvailabilityZone}, launched for this generation before`,
      ),
      LaunchMark: mark,
      LaunchedInstance: id,
    };
  }
  const result = await launchIfStanding(request, event, mark, deps);
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
    LaunchMark: mark,
    LaunchedInstance: result.instanceId,
  };
}

/**
 * The first half of a replacement: end the old host. The new one is launched by `isComplete` once
 * the old one is `terminated`, so that both never run at once: the account's vCPU quota needs room
 * for one host (48 vCPUs for a g6.12xlarge), not two. A rollback ends the forward host the same way
 * and launches nothing.
 */
async function startReplacement(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
  const current = event.PhysicalResourceId ?? '';
  const standing = await readStanding(deps.cfn, stackRefOf(event));
  const verdict = launchVerdict('Update', standing);
  if (!verdict.launch && !verdict.rollingBack) {
    throw new Error(`CapacityLaunch: replacing nothing: ${verdict.why}`);
  }
  if (INSTANCE_ID.test(current)) {
    deps.log?.(
      `launch inputs changed: terminating ${current} first, then launching its replacement once it is terminated (one host at a time fits the vCPU quota)`,
    );
    await terminateInstance(current, deps);
  } else {
    deps.log?.(`launch inputs changed; ${current} is not an instance: launching the replacement`);
  }
  return { PhysicalResourceId: current, LaunchMark: standing.resourceSince };
}

export async function update(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
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
  const advice = event.ResourceProperties[LaunchProps.relaunchAdvice];
  if (typeof advice === 'string' && advice !== '') {
    // A WaitCondition waits for each generation's host, once: a host launched under the same
    // generation would run with nothing waiting for its bootstrap (docs/facts.md §2.6). A rollback
    // still goes through `launch`, which answers it without a host.
    const verdict = launchVerdict('Update', await readStanding(deps.cfn, stackRefOf(event)));
    if (verdict.launch) {
      throw new Error(
        `CapacityLaunch: ${current} is ${state ?? 'gone'} (ended by its lifetime guard or by hand), and this update keeps its generation, whose WaitCondition has already completed: a host launched now would run with nothing waiting for its bootstrap. ${advice}`,
      );
    }
  }
  deps.log?.(`${current} is ${state ?? 'gone'}: launching a new instance`);
  return launch(event, deps);
}

/** Running: done; pending: wait; anything else: fail with EC2's reason. */
export type HostState = (instance: Instance | undefined, instanceId: string) => 'wait' | 'running';

/**
 * The second half of a replacement, one step per call: wait until the old host is `terminated`,
 * then launch (or find what an earlier call of this request launched, by its client tokens, or a
 * live host of the new generation), then wait until the new host runs. Completes with the new
 * instance as physical id, so CloudFormation then sends a Delete for the old one, which is gone.
 * Every step first asks whether the request still stands: a superseded one ends what it launched.
 */
export async function continueReplacement(
  event: ResourceEvent,
  deps: HandlerDeps,
  hostState: HostState,
): Promise<IsCompleteResponse> {
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
  const request = launchRequestOf(event, deps);
  const verdict = launchVerdict('Update', await readStanding(deps.cfn, stackRefOf(event)), event.LaunchMark);
  const launched = await instancesByClientToken(deps.ec2, requestClientTokens(request));
  if (!verdict.launch) {
    await terminateAllBut(
      launched.filter((i) => i.State?.Name !== 'terminated'),
      undefined,
      deps,
      `launched by this request, but ${verdict.why}`,
    );
    if (!verdict.rollingBack) throw new Error(`CapacityLaunch: replacing nothing: ${verdict.why}`);
    deps.log?.(`not relaunching: ${verdict.why}`);
    await endEveryHost(request, deps, verdict.why);
    return { IsComplete: true, PhysicalResourceId: old, Data: noHostData(old, verdict.why) };
  }
  // Oldest first: a host of this request that died at start fails the request with EC2's reason.
  const host = launched[0] ?? (await adoptLiveHost(request, deps));
  if (host === undefined) {
    const result = await launchIfStanding(request, event, event.LaunchMark, deps);
    deps.log?.(`replacement of ${old}: launched ${result.instanceId}; waiting for it to run`);
    return { IsComplete: false };
  }
  const id = host.InstanceId ?? '';
  if (hostState(host, id) === 'wait') return { IsComplete: false };
  await endOtherHosts(request, id, deps);
  const { Data } = hostResponse(
    host,
    `${host.InstanceType}: ${id} in ${host.Placement?.AvailabilityZone} replaced ${old} (terminated first; every attempt is in the launch function's log)`,
  );
  return { IsComplete: true, PhysicalResourceId: id, Data };
}

/**
 * A rollback leaves the resource without a host: whatever a cancelled forward request of it
 * launched (its waiter may be gone) is ended too.
 */
async function endEveryHost(request: LaunchRequest, deps: HandlerDeps, why: string): Promise<void> {
  if (request.resourceTag === undefined) return;
  const live = await liveHosts(deps.ec2, request.stackTag, request.resourceTag);
  await terminateAllBut(live, undefined, deps, why);
}

/** The resource holds one host: any other live one of it (a duplicate, of any generation) is ended. */
async function endOtherHosts(request: LaunchRequest, keep: string, deps: HandlerDeps): Promise<void> {
  if (request.resourceTag === undefined) return;
  const live = await liveHosts(deps.ec2, request.stackTag, request.resourceTag);
  await terminateAllBut(live, keep, deps, `a second host of this resource beside ${keep}`);
}

/**
 * isComplete of a Create, or of an Update that kept or relaunched the host: while the host this
 * request launched is not running yet, a cancelled or superseded request ends it; once it runs,
 * any duplicate of the resource is ended.
 */
export async function hostComplete(
  event: ResourceEvent,
  deps: HandlerDeps,
  hostState: HostState,
): Promise<IsCompleteResponse> {
  // A rollback that found the host gone answered without one: there is nothing to wait for.
  if (event.NoHost) return { IsComplete: true };
  const instanceId = event.PhysicalResourceId ?? '';
  const ours = event.LaunchedInstance;
  if (ours !== undefined && INSTANCE_ID.test(ours)) {
    const type = event.RequestType === 'Create' ? 'Create' : 'Update';
    const verdict = launchVerdict(type, await readStanding(deps.cfn, stackRefOf(event)), event.LaunchMark);
    if (!verdict.launch) {
      deps.log?.(`${verdict.why}: terminating ${ours}, which this request launched`);
      await terminateInstance(ours, deps);
      throw new Error(`CapacityLaunch: ${verdict.why}; terminated ${ours}`);
    }
  }
  const instance = await describeInstance(deps.ec2, instanceId);
  if (hostState(instance, instanceId) !== 'running') return { IsComplete: false };
  if (ours !== undefined) await endOtherHosts(launchRequestOf(event, deps), instanceId, deps);
  // The Provider framework merges this Data over onEvent's (aws-cdk-lib custom-resources
  // provider-framework/runtime/framework.js, isComplete: `Data: {...event.Data, ...isCompleteResult.Data}`).
  return { IsComplete: true, Data: { PrivateIpAddress: instance?.PrivateIpAddress ?? '' } };
}
