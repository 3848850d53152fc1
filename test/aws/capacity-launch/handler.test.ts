import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import {
  DescribeInstancesCommand,
  type DescribeInstancesCommandInput,
  DescribeInstanceTypeOfferingsCommand,
  EC2Client,
  type Instance,
  RunInstancesCommand,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  ATTEMPT_LOG_LIMIT,
  attemptLogAttribute,
  checkComplete,
  type HandlerDeps,
  handleEvent,
  launchInputsChanged,
  parseLaunchRequest,
  type ResourceEvent,
  startFailureAdvice,
} from '../../../lib/aws/capacity-launch/handler.ts';
import { clientTokenFor } from '../../../lib/aws/capacity-launch/launch.ts';
import { REASON_LIMIT, withCappedReason } from '../../../lib/aws/capacity-launch/reason.ts';
import { FakeCloudFormation, STACK_ID } from './fake-cfn.ts';
import { ec2Error, FakeEc2 } from './fake-ec2.ts';
import { described, endedAtStart, launchProps, wireStack } from './kit.ts';

const ec2Mock = mockClient(EC2Client);
const cfnMock = mockClient(CloudFormationClient);
const LOGICAL_ID = 'HostLaunch';
let stack: FakeCloudFormation;
let passTime = () => {};

/** The event as CloudFormation sends it, with the stack in the state that request implies. */
function inStack(event: ResourceEvent): ResourceEvent {
  const operation = event.RequestType.toUpperCase();
  const status = `${operation}_IN_PROGRESS` as 'CREATE_IN_PROGRESS' | 'UPDATE_IN_PROGRESS';
  if (stack.stackStatus !== status) stack.setStack(status);
  if (stack.statusOf(LOGICAL_ID) !== status) stack.setResource(LOGICAL_ID, status);
  return { StackId: STACK_ID, LogicalResourceId: LOGICAL_ID, ...event };
}

const handle = (event: ResourceEvent, d: HandlerDeps) => handleEvent(inStack(event), d);
const check = (event: ResourceEvent, d: HandlerDeps) => checkComplete(inStack(event), d);

// As CloudFormation delivers them: scalars become strings.
const PROPS = launchProps();

const OLD_ID = 'i-0123456789abcdef0';
const REQUEST_ID = 'c0ffee00-1111-4222-8333-444455556666';
const STACK_TAG = { Key: 'llm-gateway-lab:stack', Value: 'LlmGatewayLab' };
const RESOURCE_TAG = { Key: 'llm-gateway-lab:resource', Value: 'HostLaunch' };
const generationTag = (value: string) => ({ Key: 'llm-gateway-lab:generation', Value: value });

function deps(): HandlerDeps {
  return {
    launchEc2: new EC2Client({ region: 'us-west-2', maxAttempts: 1 }),
    ec2: new EC2Client({ region: 'us-west-2' }),
    cfn: new CloudFormationClient({ region: 'us-west-2' }),
    // Time passes while the handler sleeps: what DescribeInstances did not list yet, it lists now.
    sleep: async () => passTime(),
    log: () => {},
  };
}

