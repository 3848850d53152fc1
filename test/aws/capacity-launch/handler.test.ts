import 'aws-sdk-client-mock-vitest/extend';
import {
  DescribeInstancesCommand,
  RunInstancesCommand,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { describe, expect, it } from 'vitest';
import type { ResourceEvent } from '../../../lib/aws/capacity-launch/handler.ts';
import { clientTokenFor } from '../../../lib/aws/capacity-launch/launch.ts';
import { ec2Error } from './fake-ec2.ts';
import {
  check,
  deps,
  generationTag,
  handle,
  LOGICAL_ID,
  notFound,
  OLD_ID,
  PROPS,
  REQUEST_ID,
  RESOURCE_TAG,
  STACK_TAG,
  useHandlerHarness,
} from './handler-harness.ts';
import { described, endedAtStart } from './kit.ts';

/** The launch handler's answer to each CloudFormation request: onEvent and isComplete. */

const { ec2Mock } = useHandlerHarness();

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
