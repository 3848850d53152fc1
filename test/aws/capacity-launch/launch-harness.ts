import {
  DescribeInstancesCommand,
  DescribeInstanceTypeOfferingsCommand,
  EC2Client,
  EC2ServiceException,
  RunInstancesCommand,
  type RunInstancesCommandInput,
} from '@aws-sdk/client-ec2';
import { type AwsClientStub, mockClient } from 'aws-sdk-client-mock';
import { beforeEach, expect } from 'vitest';
import {
  CapacityLaunchError,
  clientTokenFor,
  type LaunchDeps,
  type LaunchRequest,
} from '../../../lib/aws/capacity-launch/launch.ts';

/** What the launchWithFallback test files share: the request, EC2's answers and errors, the deps. */

export function ec2Error(
  name: string,
  message: string,
  httpStatusCode = 400,
  $fault: 'client' | 'server' = 'client',
) {
  return new EC2ServiceException({ name, $fault, $metadata: { httpStatusCode }, message });
}

export const ice = (az: string) =>
  ec2Error(
    'InsufficientInstanceCapacity',
    `We currently do not have sufficient g6.12xlarge capacity in the Availability Zone you requested (${az}).`,
    500,
    'server',
  );

export const SUBNETS = [
  { subnetId: 'subnet-a', availabilityZone: 'us-west-2a' },
  { subnetId: 'subnet-b', availabilityZone: 'us-west-2b' },
  { subnetId: 'subnet-c', availabilityZone: 'us-west-2c' },
  { subnetId: 'subnet-d', availabilityZone: 'us-west-2d' },
];

export const REQUEST_ID = '5d4f7c1e-8a5b-4c1e-9f0a-0123456789ab';
export const token = (az: string, type = 'g6.12xlarge') => clientTokenFor(REQUEST_ID, type, az);

export function request(overrides: Partial<LaunchRequest> = {}): LaunchRequest {
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

export function offer(instanceType: string, azs: string[], NextToken?: string) {
  return {
    InstanceTypeOfferings: azs.map((Location) => ({
      InstanceType: instanceType as never,
      LocationType: 'availability-zone' as const,
      Location,
    })),
    NextToken,
  };
}

export function launched(instanceId: string) {
  return { Instances: [{ InstanceId: instanceId }] };
}

/** What the launch slept and logged in the current test. */
export const run: { sleeps: number[]; logged: string[] } = { sleeps: [], logged: [] };

export function deps(): LaunchDeps {
  return {
    ec2: new EC2Client({ region: 'us-west-2', maxAttempts: 1 }),
    sleep: async (ms) => {
      run.sleeps.push(ms);
    },
    log: (line) => run.logged.push(line),
  };
}

export async function launchError(promise: Promise<unknown>): Promise<CapacityLaunchError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CapacityLaunchError);
  return err as CapacityLaunchError;
}

/**
 * Mocks EC2 for the calling file (with isolate: false the last mockClient of a class is the one
 * installed) and registers its set-up; `runInputs` lists the RunInstances calls of the test.
 */
export function useLaunchHarness(): {
  ec2Mock: AwsClientStub<EC2Client>;
  runInputs: () => RunInstancesCommandInput[];
} {
  const ec2Mock = mockClient(EC2Client);
  beforeEach(() => {
    ec2Mock.reset();
    run.sleeps = [];
    run.logged = [];
    // No instance carries a token unless a test says so.
    ec2Mock.on(DescribeInstancesCommand).resolves({ Reservations: [] });
    ec2Mock
      .on(DescribeInstanceTypeOfferingsCommand)
      .resolves(offer('g6.12xlarge', ['us-west-2a', 'us-west-2b', 'us-west-2c']));
  });
  const runInputs = () => ec2Mock.commandCalls(RunInstancesCommand).map((call) => call.args[0].input);
  return { ec2Mock, runInputs };
}