/** What the mocked RunInstances calls launched, as a client-token lookup lists them. */
async function launchedByToken(input: DescribeInstancesCommandInput) {
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

const notFound = () => ec2Error('InvalidInstanceID.NotFound', `The instance ID '${OLD_ID}' does not exist`);

beforeEach(() => {
  ec2Mock.reset();
  cfnMock.reset();
  stack = new FakeCloudFormation();
  wireStack(cfnMock, () => stack);
  // No instance of the stack exists unless a test says so; a launch is listed by its client token.
  ec2Mock.on(DescribeInstancesCommand).callsFake(launchedByToken);
  ec2Mock.on(DescribeInstanceTypeOfferingsCommand).resolves({
    InstanceTypeOfferings: [
      { InstanceType: 'g6.12xlarge', LocationType: 'availability-zone', Location: 'us-west-2a' },
      { InstanceType: 'g6.12xlarge', LocationType: 'availability-zone', Location: 'us-west-2b' },
    ],
  });
});

describe('onEvent', () => {
  it('Create launches and returns the instance as physical id and attributes', async () => {
    ec2Mock
      .on(RunInstancesCommand)
      .rejectsOnce(ec2Error('InsufficientInstanceCapacity', 'no capacity', 500))
      .resolvesOnce({ Instances: [{ InstanceId: 'i-0bbbbbbbbbbbbbbbb' }] });

    const response = await handle(
      { RequestType: 'Create', RequestId: REQUEST_ID, ResourceProperties: PROPS },
      deps(),
    );

    expect(response).toEqual({
      PhysicalResourceId: 'i-0bbbbbbbbbbbbbbbb',
      Data: {
        InstanceId: 'i-0bbbbbbbbbbbbbbbb',
        AvailabilityZone: 'us-west-2b',
        InstanceType: 'g6.12xlarge',
        AttemptLog: [
          'g6.12xlarge: InsufficientInstanceCapacity in us-west-2a, trying us-west-2b',
          'g6.12xlarge: launched i-0bbbbbbbbbbbbbbbb in us-west-2b',
        ].join('\n'),
        PrivateIpAddress: '',
      },
      // For the framework's waiter: the resource's status time when this request began, and
      // the instance it launched (ended if CloudFormation cancels the request).
      LaunchMark: expect.any(String),
      LaunchedInstance: 'i-0bbbbbbbbbbbbbbbb',
    });
    expect(ec2Mock).toHaveReceivedCommandWith(RunInstancesCommand, {
      LaunchTemplate: { LaunchTemplateId: 'lt-0123456789abcdef0', Version: '1' },
      ClientToken: clientTokenFor(REQUEST_ID, 'g6.12xlarge', 'us-west-2b'),
      TagSpecifications: [
        { ResourceType: 'instance', Tags: [STACK_TAG, generationTag('1'), RESOURCE_TAG] },
        { ResourceType: 'volume', Tags: [STACK_TAG, generationTag('1'), RESOURCE_TAG] },
      ],
    });
    // Before launching, it looked for a live host of this stack, resource and generation to adopt.
    expect(ec2Mock).toHaveReceivedNthCommandWith(DescribeInstancesCommand, 1, {
      Filters: [
        { Name: 'tag:llm-gateway-lab:stack', Values: ['LlmGatewayLab'] },
        { Name: 'tag:llm-gateway-lab:resource', Values: ['HostLaunch'] },
        { Name: 'tag:llm-gateway-lab:generation', Values: ['1'] },
        { Name: 'instance-state-name', Values: ['pending', 'running'] },
      ],
    });
  });

  it("Create of a K3s agent tries only its server's AZ: no capacity there fails, another AZ is never tried", async () => {
    ec2Mock.on(RunInstancesCommand).rejects(ec2Error('InsufficientInstanceCapacity', 'no capacity', 500));
    const agent = { ...PROPS, RequiredAz: 'us-west-2b' };

    await expect(
      handle({ RequestType: 'Create', RequestId: REQUEST_ID, ResourceProperties: agent }, deps()),
    ).rejects.toThrow(/\| us-west-2b \| g6\.12xlarge \| InsufficientInstanceCapacity \|/);
    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 1);
    expect(ec2Mock).toHaveReceivedCommandWith(RunInstancesCommand, {
      NetworkInterfaces: [expect.objectContaining({ SubnetId: 'subnet-b' })],
    });
  });

  it('Create fails with the launch message when no AZ has capacity', async () => {
    ec2Mock.on(RunInstancesCommand).rejects(ec2Error('InsufficientInstanceCapacity', 'no capacity', 500));

    await expect(handle({ RequestType: 'Create', ResourceProperties: PROPS }, deps())).rejects.toThrow(
      /Reasons for provision failures:\n\| AZ \| instance type \| error code \| message \|/,
    );
  });

  it('Update with unchanged launch inputs keeps the running instance without a launch', async () => {
    ec2Mock.on(DescribeInstancesCommand).resolves(
      described({
        InstanceId: OLD_ID,
        InstanceType: 'g6.12xlarge',
        Placement: { AvailabilityZone: 'us-west-2b' },
        PrivateIpAddress: '10.0.16.7',
        State: { Name: 'running', Code: 16 },
      }),
    );

    const response = await handle(
      {
        RequestType: 'Update',
        PhysicalResourceId: OLD_ID,
        // A new template version in the same generation (a newer AMI behind the SSM parameter).
        ResourceProperties: { ...PROPS, VcpusNeeded: '96', LaunchTemplateVersion: '2' },
        OldResourceProperties: PROPS,
      },
      deps(),
    );

    expect(ec2Mock).not.toHaveReceivedCommand(RunInstancesCommand);
    expect(response).toEqual({
      PhysicalResourceId: OLD_ID,
      Data: {
        InstanceId: OLD_ID,
        AvailabilityZone: 'us-west-2b',
        InstanceType: 'g6.12xlarge',
        AttemptLog: `g6.12xlarge: kept ${OLD_ID} in us-west-2b, launch inputs unchanged`,
        PrivateIpAddress: '10.0.16.7',
      },
    });
  });

  it('Update with unchanged inputs launches anew when the instance is gone', async () => {
    ec2Mock
      .on(DescribeInstancesCommand, { InstanceIds: [OLD_ID] })
      .resolves(described({ InstanceId: OLD_ID, State: { Name: 'terminated', Code: 48 } }));
    ec2Mock.on(RunInstancesCommand).resolves({ Instances: [{ InstanceId: 'i-0ddddddddddddddd1' }] });

    const response = await handle(
      {
        RequestType: 'Update',
        PhysicalResourceId: OLD_ID,
        ResourceProperties: PROPS,
        OldResourceProperties: PROPS,
      },
      deps(),
    );

    expect(response.PhysicalResourceId).toBe('i-0ddddddddddddddd1');
  });

  it('Delete terminates the instance', async () => {
    ec2Mock.on(TerminateInstancesCommand).resolves({});

    const response = await handle(
      { RequestType: 'Delete', PhysicalResourceId: OLD_ID, ResourceProperties: PROPS },
      deps(),
    );

    expect(response).toEqual({ PhysicalResourceId: OLD_ID });
    expect(ec2Mock).toHaveReceivedCommandWith(TerminateInstancesCommand, { InstanceIds: [OLD_ID] });
  });

  it.each(['InvalidInstanceID.NotFound', 'InvalidInstanceID.Malformed'])(
    'Delete of a missing instance succeeds (%s)',
    async (code) => {
      ec2Mock.on(TerminateInstancesCommand).rejects(ec2Error(code, 'gone'));

      await expect(
        handle({ RequestType: 'Delete', PhysicalResourceId: OLD_ID, ResourceProperties: PROPS }, deps()),
      ).resolves.toEqual({ PhysicalResourceId: OLD_ID });
    },
  );

  it('Delete of a resource that never launched terminates nothing when nothing carries its tags', async () => {
    const event: ResourceEvent = {
      RequestType: 'Delete',
      PhysicalResourceId: 'AWSCDK::CustomResourceProviderFramework::CREATE_FAILED',
      ResourceProperties: PROPS,
    };

    await expect(handle(event, deps())).resolves.toEqual({
      PhysicalResourceId: event.PhysicalResourceId,
    });
    expect(ec2Mock).not.toHaveReceivedCommand(TerminateInstancesCommand);
    expect(ec2Mock).toHaveReceivedCommandWith(DescribeInstancesCommand, {
      Filters: [
        { Name: 'tag:llm-gateway-lab:stack', Values: ['LlmGatewayLab'] },
        { Name: 'tag:llm-gateway-lab:resource', Values: [LOGICAL_ID] },
        {
          Name: 'instance-state-name',
          Values: ['pending', 'running', 'stopping', 'stopped', 'shutting-down'],
        },
      ],
    });
  });

  it('Delete fails on any other error, so that CloudFormation says why', async () => {
    ec2Mock.on(TerminateInstancesCommand).rejects(ec2Error('UnauthorizedOperation', 'not authorized'));

    await expect(
      handle({ RequestType: 'Delete', PhysicalResourceId: OLD_ID, ResourceProperties: PROPS }, deps()),
    ).rejects.toThrow('not authorized');
  });
});

