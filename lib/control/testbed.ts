import { DescribeStacksCommand, type Output } from '@aws-sdk/client-cloudformation';
import { DescribeInstancesCommand } from '@aws-sdk/client-ec2';
import { cellOfOutput, cellOutputKey } from '../aws/cell-outputs.ts';
import { isInstanceGone } from '../facts/instances.ts';
import { type ControlContext, controlError } from './context.ts';

/** What the study commands need of a deployed lab stack (its outputs, lib/aws/lab-stack.ts). */
export interface Testbed {
  readonly stackName: string;
  readonly instanceId: string;
  readonly bucket: string;
  /** Key prefix of the results, `<stack>/` (a network-lab cell: `<stack>/<cell>/`): where the host syncs. */
  readonly prefix: string;
  /** The network-lab cell whose host this is; absent for the LLM-gateway lab's GPU host. */
  readonly cell?: string;
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

/** `s3://<bucket>/<prefix>/` -> bucket and prefix. */
function parseLocation(location: string | undefined): { bucket: string; prefix: string } | undefined {
  const match = location ? /^s3:\/\/([^/]+)\/(.+\/)$/.exec(location) : null;
  return match ? { bucket: match[1], prefix: match[2] } : undefined;
}

/** The cells of a network-lab stack, named by their outputs (lib/aws/cell-outputs.ts). */
export function stackCells(outputs: readonly Output[]): string[] {
  const cells = outputs.flatMap((o) => {
    const cell = cellOfOutput(o.OutputKey, o.Description);
    return cell !== undefined && o.OutputKey === cellOutputKey(cell, STACK_OUTPUTS.instanceId) ? [cell] : [];
  });
  return [...new Set(cells)];
}

/** Why there is nothing to talk to, from the stack's status. */
function notDeployedWhy(status: string): string {
  return status.endsWith('_IN_PROGRESS')
    ? `it is ${status}: wait until cdk deploy has finished`
    : `it is ${status}: either it was not deployed by this tool's CDK app, or the launch failed (the stack events and the LaunchAttempts output say why; deploy again with npx cdk deploy)`;
}

/**
 * Reads the stack's outputs; a stack without an instance or bucket output is explained. With
 * `ctx.cell`, the host and results prefix of that network-lab cell (`Cell<Name>...` outputs).
 */
export async function describeTestbed(ctx: ControlContext): Promise<Testbed> {
  const response = await ctx.errors.awsCall('cloudformation:DescribeStacks', ctx, () =>
    ctx.clients.cloudFormation.send(new DescribeStacksCommand({ StackName: ctx.stackName })),
  );
  const stack = response.Stacks?.[0];
  if (!stack) throw ctx.errors.stackNotFound(ctx);
  const stackName = stack.StackName ?? ctx.stackName;
  const status = stack.StackStatus ?? 'UNKNOWN';
  const outputs = stack.Outputs ?? [];
  const cells = stackCells(outputs);
  if (ctx.cell !== undefined) return cellTestbed(ctx, ctx.cell, { stackName, status, outputs, cells });
  const instanceId = outputValue(outputs, STACK_OUTPUTS.instanceId);
  const bucket = outputValue(outputs, STACK_OUTPUTS.bucket);
  if (!instanceId && cells.length > 0) {
    throw controlError(
      'not-deployed',
      `Stack ${stackName} in ${ctx.region} is a network lab with one host per cell: name the cell with --cell (lab run, status, results; cells: ${cells.join(', ')}).`,
    );
  }
  if (!instanceId || !bucket) {
    const missing = [
      instanceId ? undefined : STACK_OUTPUTS.instanceId,
      bucket ? undefined : STACK_OUTPUTS.bucket,
    ].filter(Boolean);
    throw controlError(
      'not-deployed',
      `Stack ${stackName} in ${ctx.region} has no ${missing.join(' or ')} output, so there is no lab testbed to talk to: ${notDeployedWhy(status)}.`,
    );
  }
  const fromLocation = parseLocation(outputValue(outputs, STACK_OUTPUTS.location))?.prefix;
  return { stackName, instanceId, bucket, prefix: fromLocation ?? `${stackName}/` };
}

/** A cell's host and results: its InstanceId output, and bucket and prefix from its ResultsLocation. */
function cellTestbed(
  ctx: ControlContext,
  cell: string,
  stack: { stackName: string; status: string; outputs: readonly Output[]; cells: readonly string[] },
): Testbed {
  const { stackName, outputs, cells } = stack;
  const instanceKey = cellOutputKey(cell, STACK_OUTPUTS.instanceId);
  const locationKey = cellOutputKey(cell, STACK_OUTPUTS.location);
  const instanceId = outputValue(outputs, instanceKey);
  const location = parseLocation(outputValue(outputs, locationKey));
  if (instanceId && location) return { stackName, instanceId, ...location, cell };
  if (!cells.includes(cell)) {
    const has =
      cells.length > 0
        ? `its cells are ${cells.join(', ')}`
        : outputValue(outputs, STACK_OUTPUTS.instanceId)
          ? 'it is an LLM-gateway lab (one GPU host): leave out --cell'
          : `it has no cell outputs: ${notDeployedWhy(stack.status)}`;
    throw controlError('not-deployed', `Stack ${stackName} in ${ctx.region} has no cell ${cell}: ${has}.`);
  }
  const missing = [instanceId ? undefined : instanceKey, location ? undefined : locationKey].filter(Boolean);
  throw controlError(
    'not-deployed',
    `Stack ${stackName} in ${ctx.region} has no ${missing.join(' or ')} output for cell ${cell}: ${notDeployedWhy(stack.status)}.`,
  );
}

/** The stack, and the cell when there is one: `NetworkLab cell dp-cilium`. */
export function testbedName(testbed: Testbed): string {
  return testbed.cell === undefined ? testbed.stackName : `${testbed.stackName} cell ${testbed.cell}`;
}

/** `--stack <name>`, and `--cell <name>` for a cell: how the commands a message suggests address this testbed. */
export function testbedArgs(testbed: Testbed): string {
  return `--stack ${testbed.stackName}${testbed.cell === undefined ? '' : ` --cell ${testbed.cell}`}`;
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
