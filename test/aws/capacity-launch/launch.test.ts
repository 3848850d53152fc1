import {
  DescribeInstancesCommand,
  DescribeInstanceTypeOfferingsCommand,
  RunInstancesCommand,
} from '@aws-sdk/client-ec2';
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import {
  classifyLaunchError,
  clientTokenFor,
  failureTable,
  launchWithFallback,
  onDemandQuotaFor,
  orderCandidateAzs,
} from '../../../lib/aws/capacity-launch/launch.ts';
import {
  deps,
  ec2Error,
  ice,
  launchError,
  launched,
  offer,
  request,
  run,
  SUBNETS,
  token,
  useLaunchHarness,
} from './launch-harness.ts';

/** launchWithFallback across AZs (tokens, lost replies, offerings, preferences) and the message parts. */

const { ec2Mock, runInputs } = useLaunchHarness();

describe('launchWithFallback: AZ fallback, tokens, offerings', () => {
  it('launches in the first AZ with the template, the AZ subnet, a public IP and the stack tag', async () => {
    ec2Mock.on(RunInstancesCommand).resolves(launched('i-0aaa'));

    const result = await launchWithFallback(request(), deps());

    expect(result).toEqual({
      instanceId: 'i-0aaa',
      availabilityZone: 'us-west-2a',
      instanceType: 'g6.12xlarge',
      attempts: [{ az: 'us-west-2a', instanceType: 'g6.12xlarge' }],
      log: ['g6.12xlarge: launched i-0aaa in us-west-2a'],
    });
    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 1);
    const tags = [
      { Key: 'llm-gateway-lab:stack', Value: 'LlmGatewayLab' },
      { Key: 'llm-gateway-lab:generation', Value: 'abcd1234' },
    ];
    expect(ec2Mock).toHaveReceivedCommandWith(RunInstancesCommand, {
      MinCount: 1,
      MaxCount: 1,
      InstanceType: 'g6.12xlarge',
      LaunchTemplate: { LaunchTemplateId: 'lt-0123456789abcdef0', Version: '3' },
      NetworkInterfaces: [
        {
          DeviceIndex: 0,
          SubnetId: 'subnet-a',
          AssociatePublicIpAddress: true,
          DeleteOnTermination: true,
          Groups: ['sg-0123'],
        },
      ],
      ClientToken: token('us-west-2a'),
      TagSpecifications: [
        { ResourceType: 'instance', Tags: tags },
        { ResourceType: 'volume', Tags: tags },
      ],
    });
    // The subnet and groups go on the interface only: EC2 rejects them beside a network interface.
    expect(runInputs()[0]).not.toHaveProperty('SubnetId');
    expect(runInputs()[0]).not.toHaveProperty('SecurityGroupIds');
    expect(ec2Mock).toHaveReceivedCommandWith(DescribeInstanceTypeOfferingsCommand, {
      LocationType: 'availability-zone',
      Filters: [{ Name: 'instance-type', Values: ['g6.12xlarge'] }],
    });
  });

  it('moves on after InsufficientInstanceCapacity in two AZs and launches in the third', async () => {
    ec2Mock
      .on(RunInstancesCommand)
      .rejectsOnce(ice('us-west-2a'))
      .rejectsOnce(ice('us-west-2b'))
      .resolvesOnce(launched('i-0ccc'));

    const result = await launchWithFallback(request(), deps());

    expect(result.instanceId).toBe('i-0ccc');
    expect(result.availabilityZone).toBe('us-west-2c');
    expect(run.logged).toEqual([
      'g6.12xlarge: InsufficientInstanceCapacity in us-west-2a, trying us-west-2b',
      'g6.12xlarge: InsufficientInstanceCapacity in us-west-2b, trying us-west-2c',
      'g6.12xlarge: launched i-0ccc in us-west-2c',
    ]);
    expect(result.log).toEqual(run.logged);
    const inputs = runInputs();
    expect(inputs.map((i) => i.NetworkInterfaces?.[0]?.SubnetId)).toEqual([
      'subnet-a',
      'subnet-b',
      'subnet-c',
    ]);
    expect(new Set(inputs.map((i) => i.ClientToken)).size).toBe(3);
    expect(result.attempts.map((a) => [a.az, a.code])).toEqual([
      ['us-west-2a', 'InsufficientInstanceCapacity'],
      ['us-west-2b', 'InsufficientInstanceCapacity'],
      ['us-west-2c', undefined],
    ]);
  });

  it('derives each token from the CloudFormation request, the type and the AZ: a repeated call reuses it', async () => {
    ec2Mock.on(RunInstancesCommand).rejectsOnce(ice('us-west-2a')).resolves(launched('i-0bbb'));

    await launchWithFallback(request(), deps());
    await launchWithFallback(request(), deps());
    await launchWithFallback(request({ requestId: 'another-request' }), deps());

    const tokens = runInputs().map((i) => i.ClientToken ?? '');
    expect(tokens.slice(0, 3)).toEqual([token('us-west-2a'), token('us-west-2b'), token('us-west-2a')]);
    expect(tokens[3]).toBe(clientTokenFor('another-request', 'g6.12xlarge', 'us-west-2a'));
    // EC2's limit: at most 64 ASCII characters.
    for (const t of tokens) expect(t).toMatch(/^lab-[0-9a-f]{60}$/);
    expect(new Set([token('us-west-2a'), token('us-west-2b'), token('us-west-2a', 'g6.48xlarge')]).size).toBe(
      3,
    );
  });

  it('resolves a lost RunInstances reply by its token instead of launching in the next AZ', async () => {
    const timeout = Object.assign(new Error('socket timed out after 30000 ms'), { name: 'TimeoutError' });
    ec2Mock.on(RunInstancesCommand).rejects(timeout);
    ec2Mock
      .on(DescribeInstancesCommand)
      .resolvesOnce({ Reservations: [] })
      .resolvesOnce({
        Reservations: [{ Instances: [{ InstanceId: 'i-0lost', ClientToken: token('us-west-2a') }] }],
      });

    const result = await launchWithFallback(request(), deps());

    expect(result.instanceId).toBe('i-0lost');
    expect(result.availabilityZone).toBe('us-west-2a');
    // The same token on every retry, then the lookups: one AZ, one instance.
    expect(runInputs().map((i) => i.ClientToken)).toEqual(Array(4).fill(token('us-west-2a')));
    expect(ec2Mock).toHaveReceivedCommandWith(DescribeInstancesCommand, {
      Filters: [{ Name: 'client-token', Values: [token('us-west-2a')] }],
    });
    expect(ec2Mock).toHaveReceivedCommandTimes(DescribeInstancesCommand, 2);
    expect(run.logged).toContain(
      'g6.12xlarge: no answer to RunInstances in us-west-2a (TimeoutError), looking it up by its client token',
    );
    expect(run.logged).toContain('g6.12xlarge: the lost RunInstances in us-west-2a did launch i-0lost');
  });

  it('moves on after a lost reply only when no instance carries the token', async () => {
    const reset = Object.assign(new Error('read ECONNRESET'), { name: 'Error' });
    ec2Mock.on(RunInstancesCommand).rejectsOnce(reset).resolves(launched('i-0bbb'));

    const result = await launchWithFallback(request(), deps());

    expect(result.availabilityZone).toBe('us-west-2b');
    expect(ec2Mock).toHaveReceivedCommandTimes(DescribeInstancesCommand, 3);
    expect(run.logged).toContain(
      'g6.12xlarge: no instance carries the client token of us-west-2a: nothing was launched there',
    );
  });

  it('stops when an uncertain launch cannot be looked up, rather than risk a second host', async () => {
    const timeout = Object.assign(new Error('socket timed out'), { name: 'TimeoutError' });
    ec2Mock.on(RunInstancesCommand).rejects(timeout);
    ec2Mock.on(DescribeInstancesCommand).rejects(ec2Error('UnauthorizedOperation', 'not authorized', 403));

    const err = await launchError(launchWithFallback(request(), deps()));

    expect(err.message).toContain(
      `Launch stopped: RunInstances in us-west-2a ended with TimeoutError and the lookup of its client token ${token('us-west-2a')} failed (UnauthorizedOperation: not authorized)`,
    );
    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 4);
  });

  it('skips an AZ that answers Unsupported', async () => {
    ec2Mock
      .on(RunInstancesCommand)
      .rejectsOnce(
        ec2Error(
          'Unsupported',
          'Your requested instance type (g6.12xlarge) is not supported in your requested Availability Zone (us-west-2a).',
        ),
      )
      .resolvesOnce(launched('i-0bbb'));

    const result = await launchWithFallback(request(), deps());

    expect(result.availabilityZone).toBe('us-west-2b');
    expect(run.logged[0]).toBe('g6.12xlarge: Unsupported in us-west-2a, trying us-west-2b');
  });

  it('never tries an AZ that does not offer the type', async () => {
    ec2Mock
      .on(DescribeInstanceTypeOfferingsCommand)
      .resolves(offer('g6.12xlarge', ['us-west-2b', 'us-west-2d']));
    ec2Mock.on(RunInstancesCommand).rejects(ice('x'));

    const err = await launchError(launchWithFallback(request({ subnets: SUBNETS }), deps()));

    expect(runInputs().map((i) => i.NetworkInterfaces?.[0]?.SubnetId)).toEqual(['subnet-b', 'subnet-d']);
    expect(err.attempts.map((a) => a.az)).toEqual(['us-west-2b', 'us-west-2d']);
    expect(run.logged[0]).toBe('g6.12xlarge: not offered in us-west-2a, us-west-2c, skipped');
  });

  it('says so when no AZ with a subnet offers the type, without any RunInstances', async () => {
    ec2Mock.on(DescribeInstanceTypeOfferingsCommand).resolves(offer('g6.12xlarge', ['us-west-2d']));

    const err = await launchError(launchWithFallback(request(), deps()));

    expect(ec2Mock).not.toHaveReceivedCommand(RunInstancesCommand);
    expect(err.message).toBe(
      'No instance launched: no Availability Zone with a lab subnet (us-west-2a, us-west-2b, us-west-2c) offers g6.12xlarge.',
    );
  });

  it('tries the preferred AZs first, in their order, then the rest by name', async () => {
    ec2Mock
      .on(DescribeInstanceTypeOfferingsCommand)
      .resolves(offer('g6.12xlarge', ['us-west-2d', 'us-west-2a', 'us-west-2c', 'us-west-2b']));
    ec2Mock.on(RunInstancesCommand).rejects(ice('x'));

    await launchError(
      launchWithFallback(request({ subnets: SUBNETS, preferredAzs: ['us-west-2c', 'us-west-2b'] }), deps()),
    );

    expect(runInputs().map((i) => i.NetworkInterfaces?.[0]?.SubnetId)).toEqual([
      'subnet-c',
      'subnet-b',
      'subnet-a',
      'subnet-d',
    ]);
  });

  it('reads every page of the offerings', async () => {
    ec2Mock
      .on(DescribeInstanceTypeOfferingsCommand)
      .resolvesOnce(offer('g6.12xlarge', ['us-west-2c'], 'page-2'))
      .resolvesOnce(offer('g6.12xlarge', ['us-west-2b'], 'page-3'))
      .resolvesOnce(offer('g6.12xlarge', []));
    ec2Mock.on(RunInstancesCommand).rejects(ice('x'));

    const err = await launchError(launchWithFallback(request(), deps()));

    expect(ec2Mock).toHaveReceivedCommandTimes(DescribeInstanceTypeOfferingsCommand, 3);
    expect(ec2Mock).toHaveReceivedNthCommandWith(DescribeInstanceTypeOfferingsCommand, 2, {
      NextToken: 'page-2',
    });
    expect(ec2Mock).toHaveReceivedNthCommandWith(DescribeInstanceTypeOfferingsCommand, 3, {
      NextToken: 'page-3',
    });
    expect(err.attempts.map((a) => a.az)).toEqual(['us-west-2b', 'us-west-2c']);
  });
});