describe('isComplete', () => {
  const create: ResourceEvent = {
    RequestType: 'Create',
    PhysicalResourceId: OLD_ID,
    ResourceProperties: PROPS,
  };
  const remove: ResourceEvent = {
    RequestType: 'Delete',
    PhysicalResourceId: OLD_ID,
    ResourceProperties: PROPS,
  };

  it('waits while the instance is pending or not yet known, and completes when it runs', async () => {
    ec2Mock
      .on(DescribeInstancesCommand)
      .rejectsOnce(notFound())
      .resolvesOnce(described({ InstanceId: OLD_ID, State: { Name: 'pending', Code: 0 } }))
      .resolvesOnce(
        described({
          InstanceId: OLD_ID,
          PrivateIpAddress: '10.0.16.7',
          State: { Name: 'running', Code: 16 },
        }),
      );

    expect(await check(create, deps())).toEqual({ IsComplete: false });
    expect(await check(create, deps())).toEqual({ IsComplete: false });
    // The private IP is known only now; the framework merges it into onEvent's attributes.
    expect(await check(create, deps())).toEqual({
      IsComplete: true,
      Data: { PrivateIpAddress: '10.0.16.7' },
    });
    expect(ec2Mock).toHaveReceivedCommandWith(DescribeInstancesCommand, { InstanceIds: [OLD_ID] });
  });

  it('fails with the state reason when the instance died at start', async () => {
    ec2Mock
      .on(DescribeInstancesCommand)
      .resolves(
        described(
          endedAtStart(OLD_ID, 'Server.InternalError', 'Server.InternalError: Internal error on launch'),
        ),
      );

    await expect(check(create, deps())).rejects.toThrow(
      `${OLD_ID} (g6.12xlarge in us-west-2a) went to terminated instead of running: Server.InternalError: ` +
        'Server.InternalError: Internal error on launch',
    );
  });

  it('says to deploy again when the capacity was withdrawn while the instance was pending', async () => {
    ec2Mock
      .on(DescribeInstancesCommand)
      .resolves(
        described(
          endedAtStart(
            OLD_ID,
            'Server.InsufficientInstanceCapacity',
            'Server.InsufficientInstanceCapacity: Insufficient capacity.',
          ),
        ),
      );

    await expect(check(create, deps())).rejects.toThrow(
      /Insufficient capacity\.\. The capacity was withdrawn after the launch; deploy again/,
    );
  });

  it('fails when the instance is shutting down after an Update', async () => {
    ec2Mock
      .on(DescribeInstancesCommand)
      .resolves(described({ InstanceId: OLD_ID, State: { Name: 'shutting-down', Code: 32 } }));

    const update: ResourceEvent = { ...create, RequestType: 'Update', OldResourceProperties: PROPS };
    await expect(check(update, deps())).rejects.toThrow(
      /went to shutting-down instead of running: no code: no reason given/,
    );
  });

  it('waits for terminated after Delete', async () => {
    ec2Mock
      .on(DescribeInstancesCommand, { InstanceIds: [OLD_ID] })
      .resolvesOnce(described({ InstanceId: OLD_ID, State: { Name: 'shutting-down', Code: 32 } }))
      .resolvesOnce(described({ InstanceId: OLD_ID, State: { Name: 'terminated', Code: 48 } }));

    expect(await check(remove, deps())).toEqual({ IsComplete: false });
    expect(await check(remove, deps())).toEqual({ IsComplete: true });
  });

  it('counts an instance EC2 no longer knows as terminated', async () => {
    ec2Mock.on(DescribeInstancesCommand, { InstanceIds: [OLD_ID] }).rejects(notFound());

    expect(await check(remove, deps())).toEqual({ IsComplete: true });
  });

  it('lets other errors through', async () => {
    ec2Mock.on(DescribeInstancesCommand).rejects(ec2Error('UnauthorizedOperation', 'not authorized'));

    await expect(check(create, deps())).rejects.toThrow('not authorized');
  });
});

