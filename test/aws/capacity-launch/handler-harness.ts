import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import {
  DescribeInstancesCommand,
  type DescribeInstancesCommandInput,
  DescribeInstanceTypeOfferingsCommand,
  EC2Client,
  type Instance,
  RunInstancesCommand,
} from '@aws-sdk/client-ec2';
import { type AwsClientStub, mockClient } from 'aws-sdk-client-mock';
import { beforeEach } from 'vitest';
import {
  checkComplete,
  type HandlerDeps,
  handleEvent,
  type ResourceEvent,
} from '../../../lib/aws/capacity-launch/handler.ts';
import { FakeCloudFormation, STACK_ID } from './fake-cfn.ts';
import { ec2Error } from './fake-ec2.ts';
import { launchProps, wireStack } from './kit.ts';

/**
 * What the handler test files share: the mocked EC2 and CloudFormation clients, the stack the
 * events arrive in, the handler's dependencies, and the constants of one lab host.
 */

export const LOGICAL_ID = 'HostLaunch';

/** The stack the events arrive in (new for each test) and what time passing does to EC2. */
export const shared: { stack: FakeCloudFormation; passTime: () => void } = {
  stack: new FakeCloudFormation(),
  passTime: () => {},
};

/** The event as CloudFormation sends it, with the stack in the state that request implies. */
function inStack(event: ResourceEvent): ResourceEvent {
  const { stack } = shared;
  const operation = event.RequestType.toUpperCase();
  const status = `${operation}_IN_PROGRESS` as 'CREATE_IN_PROGRESS' | 'UPDATE_IN_PROGRESS';
  if (stack.stackStatus !== status) stack.setStack(status);
  if (stack.statusOf(LOGICAL_ID) !== status) stack.setResource(LOGICAL_ID, status);
  return { StackId: STACK_ID, LogicalResourceId: LOGICAL_ID, ...event };
}

export const handle = (event: ResourceEvent, d: HandlerDeps) => handleEvent(inStack(event), d);
export const check = (event: ResourceEvent, d: HandlerDeps) => checkComplete(inStack(event), d);

// As CloudFormation delivers them: scalars become strings.
export const PROPS = launchProps();

export const OLD_ID = 'i-0123456789abcdef0';
export const REQUEST_ID = 'c0ffee00-1111-4222-8333-444455556666';
export const STACK_TAG = { Key: 'llm-gateway-lab:stack', Value: 'LlmGatewayLab' };
export const RESOURCE_TAG = { Key: 'llm-gateway-lab:resource', Value: 'HostLaunch' };
export const generationTag = (value: string) => ({ Key: 'llm-gateway-lab:generation', Value: value });

export function deps(): HandlerDeps {
  return {
    launchEc2: new EC2Client({ region: 'us-west-2', maxAttempts: 1 }),
    ec2: new EC2Client({ region: 'us-west-2' }),
    cfn: new CloudFormationClient({ region: 'us-west-2' }),
    // Time passes while the handler sleeps: what DescribeInstances did not list yet, it lists now.
    sleep: async () => shared.passTime(),
    log: () => {},
  };
}

/** What the mocked RunInstances calls launched, as a client-token lookup lists them. */
async function launchedByToken(ec2Mock: AwsClientStub<EC2Client>, input: DescribeInstancesCommandInput) {
  const tokens = input.Filters?.find((f) => f.Name === 'client-token')?.Values ?? [];
  const found: Instance[] = [];
  for (const call of ec2Mock.commandCalls(RunInstancesCommand)) {
    const token = (call.args[0].input as { ClientToken?: string }).ClientToken;
    if (!token || !tokens.includes(token)) continue;
    const output = await Promise.resolve(call.returnValue).catch(() => undefined);
    const id = (output as { Instances?: Instance[] } | undefined)?.Instances?.[0]?.InstanceId;
    if (id) found.push({ InstanceId: id, ClientToken: token, State: { Name: 'pending', Code: 0 } });
  }
  return { Reservations: found.map((i) => ({ Instances: [i] })) };
}

export const notFound = () =>
  ec2Error('InvalidInstanceID.NotFound', `The instance ID '${OLD_ID}' does not exist`);

/**
 * Mocks the clients for the calling file and registers its set-up: fresh mocks and stack before
 * each test, the type offered in two AZs. Each file makes its own mocks: with isolate: false the
 * last mockClient of a class is the one installed, so a mock made once here would go stale.
 */
export function useHandlerHarness(): { ec2Mock: AwsClientStub<EC2Client> } {
  const ec2Mock = mockClient(EC2Client);
  const cfnMock = mockClient(CloudFormationClient);
  beforeEach(() => {
    ec2Mock.reset();
    cfnMock.reset();
    shared.stack = new FakeCloudFormation();
    shared.passTime = () => {};
    wireStack(cfnMock, () => shared.stack);
    // No instance of the stack exists unless a test says so; a launch is listed by its client token.
    ec2Mock.on(DescribeInstancesCommand).callsFake((input) => launchedByToken(ec2Mock, input));
    ec2Mock.on(DescribeInstanceTypeOfferingsCommand).resolves({
      InstanceTypeOfferings: [
        { InstanceType: 'g6.12xlarge', LocationType: 'availability-zone', Location: 'us-west-2a' },
        { InstanceType: 'g6.12xlarge', LocationType: 'availability-zone', Location: 'us-west-2b' },
      ],
    });
  });
  return { ec2Mock };
}
