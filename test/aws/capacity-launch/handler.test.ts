import {
  DescribeInstancesCommand,
  DescribeInstanceTypeOfferingsCommand,
  EC2Client,
  EC2ServiceException,
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
} from '../../../lib/aws/capacity-launch/handler.ts';

const ec2Mock = mockClient(EC2Client);

function ec2Error(name: string, message: string, httpStatusCode = 400) {
  return new EC2ServiceException({
    name,
    $fault: httpStatusCode >= 500 ? 'server' : 'client',
    $metadata: { httpStatusCode },
    message,
  });
}

// As CloudFormation delivers them: scalars become strings.
const PROPS = {
  ServiceToken: 'arn:aws:lambda:us-west-2:111122223333:function:framework',
  LaunchTemplateId: 'lt-0123456789abcdef0',
  LaunchTemplateVersion: '1',
  Generation: '1',
  Subnets: [
    { SubnetId: 'subnet-a', AvailabilityZone: 'us-west-2a' },
    { SubnetId: 'subnet-b', AvailabilityZone: 'us-west-2b' },
  ],
  SecurityGroupId: 'sg-0123',
  InstanceTypes: ['g6.12xlarge'],
  PreferredAzs: [],
  VcpusNeeded: '48',
  StackTagKey: 'llm-gateway-lab:stack',
  StackTagValue: 'LlmGatewayLab',
};

const OLD_ID = 'i-0123456789abcdef0';

function deps(): HandlerDeps {
  return {
    launchEc2: new EC2Client({ region: 'us-west-2', maxAttempts: 1 }),
    ec2: new EC2Client({ region: 'us-west-2' }),
    sleep: async () => {},
    log: () => {},
  };
}

function described(instance: Instance) {
  return { Reservations: [{ Instances: [instance] }] };
}

const notFound = () => ec2Error('InvalidInstanceID.NotFound', `The instance ID '${OLD_ID}' does not exist`);