describe('event parsing', () => {
  it('reads the properties as CloudFormation sends them', () => {
    expect(parseLaunchRequest(PROPS, REQUEST_ID)).toEqual({
      launchTemplateId: 'lt-0123456789abcdef0',
      launchTemplateVersion: '1',
      subnets: [
        { subnetId: 'subnet-a', availabilityZone: 'us-west-2a' },
        { subnetId: 'subnet-b', availabilityZone: 'us-west-2b' },
      ],
      securityGroupId: 'sg-0123',
      instanceTypes: ['g6.12xlarge'],
      preferredAzs: [],
      vcpusNeeded: 48,
      stackTag: { key: 'llm-gateway-lab:stack', value: 'LlmGatewayLab' },
      generationTag: { key: 'llm-gateway-lab:generation', value: '1' },
      requestId: REQUEST_ID,
    });
  });

  it("keeps a K3s agent in its server's AZ: only that subnet, never another AZ", () => {
    const agent = { ...PROPS, PreferredAzs: ['us-west-2a'], RequiredAz: 'us-west-2b' };
    expect(parseLaunchRequest(agent, REQUEST_ID)).toMatchObject({
      subnets: [{ subnetId: 'subnet-b', availabilityZone: 'us-west-2b' }],
      preferredAzs: ['us-west-2b'],
    });
    expect(() => parseLaunchRequest({ ...PROPS, RequiredAz: 'us-west-2c' }, REQUEST_ID)).toThrow(
      'CapacityLaunch: RequiredAz us-west-2c has no lab subnet; the subnets are in us-west-2a, us-west-2b',
    );
    // A server moved to another AZ moves its agents: the required AZ is a launch input.
    expect(launchInputsChanged(agent, { ...agent, RequiredAz: 'us-west-2a' })).toBe(true);
  });

  it('names a missing property', () => {
    const { SecurityGroupId: _, ...rest } = PROPS;
    expect(() => parseLaunchRequest(rest, REQUEST_ID)).toThrow(
      'CapacityLaunch: property SecurityGroupId must be a non-empty string, got undefined',
    );
  });

  it('compares only the launch inputs', () => {
    expect(launchInputsChanged(PROPS, { ...PROPS, StackTagValue: 'Other', VcpusNeeded: '1' })).toBe(false);
    expect(launchInputsChanged(PROPS, { ...PROPS, SecurityGroupId: 'sg-9' })).toBe(true);
    expect(launchInputsChanged(undefined, PROPS)).toBe(true);
  });

  it('shortens a long attempt log, keeping the newest lines and saying so', () => {
    const lines = Array.from(
      { length: 60 },
      (_, i) => `g6.12xlarge: InsufficientInstanceCapacity, line ${i}`,
    );
    const log = attemptLogAttribute(lines);
    expect(log.length).toBeLessThanOrEqual(ATTEMPT_LOG_LIMIT);
    expect(log).toMatch(/^\(\d+ earlier lines omitted; the launch function's log has them all\)\n/);
    expect(log.endsWith('line 59')).toBe(true);
    expect(attemptLogAttribute(['short'])).toBe('short');
  });
});

describe('one host, within the quota', () => {
  let world: FakeEc2;
  const old = () =>
    world.add({
      InstanceId: OLD_ID,
      InstanceType: 'g6.12xlarge',
      Placement: { AvailabilityZone: 'us-west-2a' },
      State: { Name: 'running', Code: 16 },
      LaunchTime: new Date(1_600_000_000_000),
      Tags: [STACK_TAG, generationTag('1')],
    });

  beforeEach(() => {
    world = new FakeEc2();
    passTime = () => world.hidden.clear();
    ec2Mock.on(DescribeInstancesCommand).callsFake((input) => world.describe(input));
    ec2Mock.on(RunInstancesCommand).callsFake((input) => world.run(input));
    ec2Mock.on(TerminateInstancesCommand).callsFake((input) => world.terminate(input));
  });

  it('an update that replaces the host ends the old one first and fits a 48-vCPU quota', async () => {
    old();
    const update: ResourceEvent = {
      RequestType: 'Update',
      RequestId: REQUEST_ID,
      PhysicalResourceId: OLD_ID,
      ResourceProperties: { ...PROPS, LaunchTemplateVersion: '2', Generation: '2' },
      OldResourceProperties: PROPS,
    };
    const lines: string[] = [];
    const logging = { ...deps(), log: (line: string) => lines.push(line) };

    // onEvent only ends the old host, keeping its id until the replacement runs.
    expect(await handle(update, logging)).toEqual({
      PhysicalResourceId: OLD_ID,
      LaunchMark: expect.any(String),
    });
    expect(world.stateOf(OLD_ID)).toBe('shutting-down');
    expect(ec2Mock).not.toHaveReceivedCommand(RunInstancesCommand);

    // isComplete waits for terminated, and launches nothing before.
    expect(await check(update, logging)).toEqual({ IsComplete: false });
    expect(ec2Mock).not.toHaveReceivedCommand(RunInstancesCommand);
    world.advance();

    // Then it launches (the quota is free again) and waits for the new host to run.
    expect(await check(update, logging)).toEqual({ IsComplete: false });
    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 1);
    expect(ec2Mock).toHaveReceivedCommandWith(RunInstancesCommand, {
      TagSpecifications: [
        { ResourceType: 'instance', Tags: [STACK_TAG, generationTag('2'), RESOURCE_TAG] },
        { ResourceType: 'volume', Tags: [STACK_TAG, generationTag('2'), RESOURCE_TAG] },
      ],
    });
    expect(await check(update, logging)).toEqual({ IsComplete: false });
    world.advance();

    const done = await check(update, logging);
    const [replacement] = world.alive();
    expect(done).toEqual({
      IsComplete: true,
      PhysicalResourceId: replacement?.InstanceId,
      Data: {
        InstanceId: replacement?.InstanceId,
        AvailabilityZone: 'us-west-2a',
        InstanceType: 'g6.12xlarge',
        AttemptLog: `g6.12xlarge: ${replacement?.InstanceId} in us-west-2a replaced ${OLD_ID} (terminated first; every attempt is in the launch function's log)`,
        PrivateIpAddress: replacement?.PrivateIpAddress,
      },
    });
    // Never two hosts at once, one launch in all, and the quota never refused it.
    expect(world.maxAlive).toBe(1);
    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 1);
    expect(lines.join('\n')).not.toContain('VcpuLimitExceeded');
    expect(lines[0]).toContain(`terminating ${OLD_ID} first`);
  });

  it('the quota is real: launching beside the running host would be refused', async () => {
    old();
    await expect(
      handle(
        {
          RequestType: 'Create',
          RequestId: REQUEST_ID,
          ResourceProperties: { ...PROPS, Generation: '2' },
        },
        deps(),
      ),
    ).rejects.toThrow(/"Running On-Demand G and VT instances" quota .* 48 vCPUs/);
  });

  it('a duplicated Create adopts the tagged instance instead of launching', async () => {
    const first = await handle(
      { RequestType: 'Create', RequestId: REQUEST_ID, ResourceProperties: PROPS },
      deps(),
    );
    world.advance();
    // The same Create again (a redelivered request), and one under a new request id.
    const again = await handle(
      { RequestType: 'Create', RequestId: REQUEST_ID, ResourceProperties: PROPS },
      deps(),
    );
    const other = await handle(
      { RequestType: 'Create', RequestId: 'another-request', ResourceProperties: PROPS },
      deps(),
    );

    expect(again.PhysicalResourceId).toBe(first.PhysicalResourceId);
    expect(other.PhysicalResourceId).toBe(first.PhysicalResourceId);
    expect(other.Data?.AttemptLog).toBe(
      `g6.12xlarge: adopted ${first.PhysicalResourceId} in us-west-2a, launched for this generation before`,
    );
    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 1);
    expect(world.instances).toHaveLength(1);
  });

  it('a repeated Create that cannot see the first launch yet gets the same instance from its token', async () => {
    const first = await handle(
      { RequestType: 'Create', RequestId: REQUEST_ID, ResourceProperties: PROPS },
      deps(),
    );
    // DescribeInstances is eventually consistent: the new instance is not listed yet.
    world.hidden.add(first.PhysicalResourceId);

    const again = await handle(
      { RequestType: 'Create', RequestId: REQUEST_ID, ResourceProperties: PROPS },
      deps(),
    );

    expect(again.PhysicalResourceId).toBe(first.PhysicalResourceId);
    expect(world.instances).toHaveLength(1);
  });

  it('a lost RunInstances reply is resolved by a token lookup, not by a launch in the next AZ', async () => {
    // Lost on the first try and on each of the three retries with the same token.
    world.lostReplies = 4;

    const response = await handle(
      { RequestType: 'Create', RequestId: REQUEST_ID, ResourceProperties: PROPS },
      deps(),
    );

    expect(world.instances).toHaveLength(1);
    expect(response.PhysicalResourceId).toBe(world.instances[0]?.InstanceId);
    expect(response.Data?.AvailabilityZone).toBe('us-west-2a');
    expect(ec2Mock).toHaveReceivedCommandWith(DescribeInstancesCommand, {
      Filters: [{ Name: 'client-token', Values: [clientTokenFor(REQUEST_ID, 'g6.12xlarge', 'us-west-2a')] }],
    });
    expect(
      ec2Mock.commandCalls(RunInstancesCommand).map((c) => c.args[0].input.NetworkInterfaces?.[0]?.SubnetId),
    ).not.toContain('subnet-b');
  });

  it('a replacement whose new host dies at start fails with EC2s reason', async () => {
    const update: ResourceEvent = {
      RequestType: 'Update',
      RequestId: REQUEST_ID,
      PhysicalResourceId: 'AWSCDK::CustomResourceProviderFramework::CREATE_FAILED',
      ResourceProperties: { ...PROPS, Generation: '2' },
      OldResourceProperties: PROPS,
    };
    expect(await check(update, deps())).toEqual({ IsComplete: false });
    const [launched] = world.instances;
    if (launched) {
      launched.State = { Name: 'terminated', Code: 48 };
      launched.StateReason = {
        Code: 'Client.InternalError',
        Message: 'Client.InternalError: Client error on launch',
      };
    }

    await expect(check(update, deps())).rejects.toThrow(
      /went to terminated instead of running: Client\.InternalError: .*customer-managed KMS key/,
    );
  });
});

