import {
  CloudFormationClient,
  DescribeStacksCommand,
  type StackStatus,
} from '@aws-sdk/client-cloudformation';
import { DescribeInstancesCommand, EC2Client, type Instance } from '@aws-sdk/client-ec2';
import { S3Client } from '@aws-sdk/client-s3';
import { SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';

/**
 * A deployed lab as the study commands see it through the AWS SDK: the mocked clients, and the
 * stack and instance they answer with.
 */

export let cfn = mockClient(CloudFormationClient);
export let ec2 = mockClient(EC2Client);
export let ssm = mockClient(SSMClient);
export let s3 = mockClient(S3Client);

/**
 * Mocks the four clients afresh, answering nothing yet: each test's beforeEach. The files of a
 * worker share this module (vitest.config.ts: isolate false), and a file run between two of its
 * users may have mocked the same client classes, which removes the stubs made here
 * (aws-sdk-client-mock 4.1.0, mockClient: an existing stub is restored first).
 */
export function mockDeployedLab(): void {
  cfn = mockClient(CloudFormationClient);
  ec2 = mockClient(EC2Client);
  ssm = mockClient(SSMClient);
  s3 = mockClient(S3Client);
}

export const STACK = 'LlmGatewayLab';
export const INSTANCE = 'i-0123456789abcdef0';
export const BUCKET = 'llmgatewaylab-resultsa1b2c3-xyz';

/** The stack with these outputs. */
export function stackWith(outputs: Record<string, string>, status = 'CREATE_COMPLETE', stackName = STACK) {
  cfn.on(DescribeStacksCommand, { StackName: stackName }).resolves({
    Stacks: [
      {
        StackName: stackName,
        StackStatus: status as StackStatus,
        CreationTime: new Date('2025-10-14T08:00:00Z'),
        Outputs: Object.entries(outputs).map(([OutputKey, OutputValue]) => ({ OutputKey, OutputValue })),
      },
    ],
  });
}

/** When the lab's server was launched in these tests: an hour before the CLI tests' clock. */
export const SERVER_LAUNCH = new Date('2025-10-14T08:14:40.000Z');

/** A live host of the stack as DescribeInstances lists it: tagged by its launch. */
export function labHost(
  id: string,
  type: string,
  resource: string,
  launchTime = SERVER_LAUNCH,
  stackName = STACK,
): Instance {
  return {
    InstanceId: id,
    InstanceType: type as 'g6.12xlarge',
    Placement: { AvailabilityZone: 'us-west-2a' },
    State: { Name: 'running' },
    LaunchTime: launchTime,
    Tags: [
      { Key: 'llm-gateway-lab:stack', Value: stackName },
      { Key: 'llm-gateway-lab:resource', Value: resource },
    ],
  };
}

/** The stack's live hosts, as `lab status` looks them up by the stack tag. */
export function liveHosts(...hosts: Instance[]) {
  ec2
    .on(DescribeInstancesCommand)
    .callsFake((input) =>
      input.InstanceIds ? { Reservations: [] } : { Reservations: hosts.map((i) => ({ Instances: [i] })) },
    );
}

/** The stack's instance and results bucket, the instance in `state` (and, running, its one live host). */
export function deployed(state = 'running', stackName = STACK) {
  liveHosts(
    ...(state === 'running'
      ? [labHost(INSTANCE, 'g6.12xlarge', 'CapacityLaunchResource1A2B3C4D', SERVER_LAUNCH, stackName)]
      : []),
  );
  stackWith(
    { InstanceId: INSTANCE, ResultsBucketName: BUCKET, ResultsLocation: `s3://${BUCKET}/${stackName}/` },
    'CREATE_COMPLETE',
    stackName,
  );
  ec2.on(DescribeInstancesCommand, { InstanceIds: [INSTANCE] }).resolves({
    Reservations: [{ Instances: [{ InstanceId: INSTANCE, State: { Name: state as 'running' } }] }],
  });
}