beforeEach(() => {
  ec2Mock.reset();
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

    const response = await handleEvent({ RequestType: 'Create', ResourceProperties: PROPS }, deps());

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
      },
    });
    expect(ec2Mock).toHaveReceivedCommandWith(RunInstancesCommand, {
      LaunchTemplate: { LaunchTemplateId: 'lt-0123456789abcdef0', Version: '1' },
      TagSpecifications: [
        { ResourceType: 'instance', Tags: [{ Key: 'llm-gateway-lab:stack', Value: 'LlmGatewayLab' }] },
        { ResourceType: 'volume', Tags: [{ Key: 'llm-gateway-lab:stack', Value: 'LlmGatewayLab' }] },
      ],
    });
  });

  it('Create fails with the launch message when no AZ has capacity', async () => {
    ec2Mock.on(RunInstancesCommand).rejects(ec2Error('InsufficientInstanceCapacity', 'no capacity', 500));

    await expect(handleEvent({ RequestType: 'Create', ResourceProperties: PROPS }, deps())).rejects.toThrow(
      /Reasons for provision failures:\n\| AZ \| instance type \| error code \| message \|/,
    );
  });

  it('Update with unchanged launch inputs keeps the running instance without a launch', async () => {
    ec2Mock.on(DescribeInstancesCommand).resolves(
      described({
        InstanceId: OLD_ID,
        InstanceType: 'g6.12xlarge',
        Placement: { AvailabilityZone: 'us-west-2b' },
        State: { Name: 'running', Code: 16 },
      }),
    );

    const response = await handleEvent(
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
      },
    });
  });

  it.each([
    ['a new generation', { LaunchTemplateVersion: '2', Generation: '2' }],
    ['another subnet list', { Subnets: [{ SubnetId: 'subnet-c', AvailabilityZone: 'us-west-2c' }] }],
    ['another fallback list', { InstanceTypes: ['g6.12xlarge', 'g5.12xlarge'] }],
    ['another preference', { PreferredAzs: ['us-west-2b'] }],
  ])('Update with %s launches a new instance under a new physical id', async (_, change) => {
    ec2Mock.on(DescribeInstanceTypeOfferingsCommand).resolves({
      InstanceTypeOfferings: [{ Location: 'us-west-2b' }, { Location: 'us-west-2c' }],
    });
    ec2Mock.on(RunInstancesCommand).resolves({ Instances: [{ InstanceId: 'i-0ccccccccccccccc1' }] });

    const response = await handleEvent(
      {
        RequestType: 'Update',
        PhysicalResourceId: OLD_ID,
        ResourceProperties: { ...PROPS, ...change },
        OldResourceProperties: PROPS,
      },
      deps(),
    );

    expect(response.PhysicalResourceId).toBe('i-0ccccccccccccccc1');
    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 1);
    // CloudFormation deletes the old instance after the update; the handler does not touch it.
    expect(ec2Mock).not.toHaveReceivedCommand(TerminateInstancesCommand);
  });

  it('Update with unchanged inputs launches anew when the instance is gone', async () => {
    ec2Mock
      .on(DescribeInstancesCommand)
      .resolves(described({ InstanceId: OLD_ID, State: { Name: 'terminated', Code: 48 } }));
    ec2Mock.on(RunInstancesCommand).resolves({ Instances: [{ InstanceId: 'i-0ddddddddddddddd1' }] });

    const response = await handleEvent(
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

    const response = await handleEvent(
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
        handleEvent({ RequestType: 'Delete', PhysicalResourceId: OLD_ID, ResourceProperties: PROPS }, deps()),
      ).resolves.toEqual({ PhysicalResourceId: OLD_ID });
    },
  );

  it('Delete of a resource that never launched touches nothing', async () => {
    const event: ResourceEvent = {
      RequestType: 'Delete',
      PhysicalResourceId: 'AWSCDK::CustomResourceProviderFramework::CREATE_FAILED',
      ResourceProperties: PROPS,
    };

    await expect(handleEvent(event, deps())).resolves.toEqual({
      PhysicalResourceId: event.PhysicalResourceId,
    });
    expect(ec2Mock).not.toHaveReceivedAnyCommand();
  });

  it('Delete fails on any other error, so that CloudFormation says why', async () => {
    ec2Mock.on(TerminateInstancesCommand).rejects(ec2Error('UnauthorizedOperation', 'not authorized'));

    await expect(
      handleEvent({ RequestType: 'Delete', PhysicalResourceId: OLD_ID, ResourceProperties: PROPS }, deps()),
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
      .resolvesOnce(described({ InstanceId: OLD_ID, State: { Name: 'running', Code: 16 } }));

    expect(await checkComplete(create, deps())).toEqual({ IsComplete: false });
    expect(await checkComplete(create, deps())).toEqual({ IsComplete: false });
    expect(await checkComplete(create, deps())).toEqual({ IsComplete: true });
    expect(ec2Mock).toHaveReceivedCommandWith(DescribeInstancesCommand, { InstanceIds: [OLD_ID] });
  });

  it('fails with the state reason when the instance died at start', async () => {
    ec2Mock.on(DescribeInstancesCommand).resolves(
      described({
        InstanceId: OLD_ID,
        InstanceType: 'g6.12xlarge',
        Placement: { AvailabilityZone: 'us-west-2a' },
        State: { Name: 'terminated', Code: 48 },
        StateReason: {
          Code: 'Server.InternalError',
          Message: 'Server.InternalError: Internal error on launch',
        },
      }),
    );

    await expect(checkComplete(create, deps())).rejects.toThrow(
      `${OLD_ID} (g6.12xlarge in us-west-2a) went to terminated instead of running: Server.InternalError: ` +
        'Server.InternalError: Internal error on launch',
    );
  });

  it('says to deploy again when the capacity was withdrawn while the instance was pending', async () => {
    ec2Mock.on(DescribeInstancesCommand).resolves(
      described({
        InstanceId: OLD_ID,
        InstanceType: 'g6.12xlarge',
        Placement: { AvailabilityZone: 'us-west-2a' },
        State: { Name: 'terminated', Code: 48 },
        StateReason: {
          Code: 'Server.InsufficientInstanceCapacity',
          Message: 'Server.InsufficientInstanceCapacity: Insufficient capacity.',
        },
      }),
    );

    await expect(checkComplete(create, deps())).rejects.toThrow(
      /Insufficient capacity\.\. The capacity was withdrawn after the launch; deploy again/,
    );
  });

  it('fails when the instance is shutting down after an Update', async () => {
    ec2Mock
      .on(DescribeInstancesCommand)
      .resolves(described({ InstanceId: OLD_ID, State: { Name: 'shutting-down', Code: 32 } }));

    await expect(checkComplete({ ...create, RequestType: 'Update' }, deps())).rejects.toThrow(
      /went to shutting-down instead of running: no code: no reason given/,
    );
  });

  it('waits for terminated after Delete', async () => {
    ec2Mock
      .on(DescribeInstancesCommand)
      .resolvesOnce(described({ InstanceId: OLD_ID, State: { Name: 'shutting-down', Code: 32 } }))
      .resolvesOnce(described({ InstanceId: OLD_ID, State: { Name: 'terminated', Code: 48 } }));

    expect(await checkComplete(remove, deps())).toEqual({ IsComplete: false });
    expect(await checkComplete(remove, deps())).toEqual({ IsComplete: true });
  });

  it('counts an instance EC2 no longer knows as terminated', async () => {
    ec2Mock.on(DescribeInstancesCommand).rejects(notFound());

    expect(await checkComplete(remove, deps())).toEqual({ IsComplete: true });
  });

  it('lets other errors through', async () => {
    ec2Mock.on(DescribeInstancesCommand).rejects(ec2Error('UnauthorizedOperation', 'not authorized'));

    await expect(checkComplete(create, deps())).rejects.toThrow('not authorized');
  });
});

describe('event parsing', () => {
  it('reads the properties as CloudFormation sends them', () => {
    expect(parseLaunchRequest(PROPS)).toEqual({
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
    });
  });

  it('names a missing property', () => {
    const { SecurityGroupId: _, ...rest } = PROPS;
    expect(() => parseLaunchRequest(rest)).toThrow(
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