describe('failure reasons', () => {
  it('explains Client.InternalError at start as the default EBS key the launch role may not use', () => {
    const advice = startFailureAdvice('Client.InternalError');
    expect(advice).toContain('aws ec2 get-ebs-default-kms-key-id');
    expect(advice).toContain('kms:CreateGrant');
    expect(advice).toContain('aws ec2 reset-ebs-default-kms-key-id');
    expect(startFailureAdvice('Server.InternalError')).toBe('');
  });

  it('caps a 6 KB launch failure at the reason limit, with the AZ table summarized and the full text logged', async () => {
    const azs = 'abcdef'.split('').map((letter) => `us-west-2${letter}`);
    const types = ['g6.12xlarge', 'g6.24xlarge', 'g6.48xlarge', 'g6e.12xlarge', 'g5.12xlarge'];
    ec2Mock.on(DescribeInstanceTypeOfferingsCommand).callsFake((input) => ({
      InstanceTypeOfferings: azs.map((Location) => ({
        InstanceType: input.Filters?.[0]?.Values?.[0],
        Location,
      })),
    }));
    const long = `We currently do not have sufficient capacity in the Availability Zone you requested. ${'Our system will be working on provisioning additional capacity. '.repeat(6)}`;
    ec2Mock.on(RunInstancesCommand).rejects(ec2Error('InsufficientInstanceCapacity', long, 500));
    const props = {
      ...PROPS,
      InstanceTypes: types,
      Subnets: azs.map((AvailabilityZone) => ({
        SubnetId: `subnet-${AvailabilityZone.slice(-1)}`,
        AvailabilityZone,
      })),
    };
    const lines: string[] = [];

    const failure = await withCappedReason(
      () => handle({ RequestType: 'Create', RequestId: REQUEST_ID, ResourceProperties: props }, deps()),
      (line) => lines.push(line),
    ).then(
      () => undefined,
      (e: Error) => e,
    );

    const full = lines.join('\n');
    expect(full.length).toBeGreaterThan(6000);
    expect(full).toContain('| us-west-2f | g5.12xlarge | InsufficientInstanceCapacity |');
    expect(failure?.message.length).toBeLessThanOrEqual(REASON_LIMIT);
    expect(failure?.message).toMatch(
      /^No instance launched: every offered Availability Zone failed for g6\.12xlarge, g6\.24xlarge, g6\.48xlarge, g6e\.12xlarge, g5\.12xlarge/,
    );
    expect(failure?.message).toContain(
      "30 attempts, by error code (the full table is in the launch function's log):",
    );
    expect(failure?.message).toMatch(
      /\n- InsufficientInstanceCapacity x30: us-west-2a \(g6\.12xlarge\), .*us-west-2f \(g5\.12xlarge\)\. We currently/,
    );
    expect(failure?.name).toBe('CapacityLaunchError');
  });

  it('leaves a short reason alone', async () => {
    const lines: string[] = [];
    await expect(
      withCappedReason(
        () => Promise.reject(new Error('short')),
        (line) => lines.push(line),
      ),
    ).rejects.toThrow(/^short$/);
    expect(lines).toEqual([]);
  });
});
