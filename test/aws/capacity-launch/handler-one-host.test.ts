import 'aws-sdk-client-mock-vitest/extend';
import {
  DescribeInstancesCommand,
  RunInstancesCommand,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { beforeEach, describe, expect, it } from 'vitest';
import type { ResourceEvent } from '../../../lib/aws/capacity-launch/handler.ts';
import { clientTokenFor } from '../../../lib/aws/capacity-launch/launch.ts';
import { FakeEc2 } from './fake-ec2.ts';
import {
  check,
  deps,
  generationTag,
  handle,
  OLD_ID,
  PROPS,
  REQUEST_ID,
  RESOURCE_TAG,
  STACK_TAG,
  shared,
  useHandlerHarness,
} from './handler-harness.ts';

/** One host at a time within the vCPU quota: replacements, duplicates, lost replies, deaths at start. */

const { ec2Mock } = useHandlerHarness();

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
    shared.passTime = () => world.hidden.clear();
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
