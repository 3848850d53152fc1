import { DescribeInstanceTypeOfferingsCommand, RunInstancesCommand } from '@aws-sdk/client-ec2';
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import { launchWithFallback } from '../../../lib/aws/capacity-launch/launch.ts';
import {
  deps,
  ec2Error,
  ice,
  launchError,
  launched,
  offer,
  request,
  run,
  token,
  useLaunchHarness,
} from './launch-harness.ts';

/** launchWithFallback when a quota stops it, EC2 answers transient errors, or the primary type is out everywhere. */

const { ec2Mock, runInputs } = useLaunchHarness();

describe('launchWithFallback: quotas, transient errors, fallback types', () => {
  it('stops at once on VcpuLimitExceeded, naming the quota and the vCPUs needed', async () => {
    ec2Mock
      .on(RunInstancesCommand)
      .rejects(
        ec2Error(
          'VcpuLimitExceeded',
          'You have requested more vCPU capacity than your current vCPU limit of 0 allows for the instance bucket that the specified instance type belongs to.',
        ),
      );

    const err = await launchError(launchWithFallback(request(), deps()));

    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 1);
    expect(err.message).toContain('"Running On-Demand G and VT instances" quota');
    expect(err.message).toContain('48 vCPUs');
    expect(err.message).toContain('L-DB2E81BA');
    expect(err.message).toContain('VcpuLimitExceeded in us-west-2a');
    expect(err.attempts).toHaveLength(1);
    expect(run.logged).toEqual([
      'g6.12xlarge: VcpuLimitExceeded in us-west-2a, stopping: no other Availability Zone would do better',
    ]);
  });

  it('a full quota on the primary type skips its bucket but still tries a fallback type of another quota', async () => {
    const quotaFull = ec2Error(
      'VcpuLimitExceeded',
      'You have requested more vCPU capacity than your current vCPU limit of 0 allows for the instance bucket that the specified instance type belongs to.',
    );
    ec2Mock
      .on(DescribeInstanceTypeOfferingsCommand)
      .callsFake((input) => offer(String(input.Filters?.[0]?.Values?.[0]), ['us-west-2a', 'us-west-2b']));
    ec2Mock
      .on(RunInstancesCommand, { InstanceType: 'g6.12xlarge' })
      .rejects(quotaFull)
      .on(RunInstancesCommand, { InstanceType: 'g5.12xlarge' })
      .rejects(quotaFull)
      .on(RunInstancesCommand, { InstanceType: 'p4d.24xlarge' })
      .resolves(launched('i-0ppppppppppppppp1'));

    const result = await launchWithFallback(
      request({ instanceTypes: ['g6.12xlarge', 'g5.12xlarge', 'p4d.24xlarge'] }),
      deps(),
    );

    expect(result.instanceId).toBe('i-0ppppppppppppppp1');
    // One refusal of the G and VT quota; g5.12xlarge (the same quota) is not tried at all.
    expect(ec2Mock.commandCalls(RunInstancesCommand).map((c) => c.args[0].input.InstanceType)).toEqual([
      'g6.12xlarge',
      'p4d.24xlarge',
    ]);
    expect(run.logged).toContain(
      'g5.12xlarge: skipped, the "Running On-Demand G and VT instances" quota already refused an earlier type',
    );
  });

  it("when every quota bucket refuses, the message names the primary type's quota and its need", async () => {
    ec2Mock
      .on(DescribeInstanceTypeOfferingsCommand)
      .callsFake((input) => offer(String(input.Filters?.[0]?.Values?.[0]), ['us-west-2a']));
    ec2Mock.on(RunInstancesCommand).rejects(ec2Error('VcpuLimitExceeded', 'vCPU limit of 0'));

    const err = await launchError(
      launchWithFallback(request({ instanceTypes: ['g6.12xlarge', 'p4d.24xlarge'] }), deps()),
    );

    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 2);
    expect(err.message).toMatch(
      /^Launch stopped: the account's "Running On-Demand G and VT instances" quota/,
    );
    expect(err.message).toContain('48 vCPUs');
    expect(err.message).toContain(`The fallback types' quotas refused too: "Running On-Demand P instances".`);
    expect(err.attempts.map((a) => a.instanceType)).toEqual(['g6.12xlarge', 'p4d.24xlarge']);
  });

  it.each([
    [
      'UnauthorizedOperation',
      'You are not authorized to perform this operation. Encoded authorization failure message: abc',
    ],
    [
      'InvalidParameterCombination',
      'Network interfaces and an instance-level security groups may not be specified',
    ],
    ['InvalidParameterValue', 'Value (g6.huge) for parameter instanceType is invalid.'],
  ])('stops at once on %s without trying another AZ', async (code, message) => {
    ec2Mock.on(RunInstancesCommand).rejects(ec2Error(code, message));

    const err = await launchError(
      launchWithFallback(request({ instanceTypes: ['g6.12xlarge', 'g5.12xlarge'] }), deps()),
    );

    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 1);
    expect(err.message).toMatch(/^Launch stopped: /);
    expect(err.message).toContain(`${code} in us-west-2a`);
    expect(err.message).toContain(message);
  });

  it('fails with a table of every AZ tried when all of them fail', async () => {
    ec2Mock
      .on(RunInstancesCommand)
      .rejectsOnce(ice('us-west-2a'))
      .rejectsOnce(
        ec2Error('InsufficientHostCapacity', 'There is not enough host capacity | right now.', 500, 'server'),
      )
      .rejectsOnce(ice('us-west-2c'));

    const err = await launchError(launchWithFallback(request(), deps()));

    expect(err.message).toBe(
      [
        'No instance launched: every offered Availability Zone failed for g6.12xlarge. Reasons for provision failures:',
        '| AZ | instance type | error code | message |',
        '|---|---|---|---|',
        '| us-west-2a | g6.12xlarge | InsufficientInstanceCapacity | We currently do not have sufficient g6.12xlarge capacity in the Availability Zone you requested (us-west-2a). |',
        '| us-west-2b | g6.12xlarge | InsufficientHostCapacity | There is not enough host capacity / right now. |',
        '| us-west-2c | g6.12xlarge | InsufficientInstanceCapacity | We currently do not have sufficient g6.12xlarge capacity in the Availability Zone you requested (us-west-2c). |',
      ].join('\n'),
    );
    expect(run.logged.at(-1)).toBe(
      'g6.12xlarge: InsufficientInstanceCapacity in us-west-2c, no Availability Zone left',
    );
  });

  it('retries a transient error in the same AZ with the same token and backoff, then launches', async () => {
    ec2Mock
      .on(RunInstancesCommand)
      .rejectsOnce(ec2Error('RequestLimitExceeded', 'Request limit exceeded.', 503, 'client'))
      .rejectsOnce(ec2Error('ServiceUnavailable', 'Service unavailable.', 503, 'server'))
      .resolvesOnce(launched('i-0aaa'));

    const result = await launchWithFallback(request(), deps());

    expect(result.availabilityZone).toBe('us-west-2a');
    expect(run.sleeps).toEqual([1000, 2000]);
    const inputs = runInputs();
    expect(inputs.map((i) => i.NetworkInterfaces?.[0]?.SubnetId)).toEqual([
      'subnet-a',
      'subnet-a',
      'subnet-a',
    ]);
    // A retry repeats the same request: the token keeps EC2 from launching twice.
    expect(new Set(inputs.map((i) => i.ClientToken))).toEqual(new Set([token('us-west-2a')]));
    expect(run.logged).toEqual([
      'g6.12xlarge in us-west-2a: RequestLimitExceeded, retrying in 1s (retry 1 of 3)',
      'g6.12xlarge in us-west-2a: ServiceUnavailable, retrying in 2s (retry 2 of 3)',
      'g6.12xlarge: launched i-0aaa in us-west-2a',
    ]);
  });

  it('waits for a new instance profile to become visible instead of stopping', async () => {
    ec2Mock
      .on(RunInstancesCommand)
      .rejectsOnce(
        ec2Error(
          'InvalidParameterValue',
          'Value (arn:aws:iam::123456789012:instance-profile/lab-profile) for parameter iamInstanceProfile.arn is invalid. Invalid IAM Instance Profile ARN',
          400,
          'client',
        ),
      )
      .resolvesOnce(launched('i-0aaa'));

    const result = await launchWithFallback(request(), deps());

    expect(result.instanceId).toBe('i-0aaa');
    expect(run.sleeps).toEqual([1000]);
  });

  it('still stops at once on another invalid parameter', async () => {
    ec2Mock
      .on(RunInstancesCommand)
      .rejects(ec2Error('InvalidParameterValue', 'Invalid value for instanceType', 400, 'client'));
    await expect(launchWithFallback(request(), deps())).rejects.toThrow(/InvalidParameterValue/);
    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 1);
  });

  it('counts an AZ as failed when transient errors outlast the retries', async () => {
    ec2Mock
      .on(RunInstancesCommand)
      .rejectsOnce(ec2Error('Throttling', 'Rate exceeded', 400))
      .rejectsOnce(ec2Error('Throttling', 'Rate exceeded', 400))
      .rejectsOnce(ec2Error('Throttling', 'Rate exceeded', 400))
      .rejectsOnce(ec2Error('Throttling', 'Rate exceeded', 400))
      .resolvesOnce(launched('i-0bbb'));

    const result = await launchWithFallback(request(), deps());

    // Backoff, then the token lookups of a launch that may have happened (throttled to the end).
    expect(run.sleeps).toEqual([1000, 2000, 4000, 5000, 5000]);
    expect(result.attempts[0]).toEqual({
      az: 'us-west-2a',
      instanceType: 'g6.12xlarge',
      code: 'Throttling',
      message: 'Rate exceeded',
    });
    expect(result.availabilityZone).toBe('us-west-2b');
    expect(runInputs().map((i) => i.ClientToken)).toEqual([
      ...Array(4).fill(token('us-west-2a')),
      token('us-west-2b'),
    ]);
  });

  it('retries a throttled offerings lookup', async () => {
    ec2Mock
      .on(DescribeInstanceTypeOfferingsCommand)
      .rejectsOnce(ec2Error('RequestLimitExceeded', 'Request limit exceeded.', 503))
      .resolvesOnce(offer('g6.12xlarge', ['us-west-2b']));
    ec2Mock.on(RunInstancesCommand).resolves(launched('i-0bbb'));

    const result = await launchWithFallback(request(), deps());

    expect(result.availabilityZone).toBe('us-west-2b');
    expect(run.sleeps).toEqual([1000]);
  });

  it('tries the fallback type in its own offered AZs after the primary failed everywhere', async () => {
    ec2Mock
      .on(DescribeInstanceTypeOfferingsCommand, {
        Filters: [{ Name: 'instance-type', Values: ['g6.12xlarge'] }],
      })
      .resolves(offer('g6.12xlarge', ['us-west-2a', 'us-west-2b']))
      .on(DescribeInstanceTypeOfferingsCommand, {
        Filters: [{ Name: 'instance-type', Values: ['g5.12xlarge'] }],
      })
      .resolves(offer('g5.12xlarge', ['us-west-2c']));
    ec2Mock
      .on(RunInstancesCommand, { InstanceType: 'g6.12xlarge' })
      .rejects(ice('x'))
      .on(RunInstancesCommand, { InstanceType: 'g5.12xlarge' })
      .resolves(launched('i-0g5'));

    const result = await launchWithFallback(
      request({ instanceTypes: ['g6.12xlarge', 'g5.12xlarge'] }),
      deps(),
    );

    expect(result).toMatchObject({
      instanceId: 'i-0g5',
      instanceType: 'g5.12xlarge',
      availabilityZone: 'us-west-2c',
    });
    expect(run.logged).toEqual([
      'g6.12xlarge: not offered in us-west-2c, skipped',
      'g6.12xlarge: InsufficientInstanceCapacity in us-west-2a, trying us-west-2b',
      'g6.12xlarge: InsufficientInstanceCapacity in us-west-2b, trying g5.12xlarge',
      'g5.12xlarge: not offered in us-west-2a, us-west-2b, skipped',
      'g5.12xlarge: launched i-0g5 in us-west-2c',
    ]);
    expect(runInputs().map((i) => [i.InstanceType, i.NetworkInterfaces?.[0]?.SubnetId])).toEqual([
      ['g6.12xlarge', 'subnet-a'],
      ['g6.12xlarge', 'subnet-b'],
      ['g5.12xlarge', 'subnet-c'],
    ]);
  });

  it('does not try a fallback type when none is configured', async () => {
    ec2Mock.on(RunInstancesCommand).rejects(ice('x'));

    await launchError(launchWithFallback(request(), deps()));

    expect(ec2Mock).toHaveReceivedCommandTimes(DescribeInstanceTypeOfferingsCommand, 1);
    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 3);
  });
});
