import {
  DescribeInstancesCommand,
  DescribeInstanceTypeOfferingsCommand,
  EC2Client,
  EC2ServiceException,
  RunInstancesCommand,
  type RunInstancesCommandInput,
} from '@aws-sdk/client-ec2';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  CapacityLaunchError,
  classifyLaunchError,
  clientTokenFor,
  failureTable,
  type LaunchDeps,
  type LaunchRequest,
  launchWithFallback,
  onDemandQuotaFor,
  orderCandidateAzs,
} from '../../../lib/aws/capacity-launch/launch.ts';

const ec2Mock = mockClient(EC2Client);

function ec2Error(
  name: string,
  message: string,
  httpStatusCode = 400,
  $fault: 'client' | 'server' = 'client',
) {
  return new EC2ServiceException({ name, $fault, $metadata: { httpStatusCode }, message });
}

const ice = (az: string) =>
  ec2Error(
    'InsufficientInstanceCapacity',
    `We currently do not have sufficient g6.12xlarge capacity in the Availability Zone you requested (${az}).`,
    500,
    'server',
  );

const SUBNETS = [
  { subnetId: 'subnet-a', availabilityZone: 'us-west-2a' },
  { subnetId: 'subnet-b', availabilityZone: 'us-west-2b' },
  { subnetId: 'subnet-c', availabilityZone: 'us-west-2c' },
  { subnetId: 'subnet-d', availabilityZone: 'us-west-2d' },
];

const REQUEST_ID = '5d4f7c1e-8a5b-4c1e-9f0a-0123456789ab';
const token = (az: string, type = 'g6.12xlarge') => clientTokenFor(REQUEST_ID, type, az);

function request(overrides: Partial<LaunchRequest> = {}): LaunchRequest {
  return {
    launchTemplateId: 'lt-0123456789abcdef0',
    launchTemplateVersion: '3',
    subnets: SUBNETS.slice(0, 3),
    securityGroupId: 'sg-0123',
    instanceTypes: ['g6.12xlarge'],
    preferredAzs: [],
    vcpusNeeded: 48,
    stackTag: { key: 'llm-gateway-lab:stack', value: 'LlmGatewayLab' },
    generationTag: { key: 'llm-gateway-lab:generation', value: 'abcd1234' },
    requestId: REQUEST_ID,
    ...overrides,
  };
}

function offer(instanceType: string, azs: string[], NextToken?: string) {
  return {
    InstanceTypeOfferings: azs.map((Location) => ({
      InstanceType: instanceType as never,
      LocationType: 'availability-zone' as const,
      Location,
    })),
    NextToken,
  };
}

function launched(instanceId: string) {
  return { Instances: [{ InstanceId: instanceId }] };
}

let sleeps: number[];
let logged: string[];

function deps(): LaunchDeps {
  return {
    ec2: new EC2Client({ region: 'us-west-2', maxAttempts: 1 }),
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    log: (line) => logged.push(line),
  };
}

function runInputs(): RunInstancesCommandInput[] {
  return ec2Mock.commandCalls(RunInstancesCommand).map((call) => call.args[0].input);
}

async function launchError(promise: Promise<unknown>): Promise<CapacityLaunchError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CapacityLaunchError);
  return err as CapacityLaunchError;
}

beforeEach(() => {
  ec2Mock.reset();
  sleeps = [];
  logged = [];
  // No instance carries a token unless a test says so.
  ec2Mock.on(DescribeInstancesCommand).resolves({ Reservations: [] });
  ec2Mock
    .on(DescribeInstanceTypeOfferingsCommand)
    .resolves(offer('g6.12xlarge', ['us-west-2a', 'us-west-2b', 'us-west-2c']));
});

describe('launchWithFallback', () => {
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
    expect(logged).toEqual([
      'g6.12xlarge: InsufficientInstanceCapacity in us-west-2a, trying us-west-2b',
      'g6.12xlarge: InsufficientInstanceCapacity in us-west-2b, trying us-west-2c',
      'g6.12xlarge: launched i-0ccc in us-west-2c',
    ]);
    expect(result.log).toEqual(logged);
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
    expect(logged).toContain(
      'g6.12xlarge: no answer to RunInstances in us-west-2a (TimeoutError), looking it up by its client token',
    );
    expect(logged).toContain('g6.12xlarge: the lost RunInstances in us-west-2a did launch i-0lost');
  });

  it('moves on after a lost reply only when no instance carries the token', async () => {
    const reset = Object.assign(new Error('read ECONNRESET'), { name: 'Error' });
    ec2Mock.on(RunInstancesCommand).rejectsOnce(reset).resolves(launched('i-0bbb'));

    const result = await launchWithFallback(request(), deps());

    expect(result.availabilityZone).toBe('us-west-2b');
    expect(ec2Mock).toHaveReceivedCommandTimes(DescribeInstancesCommand, 3);
    expect(logged).toContain(
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
    expect(logged[0]).toBe('g6.12xlarge: Unsupported in us-west-2a, trying us-west-2b');
  });

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
    expect(logged).toEqual([
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
    expect(logged).toContain(
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
    expect(logged.at(-1)).toBe(
      'g6.12xlarge: InsufficientInstanceCapacity in us-west-2c, no Availability Zone left',
    );
  });

  it('never tries an AZ that does not offer the type', async () => {
    ec2Mock
      .on(DescribeInstanceTypeOfferingsCommand)
      .resolves(offer('g6.12xlarge', ['us-west-2b', 'us-west-2d']));
    ec2Mock.on(RunInstancesCommand).rejects(ice('x'));

    const err = await launchError(launchWithFallback(request({ subnets: SUBNETS }), deps()));

    expect(runInputs().map((i) => i.NetworkInterfaces?.[0]?.SubnetId)).toEqual(['subnet-b', 'subnet-d']);
    expect(err.attempts.map((a) => a.az)).toEqual(['us-west-2b', 'us-west-2d']);
    expect(logged[0]).toBe('g6.12xlarge: not offered in us-west-2a, us-west-2c, skipped');
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

  it('retries a transient error in the same AZ with the same token and backoff, then launches', async () => {
    ec2Mock
      .on(RunInstancesCommand)
      .rejectsOnce(ec2Error('RequestLimitExceeded', 'Request limit exceeded.', 503, 'client'))
      .rejectsOnce(ec2Error('ServiceUnavailable', 'Service unavailable.', 503, 'server'))
      .resolvesOnce(launched('i-0aaa'));

    const result = await launchWithFallback(request(), deps());

    expect(result.availabilityZone).toBe('us-west-2a');
    expect(sleeps).toEqual([1000, 2000]);
    const inputs = runInputs();
    expect(inputs.map((i) => i.NetworkInterfaces?.[0]?.SubnetId)).toEqual([
      'subnet-a',
      'subnet-a',
      'subnet-a',
    ]);
    // A retry repeats the same request: the token keeps EC2 from launching twice.
    expect(new Set(inputs.map((i) => i.ClientToken))).toEqual(new Set([token('us-west-2a')]));
    expect(logged).toEqual([
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
    expect(sleeps).toEqual([1000]);
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
    expect(sleeps).toEqual([1000, 2000, 4000, 5000, 5000]);
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
    expect(sleeps).toEqual([1000]);
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
    expect(logged).toEqual([
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
