import {
  type CloudFormationClient,
  DescribeStackResourceCommand,
  DescribeStacksCommand,
} from '@aws-sdk/client-cloudformation';
import {
  DescribeInstancesCommand,
  DescribeInstanceTypeOfferingsCommand,
  type DescribeInstanceTypeOfferingsCommandInput,
  type EC2Client,
  type Instance,
  RunInstancesCommand,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import type { AwsClientStub } from 'aws-sdk-client-mock';
import { expect } from 'vitest';
import { type Answer, LOGICAL_ID, type ProviderSim, type Request, request } from './cfn-sim.ts';
import type { FakeCloudFormation } from './fake-cfn.ts';
import type { FakeEc2 } from './fake-ec2.ts';

/**
 * What the capacity-launch handler tests share: the resource properties as CloudFormation delivers
 * them, the mocked CloudFormation reads wired to a FakeCloudFormation, the offerings answer, and the
 * instance shapes DescribeInstances returns.
 */

export const LAB_AZS = ['us-west-2a', 'us-west-2b'];

/** The CapacityLaunch properties as CloudFormation delivers them (scalars become strings). */
export function launchProps(
  azs: readonly string[] = LAB_AZS,
  types: readonly string[] = ['g6.12xlarge'],
): Record<string, unknown> & { Generation: string } {
  return {
    ServiceToken: 'arn:aws:lambda:us-west-2:111122223333:function:framework',
    LaunchTemplateId: 'lt-0123456789abcdef0',
    LaunchTemplateVersion: '1',
    Generation: '1',
    Subnets: azs.map((az) => ({ SubnetId: `subnet-${az.slice(-1)}`, AvailabilityZone: az })),
    SecurityGroupId: 'sg-0123',
    InstanceTypes: [...types],
    PreferredAzs: [],
    VcpusNeeded: '48',
    StackTagKey: 'llm-gateway-lab:stack',
    StackTagValue: 'LlmGatewayLab',
  };
}

/** DescribeStacks and DescribeStackResource answered by the fake stack. */
export function wireStack(
  cfnMock: AwsClientStub<CloudFormationClient>,
  stack: () => FakeCloudFormation,
): void {
  cfnMock.on(DescribeStacksCommand).callsFake((input) => stack().describeStacks(input));
  cfnMock.on(DescribeStackResourceCommand).callsFake((input) => stack().describeStackResource(input));
}

/** Every asked-for type offered in each of `azs`. */
export function offerEverywhere(ec2Mock: AwsClientStub<EC2Client>, azs: readonly string[] = LAB_AZS): void {
  ec2Mock
    .on(DescribeInstanceTypeOfferingsCommand)
    .callsFake((input: DescribeInstanceTypeOfferingsCommandInput) => ({
      InstanceTypeOfferings: azs.map((az) => ({
        InstanceType: input.Filters?.find((f) => f.Name === 'instance-type')?.Values?.[0] ?? 'g6.12xlarge',
        LocationType: 'availability-zone',
        Location: az,
      })),
    }));
}

/** DescribeInstances' answer listing one instance. */
export function described(instance: Instance) {
  return { Reservations: [{ Instances: [instance] }] };
}

/** An instance that EC2 ended at start, with the state reason EC2 gives. */
export function endedAtStart(instanceId: string, code: string, message: string): Instance {
  return {
    InstanceId: instanceId,
    InstanceType: 'g6.12xlarge',
    Placement: { AvailabilityZone: 'us-west-2a' },
    State: { Name: 'terminated', Code: 48 },
    StateReason: { Code: code, Message: message },
  };
}

/** DescribeInstances, RunInstances (held when a test asks) and TerminateInstances answered by the fake EC2. */
export function wireEc2(ec2Mock: AwsClientStub<EC2Client>, ec2: () => FakeEc2): void {
  ec2Mock.on(DescribeInstancesCommand).callsFake((input) => ec2().describe(input));
  ec2Mock.on(RunInstancesCommand).callsFake((input) => ec2().runAsync(input));
  ec2Mock.on(TerminateInstancesCommand).callsFake((input) => ec2().terminate(input));
}

/** The simulated framework and stack a CloudFormation sequence drives. */
export interface Sequence {
  readonly sim: ProviderSim;
  readonly cfn: FakeCloudFormation;
}

/** The stack created with `props`: its host running, the resource and the stack CREATE_COMPLETE. */
export async function createdStack({ sim, cfn }: Sequence, props: Record<string, unknown>): Promise<string> {
  cfn.setResource(LOGICAL_ID, 'CREATE_IN_PROGRESS');
  const answer = await sim.run(request('Create', props));
  expect(answer.status).toBe('SUCCESS');
  cfn.setResource(LOGICAL_ID, 'CREATE_COMPLETE', answer.physicalId);
  cfn.setStack('CREATE_COMPLETE');
  return answer.physicalId;
}

/** A deploy starts updating the launch of host `current` from `before` to `after`; its request, still waiting. */
export async function forwardUpdate(
  { sim, cfn }: Sequence,
  current: string,
  after: Record<string, unknown>,
  before: Record<string, unknown>,
): Promise<Request> {
  cfn.setStack('UPDATE_IN_PROGRESS');
  cfn.setResource(LOGICAL_ID, 'UPDATE_IN_PROGRESS');
  return sim.start(request('Update', after, { PhysicalResourceId: current, OldResourceProperties: before }));
}

/**
 * A sibling failed during that update: CloudFormation marks the launch UPDATE_FAILED, rolls the
 * stack back and sends the launch its rollback Update (`after` back to `before`), run to its answer.
 */
export async function rollbackUpdate(
  { sim, cfn }: Sequence,
  current: string,
  before: Record<string, unknown>,
  after: Record<string, unknown>,
): Promise<Answer> {
  cfn.setResource(LOGICAL_ID, 'UPDATE_FAILED');
  cfn.setStack('UPDATE_ROLLBACK_IN_PROGRESS');
  cfn.setResource(LOGICAL_ID, 'UPDATE_IN_PROGRESS');
  return sim.run(request('Update', before, { PhysicalResourceId: current, OldResourceProperties: after }));
}
