import { DescribeStacksCommand, type Output } from '@aws-sdk/client-cloudformation';
import { DescribeInstancesCommand } from '@aws-sdk/client-ec2';
import { isInstanceGone } from '../aws/instances.ts';
import { type ControlContext, controlError } from './context.ts';

/** What the study commands need of a deployed lab stack (its outputs, lib/aws/lab-stack.ts). */
export interface Testbed {
  readonly stackName: string;
  readonly instanceId: string;
  readonly bucket: string;
  /** Key prefix of the results, `<stack>/`: where the host syncs. */
  readonly prefix: string;
}

/** Output names of LabStack this module reads. */
export const STACK_OUTPUTS = {
  instanceId: 'InstanceId',
  bucket: 'ResultsBucketName',
  location: 'ResultsLocation',
} as const;

function outputValue(outputs: readonly Output[], key: string): string | undefined {
  const value = outputs.find((output) => output.OutputKey === key)?.OutputValue;
  return value ? value : undefined;
}

/** Reads the stack's outputs; a stack without an instance or bucket output is explained. */
export async function describeTestbed(ctx: ControlContext): Promise<Testbed> {
  const response = await ctx.errors.awsCall('cloudformation:DescribeStacks', ctx, () =>
    ctx.clients.cloudFormation.send(new DescribeStacksCommand({ StackName: ctx.stackName })),
  );
  const stack = response.Stacks?.[0];
  if (!stack) throw ctx.errors.stackNotFound(ctx);
  const stackName = stack.StackName ?? ctx.stackName;
  const status = stack.StackStatus ?? 'UNKNOWN';
  const outputs = stack.Outputs ?? [];
  const instanceId = outputValue(outputs, STACK_OUTPUTS.instanceId);
  const bucket = outputValue(outputs, STACK_OUTPUTS.bucket);
  if (!instanceId || !bucket) {
    const missing = [
      instanceId ? undefined : STACK_OUTPUTS.instanceId,
      bucket ? undefined : STACK_OUTPUTS.bucket,
    ].filter(Boolean);
    const why = status.endsWith('_IN_PROGRESS')
      ? `it is ${status}: wait until cdk deploy has finished`
      : `it is ${status}: either it was not deployed by this tool's CDK app, or the launch failed (the stack events and the LaunchAttempts output say why; deploy again with npx cdk deploy)`;
    throw controlError(
      'not-deployed',
      `Stack ${stackName} in ${ctx.region} has no ${missing.join(' or ')} output, so there is no lab testbed to talk to: ${why}.`,
    );
  }
  const location = outputValue(outputs, STACK_OUTPUTS.location);
  const fromLocation = location && /^s3:\/\/[^/]+\/(.+\/)$/.exec(location)?.[1];
  return { stackName, instanceId, bucket, prefix: fromLocation || `${stackName}/` };
}

/** The EC2 state of the instance: `running`, `pending`, `stopped`, `terminated`, ... or `gone`. */
export async function instanceState(ctx: ControlContext, instanceId: string): Promise<string> {
  return (await describeInstance(ctx, instanceId)).state;
}

/** The instance's state (`gone` when EC2 no longer knows it) and its launch time. */
export async function describeInstance(
  ctx: ControlContext,
  instanceId: string,
): Promise<{ state: string; launchedAt?: Date }> {
  try {
    const response = await ctx.clients.ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
    const instance = response.Reservations?.flatMap((r) => r.Instances ?? [])[0];
    return {
      state: instance?.State?.Name ?? 'gone',
      ...(instance?.LaunchTime ? { launchedAt: instance.LaunchTime } : {}),
    };
  } catch (error) {
    // Terminated instances drop out of DescribeInstances after a while.
    if (isInstanceGone(error)) return { state: 'gone' };
    throw ctx.errors.explainAwsError(error, 'ec2:DescribeInstances', ctx);
  }
}

/** Says why an instance that is not running cannot take a command. */
export function notRunningReason(instanceId: string, state: string): string {
  if (state === 'pending')
    return `instance ${instanceId} is still starting (pending): wait a minute and retry`;
  if (state === 'gone' || state === 'terminated' || state === 'shutting-down') {
    return `instance ${instanceId} is ${state === 'gone' ? 'gone' : state}: the lifetime guard (instance.maxLifetimeHours), runner.terminateWhenDone or a teardown ended it`;
  }
  return `instance ${instanceId} is ${state}`;
}
