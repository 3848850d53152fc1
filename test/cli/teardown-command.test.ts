import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CloudFormationClient,
  CloudFormationServiceException,
  DescribeStacksCommand,
  GetTemplateCommand,
  ListStackResourcesCommand,
  type ResourceStatus,
  type StackResourceSummary,
} from '@aws-sdk/client-cloudformation';
import {
  DescribeInstancesCommand,
  EC2Client,
  EC2ServiceException,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import {
  DeleteRolePolicyCommand,
  DetachRolePolicyCommand,
  IAMClient,
  IAMServiceException,
  ListAttachedRolePoliciesCommand,
  ListRolePoliciesCommand,
  NoSuchEntityException,
} from '@aws-sdk/client-iam';
import { mockClient } from 'aws-sdk-client-mock';
import { allCustomMatcher } from 'aws-sdk-client-mock-vitest';
import { tempDir } from '../temp.ts';
import { captureOutput } from './capture.ts';
import 'aws-sdk-client-mock-vitest/extend';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { runLab } from '../../lib/cli/program.ts';
import { sourceBlockOnPage } from '../../scripts/examples.ts';

expect.extend(allCustomMatcher);

const cfn = mockClient(CloudFormationClient);
const iam = mockClient(IAMClient);
const ec2 = mockClient(EC2Client);

const STACK = 'lab';
const STACK_ID =
  'arn:aws:cloudformation:us-west-2:123456789012:stack/lab/0a1b2c3d-1111-2222-3333-444455556666';
const INSTANCE_ROLE = 'lab-InstanceRole3CCE2F1D-Q1W2E3R4T5Y6';
const HANDLER_ROLE = 'lab-RoleCleanupHandlerServiceRo-AbCdEfGh';
const SSM_CORE = 'arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore';
const PATCH_ASSOCIATION = 'arn:aws:iam::aws:policy/AmazonSSMPatchAssociation';
const DEFAULT_POLICY = 'InstanceRoleDefaultPolicy1234ABCD';
const TRACKED = 'i-0aaaaaaaaaaaaaaaa';
const ORPHAN = 'i-0bbbbbbbbbbbbbbbb';

const awsManaged = (name: string) => ({
  'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:iam::aws:policy/${name}`]],
});

/** The shape CDK gives the lab's template (only what teardown reads). */
const TEMPLATE = {
  Resources: {
    InstanceRole3CCE2F1D: {
      Type: 'AWS::IAM::Role',
      Properties: { ManagedPolicyArns: [awsManaged('AmazonSSMManagedInstanceCore')] },
    },
    InstanceRoleDefaultPolicy1234ABCD: {
      Type: 'AWS::IAM::Policy',
      Properties: {
        PolicyName: DEFAULT_POLICY,
        Roles: [{ Ref: 'InstanceRole3CCE2F1D' }],
        PolicyDocument: {},
      },
    },
    RoleCleanupHandlerServiceRoleED81715D: {
      Type: 'AWS::IAM::Role',
      Properties: { ManagedPolicyArns: [awsManaged('service-role/AWSLambdaBasicExecutionRole')] },
    },
    CapacityLaunch: { Type: 'Custom::CapacityLaunch', Properties: {} },
  },
};

const resource = (
  logicalId: string,
  type: string,
  physicalId: string,
  status: ResourceStatus = 'DELETE_FAILED',
): StackResourceSummary => ({
  LogicalResourceId: logicalId,
  ResourceType: type,
  PhysicalResourceId: physicalId,
  ResourceStatus: status,
  LastUpdatedTimestamp: new Date('2026-01-01T00:00:00Z'),
});

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

async function withEnv<T>(name: string, value: string, action: () => Promise<T>): Promise<T> {
  vi.stubEnv(name, value);
  try {
    return await action();
  } finally {
    vi.unstubAllEnvs();
  }
}

async function teardown(...args: string[]): Promise<Run> {
  const { value: code, stdout, stderr } = await captureOutput(() => runLab(['teardown', ...args]));
  return { code, stdout, stderr };
}

/** The observed case: Quick Setup added one managed and one inline policy to the instance role. */
function observedCase() {
  cfn.on(DescribeStacksCommand, { StackName: STACK }).resolves({
    Stacks: [
      {
        StackName: STACK,
        StackId: STACK_ID,
        StackStatus: 'DELETE_FAILED',
        CreationTime: new Date('2026-01-01T00:00:00Z'),
      },
    ],
  });
  cfn
    .on(ListStackResourcesCommand, { StackName: STACK })
    .resolvesOnce({
      StackResourceSummaries: [
        resource('InstanceRole3CCE2F1D', 'AWS::IAM::Role', INSTANCE_ROLE),
        resource(
          'InstanceRoleDefaultPolicy1234ABCD',
          'AWS::IAM::Policy',
          'lab-Insta-1AB2C3',
          'DELETE_COMPLETE',
        ),
      ],
      NextToken: 'page-2',
    })
    .resolvesOnce({
      StackResourceSummaries: [
        resource('RoleCleanupHandlerServiceRoleED81715D', 'AWS::IAM::Role', HANDLER_ROLE, 'DELETE_COMPLETE'),
        resource('CapacityLaunch', 'Custom::CapacityLaunch', TRACKED, 'DELETE_COMPLETE'),
      ],
    });
  cfn.on(GetTemplateCommand).resolves({ TemplateBody: JSON.stringify(TEMPLATE) });
  iam.on(ListAttachedRolePoliciesCommand, { RoleName: INSTANCE_ROLE }).resolves({
    AttachedPolicies: [
      { PolicyName: 'AmazonSSMManagedInstanceCore', PolicyArn: SSM_CORE },
      { PolicyName: 'AmazonSSMPatchAssociation', PolicyArn: PATCH_ASSOCIATION },
    ],
    IsTruncated: false,
  });
  iam
    .on(ListRolePoliciesCommand, { RoleName: INSTANCE_ROLE })
    .resolves({ PolicyNames: [DEFAULT_POLICY, 'pr1c-patchpolicy-s3'], IsTruncated: false });
  iam.on(DetachRolePolicyCommand).resolves({});
  iam.on(DeleteRolePolicyCommand).resolves({});
  ec2.on(DescribeInstancesCommand).resolves({ Reservations: [] });
}

/** A healthy stack whose tracked instance runs, plus an older lab instance nobody tracks. */
function orphanCase() {
  observedCase();
  cfn.on(DescribeStacksCommand, { StackName: STACK }).resolves({
    Stacks: [
      { StackName: STACK, StackId: STACK_ID, StackStatus: 'UPDATE_COMPLETE', CreationTime: new Date() },
    ],
  });
  cfn.on(ListStackResourcesCommand, { StackName: STACK }).resolves({
    StackResourceSummaries: [
      resource('InstanceRole3CCE2F1D', 'AWS::IAM::Role', INSTANCE_ROLE, 'UPDATE_COMPLETE'),
      resource('CapacityLaunch', 'Custom::CapacityLaunch', TRACKED, 'UPDATE_COMPLETE'),
    ],
  });
  iam
    .on(ListAttachedRolePoliciesCommand)
    .resolves({ AttachedPolicies: [{ PolicyName: 'core', PolicyArn: SSM_CORE }] });
  iam.on(ListRolePoliciesCommand).resolves({ PolicyNames: [DEFAULT_POLICY] });
  ec2
    .on(DescribeInstancesCommand, {
      Filters: [
        { Name: 'tag:llm-gateway-lab:stack', Values: [STACK] },
        { Name: 'instance-state-name', Values: ['pending', 'running', 'stopping', 'stopped'] },
      ],
    })
    .resolves({
      Reservations: [
        { Instances: [{ InstanceId: TRACKED, State: { Name: 'running' } }] },
        {
          Instances: [
            { InstanceId: ORPHAN, State: { Name: 'stopped' }, LaunchTime: new Date('2026-01-02T03:04:05Z') },
          ],
        },
      ],
    });
  ec2.on(DescribeInstancesCommand, { InstanceIds: [ORPHAN] }).resolves({
    Reservations: [{ Instances: [{ InstanceId: ORPHAN, State: { Name: 'terminated' } }] }],
  });
  ec2.on(TerminateInstancesCommand).resolves({});
}

function denied(
  Exception: typeof IAMServiceException | typeof CloudFormationServiceException,
  message: string,
) {
  return new Exception({
    name: 'AccessDenied',
    $fault: 'client',
    $metadata: { httpStatusCode: 403 },
    message,
  });
}

describe('lab teardown', () => {
  beforeEach(() => {
    cfn.reset();
    iam.reset();
    ec2.reset();
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it('prints the plan for the observed case and changes nothing without --yes', async () => {
    observedCase();

    const run = await teardown('--stack', STACK, '--region', 'us-west-2');

    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      [
        'Stack lab in us-west-2: DELETE_FAILED',
        `Role ${INSTANCE_ROLE} (InstanceRole3CCE2F1D):`,
        `  keep    managed policy ${SSM_CORE}`,
        `  keep    inline policy ${DEFAULT_POLICY}`,
        `  detach  managed policy ${PATCH_ASSOCIATION} (not declared by the stack)`,
        '  delete  inline policy pr1c-patchpolicy-s3 (not declared by the stack)',
        'Instances tagged llm-gateway-lab:stack=lab: none running',
        'Plan: detach 1 managed policy and delete 1 inline policy on 1 role.',
        'Nothing was changed. Run again with --yes to do this, then run cdk destroy again: npx cdk destroy lab',
        '',
      ].join('\n'),
    );
    // docs/teardown.md shows this plan (scripts/example-sources.ts: lab-teardown, made only here).
    expect(
      sourceBlockOnPage('docs/teardown.md', 'lab-teardown'),
      'docs/teardown.md: the lab teardown example is stale: copy what lab teardown printed here',
    ).toBe(run.stdout.trimEnd());
    expect(cfn).toHaveReceivedNthCommandWith(ListStackResourcesCommand, 2, {
      StackName: STACK,
      NextToken: 'page-2',
    });
    // The handler role was already deleted by CloudFormation: not looked at.
    expect(iam).not.toHaveReceivedCommandWith(ListAttachedRolePoliciesCommand, { RoleName: HANDLER_ROLE });
    expect(iam).not.toHaveReceivedCommand(DetachRolePolicyCommand);
    expect(iam).not.toHaveReceivedCommand(DeleteRolePolicyCommand);
    expect(ec2).not.toHaveReceivedCommand(TerminateInstancesCommand);
  });

  it('with --yes makes exactly the planned calls, then says to run cdk destroy again', async () => {
    observedCase();

    const run = await teardown('--stack', STACK, '--region', 'us-west-2', '--yes');

    expect(run.code).toBe(0);
    expect(iam).toHaveReceivedCommandExactlyOnceWith(DetachRolePolicyCommand, {
      RoleName: INSTANCE_ROLE,
      PolicyArn: PATCH_ASSOCIATION,
    });
    expect(iam).toHaveReceivedCommandTimes(DetachRolePolicyCommand, 1);
    expect(iam).toHaveReceivedCommandExactlyOnceWith(DeleteRolePolicyCommand, {
      RoleName: INSTANCE_ROLE,
      PolicyName: 'pr1c-patchpolicy-s3',
    });
    expect(iam).toHaveReceivedCommandTimes(DeleteRolePolicyCommand, 1);
    expect(ec2).not.toHaveReceivedCommand(TerminateInstancesCommand);
    expect(run.stdout).toContain(`detached managed policy ${PATCH_ASSOCIATION} from role ${INSTANCE_ROLE}\n`);
    expect(run.stdout).toContain(`deleted inline policy pr1c-patchpolicy-s3 from role ${INSTANCE_ROLE}\n`);
    expect(run.stdout).toMatch(
      /Done: removed 2 policies, terminated 0 instances\. Now run cdk destroy again: npx cdk destroy lab\n$/,
    );
  });

  it('with --yes counts a policy that vanished meanwhile as done', async () => {
    observedCase();
    iam
      .on(DetachRolePolicyCommand)
      .rejects(
        new NoSuchEntityException({ message: 'Policy was not found', $metadata: { httpStatusCode: 404 } }),
      );

    const run = await teardown('--stack', STACK, '--region', 'us-west-2', '--yes');

    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      'Done: removed 1 policy (1 policy had already gone), terminated 0 instances.',
    );
  });

  it('finds an instance tagged with the stack that the stack no longer tracks, and terminates only that one', async () => {
    orphanCase();

    const plan = await teardown('--stack', STACK, '--region', 'us-west-2');
    expect(plan.code).toBe(0);
    expect(plan.stdout).toContain(
      [
        'Instances tagged llm-gateway-lab:stack=lab:',
        `  terminate ${ORPHAN} (stopped, launched 2026-01-02T03:04:05.000Z): not tracked by the stack`,
        `  keep      ${TRACKED} (running): tracked by the stack, cdk destroy terminates it`,
        'Plan: terminate 1 orphan instance.',
      ].join('\n'),
    );
    expect(ec2).not.toHaveReceivedCommand(TerminateInstancesCommand);

    ec2.resetHistory();
    const run = await teardown('--stack', STACK, '--region', 'us-west-2', '--yes');

    expect(run.code).toBe(0);
    expect(ec2).toHaveReceivedCommandExactlyOnceWith(TerminateInstancesCommand, { InstanceIds: [ORPHAN] });
    expect(ec2).toHaveReceivedCommandTimes(TerminateInstancesCommand, 1);
    expect(iam).not.toHaveReceivedCommand(DetachRolePolicyCommand);
    expect(run.stdout).toContain(`terminated: ${ORPHAN}\n`);
    expect(run.stdout).toContain('Done: removed 0 policies, terminated 1 instance.');
  });

  it('says when there is nothing to do', async () => {
    observedCase();
    iam
      .on(ListAttachedRolePoliciesCommand)
      .resolves({ AttachedPolicies: [{ PolicyName: 'c', PolicyArn: SSM_CORE }] });
    iam.on(ListRolePoliciesCommand).resolves({ PolicyNames: [DEFAULT_POLICY] });

    const run = await teardown('--stack', STACK, '--region', 'us-west-2', '--yes');

    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      "Nothing to do: the stack's roles carry only the policies the stack declared, and no instance tagged with the stack is untracked. If cdk destroy still fails, the cause is elsewhere: aws cloudformation describe-stack-events --stack-name lab --region us-west-2",
    );
    expect(iam).not.toHaveReceivedCommand(DetachRolePolicyCommand);
    expect(iam).not.toHaveReceivedCommand(DeleteRolePolicyCommand);
  });

  it('uses the SDK’s region when --region is not given', async () => {
    observedCase();
    vi.stubEnv('AWS_REGION', 'eu-central-1');

    const run = await teardown('--stack', STACK);

    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Stack lab in eu-central-1: DELETE_FAILED\n/);
  });

  describe('errors', () => {
    it('stack not found', async () => {
      cfn.on(DescribeStacksCommand).rejects(
        new CloudFormationServiceException({
          name: 'ValidationError',
          $fault: 'client',
          $metadata: { httpStatusCode: 400 },
          message: 'Stack with id nope does not exist',
        }),
      );

      const run = await teardown('--stack', 'nope', '--region', 'us-west-2');

      expect(run.code).toBe(1);
      expect(run.stderr).toContain(
        "lab teardown: Stack nope does not exist in us-west-2. Check the name (the lab's stackName setting; `aws cloudformation list-stacks` lists the region's stacks) and --region. A stack that has finished deleting needs no teardown.\n",
      );
    });

    it('no credentials', async () => {
      cfn.on(DescribeStacksCommand).rejects(
        Object.assign(new Error('Could not load credentials from any providers'), {
          name: 'CredentialsProviderError',
        }),
      );

      const run = await teardown('--stack', STACK, '--region', 'us-west-2');

      expect(run.code).toBe(1);
      expect(run.stderr).toContain(
        'lab teardown: No AWS credentials found (Could not load credentials from any providers). lab teardown uses the standard credential chain: set AWS_PROFILE',
      );
    });

    it('expired credentials', async () => {
      cfn.on(DescribeStacksCommand).rejects(
        new CloudFormationServiceException({
          name: 'ExpiredToken',
          $fault: 'client',
          $metadata: { httpStatusCode: 403 },
          message: 'The security token included in the request is expired',
        }),
      );

      const run = await teardown('--stack', STACK, '--region', 'us-west-2');

      expect(run.code).toBe(1);
      expect(run.stderr).toContain('AWS rejected the credentials (ExpiredToken: The security token included');
    });

    it('access denied on CloudFormation names the permission AWS names', async () => {
      observedCase();
      cfn
        .on(ListStackResourcesCommand)
        .rejects(
          denied(
            CloudFormationServiceException,
            `User: arn:aws:sts::123456789012:assumed-role/dev/alice is not authorized to perform: cloudformation:ListStackResources on resource: ${STACK_ID} because no identity-based policy allows the cloudformation:ListStackResources action`,
          ),
        );

      const run = await teardown('--stack', STACK, '--region', 'us-west-2');

      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(
        /^lab teardown: Access denied: the caller lacks permission cloudformation:ListStackResources, which lab teardown needs for stack lab in us-west-2/m,
      );
    });

    it('access denied on IAM without an action in the message names the call being made', async () => {
      observedCase();
      iam.on(ListRolePoliciesCommand).rejects(denied(IAMServiceException, 'Access denied'));

      const run = await teardown('--stack', STACK, '--region', 'us-west-2');

      expect(run.code).toBe(1);
      expect(run.stderr).toContain('Access denied: the caller lacks permission iam:ListRolePolicies,');
    });

    it('access denied when detaching with --yes names iam:DetachRolePolicy', async () => {
      observedCase();
      iam.on(DetachRolePolicyCommand).rejects(denied(IAMServiceException, 'not allowed'));

      const run = await teardown('--stack', STACK, '--region', 'us-west-2', '--yes');

      expect(run.code).toBe(1);
      expect(run.stderr).toContain('Access denied: the caller lacks permission iam:DetachRolePolicy,');
      expect(iam).not.toHaveReceivedCommand(DeleteRolePolicyCommand);
    });

    it('UnauthorizedOperation from EC2 names ec2:TerminateInstances', async () => {
      orphanCase();
      ec2.on(TerminateInstancesCommand).rejects(
        new EC2ServiceException({
          name: 'UnauthorizedOperation',
          $fault: 'client',
          $metadata: { httpStatusCode: 403 },
          message:
            'You are not authorized to perform this operation. Encoded authorization failure message: abc',
        }),
      );

      const run = await teardown('--stack', STACK, '--region', 'us-west-2', '--yes');

      expect(run.code).toBe(1);
      expect(run.stderr).toContain('Access denied: the caller lacks permission ec2:TerminateInstances,');
    });

    it('an unexpected IAM error names the role and the policy', async () => {
      observedCase();
      iam.on(DeleteRolePolicyCommand).rejects(
        new IAMServiceException({
          name: 'ServiceFailure',
          $fault: 'server',
          $metadata: { httpStatusCode: 500 },
          message: 'internal failure',
        }),
      );

      const run = await teardown('--stack', STACK, '--region', 'us-west-2', '--yes');

      expect(run.code).toBe(1);
      expect(run.stderr).toContain(
        `lab teardown: iam:DeleteRolePolicy failed on role ${INSTANCE_ROLE}, policy pr1c-patchpolicy-s3: ServiceFailure: internal failure\n`,
      );
    });

    it('no region', async () => {
      vi.stubEnv('AWS_REGION', undefined);
      vi.stubEnv('AWS_DEFAULT_REGION', undefined);
      vi.stubEnv('AWS_PROFILE', undefined);
      vi.stubEnv('AWS_CONFIG_FILE', '/nonexistent/config');
      vi.stubEnv('AWS_SHARED_CREDENTIALS_FILE', '/nonexistent/credentials');
      vi.stubEnv('AWS_EC2_METADATA_DISABLED', 'true');

      const run = await teardown('--stack', STACK);

      expect(run.code).toBe(1);
      expect(run.stderr).toContain(
        'lab teardown: No AWS region: pass --region, or set AWS_REGION or a region in your AWS profile.\n',
      );
      expect(cfn).not.toHaveReceivedAnyCommand();
    });

    it('a bad configuration stops it only when --stack is not given', async () => {
      const file = join(tempDir('lab-teardown-config-'), 'lab.yaml');
      writeFileSync(file, 'stackName: 9lives\n');
      vi.stubEnv('LAB_CONFIG', file);

      const run = await teardown('--region', 'us-west-2');

      expect(run.code).toBe(1);
      expect(run.stderr).toContain('stackName = "9lives": must be a CloudFormation stack name');
      expect(cfn).not.toHaveReceivedAnyCommand();
    });
  });

  it("--stack defaults to the configuration's stackName ($LAB_CONFIG or --config)", async () => {
    observedCase();
    const file = join(tempDir('lab-teardown-config-'), 'lab.yaml');
    writeFileSync(file, `stackName: ${STACK}\n`);

    const viaEnv = await withEnv('LAB_CONFIG', file, () => teardown('--region', 'us-west-2'));
    expect(cfn).toHaveReceivedCommandWith(DescribeStacksCommand, { StackName: STACK });
    for (const client of [cfn, iam, ec2]) client.reset();
    observedCase();
    const viaOption = await captureOutput(() =>
      runLab(['--config', file, 'teardown', '--region', 'us-west-2']),
    );

    expect(viaEnv.code, viaEnv.stderr).toBe(0);
    expect(viaEnv.stdout).toMatch(/^Stack lab in us-west-2: DELETE_FAILED\n/);
    expect(viaOption.value).toBe(0);
    expect(viaOption.stdout).toBe(viaEnv.stdout);
    expect(cfn).toHaveReceivedCommandWith(DescribeStacksCommand, { StackName: STACK });
  });
});
