import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { EC2Client, type Instance } from '@aws-sdk/client-ec2';
import type { HandlerDeps, OnEventResponse, ResourceEvent } from './hosts.ts';
import { continueReplacement, hostComplete, type IsCompleteResponse, launch, update } from './lifecycle.ts';
import { withCappedReason } from './reason.ts';
import { removalComplete, startRemoval } from './removal.ts';
import { isReplacement } from './request.ts';

/**
 * The CapacityLaunch handler: `onEvent` and `isComplete` of the Provider framework. The launch
 * itself is in launch.ts, the request in request.ts, create/update/replace in lifecycle.ts, delete
 * in removal.ts, and whether a request still stands in standing.ts.
 */

export type { HandlerDeps, LaunchData, OnEventResponse, ResourceEvent } from './hosts.ts';
export type { IsCompleteResponse } from './lifecycle.ts';
export {
  ATTEMPT_LOG_LIMIT,
  attemptLogAttribute,
  isReplacement,
  launchInputsChanged,
  parseLaunchRequest,
} from './request.ts';

/** `onEvent` of the Provider framework: launch, keep or replace, terminate. */
export async function handleEvent(event: ResourceEvent, deps: HandlerDeps): Promise<OnEventResponse> {
  switch (event.RequestType) {
    case 'Create':
      return launch(event, deps);
    case 'Update':
      return update(event, deps);
    case 'Delete':
      return startRemoval(event, deps);
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
export function hostState(instance: Instance | undefined, instanceId: string): 'wait' | 'running' {
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

/** `isComplete` of the Provider framework: running after Create/Update, all terminated after Delete. */
export async function checkComplete(event: ResourceEvent, deps: HandlerDeps): Promise<IsCompleteResponse> {
  if (event.RequestType === 'Delete') return { IsComplete: await removalComplete(event, deps) };
  if (isReplacement(event)) return continueReplacement(event, deps, hostState);
  return hostComplete(event, deps, hostState);
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
    cfn: new CloudFormationClient({ requestHandler: { ...EC2_REQUEST_TIMEOUTS } }),
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