describe('classifyLaunchError', () => {
  it.each([
    ['InsufficientInstanceCapacity', 500, 'next-az'],
    ['InsufficientReservedInstanceCapacity', 500, 'next-az'],
    ['InstanceLimitExceeded', 400, 'stop'],
    ['InvalidParameter', 400, 'stop'],
    ['InvalidLaunchTemplateId.NotFound', 400, 'stop'],
    ['InternalError', 500, 'transient'],
    ['SomethingNew', 503, 'transient'],
    ['SomethingNew', 500, 'next-az'],
  ] as const)('%s (HTTP %i) is %s', (name, status, expected) => {
    expect(classifyLaunchError(ec2Error(name, 'm', status))).toBe(expected);
  });

  it('treats an error that is not an SDK error as a failure of the AZ', () => {
    expect(classifyLaunchError('boom')).toBe('next-az');
  });
});

describe('message parts', () => {
  it('names the quota of the instance family', () => {
    expect(onDemandQuotaFor('g6.12xlarge').name).toBe('Running On-Demand G and VT instances');
    expect(onDemandQuotaFor('p4d.24xlarge').name).toBe('Running On-Demand P instances');
    expect(onDemandQuotaFor('m7i.large').code).toBe('L-1216C47A');
  });

  it('names the fallback type instead of a vCPU count it does not know', async () => {
    ec2Mock
      .on(RunInstancesCommand, { InstanceType: 'g6.12xlarge' })
      .rejects(ice('x'))
      .on(RunInstancesCommand, { InstanceType: 'p4d.24xlarge' })
      .rejects(ec2Error('InstanceLimitExceeded', 'Your quota allows for 0 more running instance(s).'));
    ec2Mock.on(DescribeInstanceTypeOfferingsCommand).resolves(offer('any', ['us-west-2a']));

    const err = await launchError(
      launchWithFallback(request({ instanceTypes: ['g6.12xlarge', 'p4d.24xlarge'] }), deps()),
    );

    expect(err.message).toContain('"Running On-Demand P instances" quota');
    expect(err.message).toContain('as many vCPUs as one p4d.24xlarge has');
    expect(err.message).toContain('| us-west-2a | g6.12xlarge | InsufficientInstanceCapacity |');
  });

  it('keeps table cells short and on one line', () => {
    const table = failureTable([{ az: 'a', instanceType: 't', code: 'C', message: `x\n${'y'.repeat(500)}` }]);
    const row = table.split('\n')[2] ?? '';
    expect(row.length).toBeLessThan(200);
    expect(row).toMatch(/…\s\|$/);
  });

  it('orders candidates without duplicates', () => {
    const offered = new Set(['us-west-2a', 'us-west-2b']);
    expect(orderCandidateAzs(offered, SUBNETS, ['us-west-2b', 'us-west-2b', 'us-west-2c'])).toEqual([
      'us-west-2b',
      'us-west-2a',
    ]);
  });
});
