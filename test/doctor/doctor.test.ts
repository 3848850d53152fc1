import { CloudFormationServiceException, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import {
  DescribeInstancesCommand,
  DescribeInstanceTypeOfferingsCommand,
  DescribeInstanceTypesCommand,
} from '@aws-sdk/client-ec2';
import { SimulatePrincipalPolicyCommand } from '@aws-sdk/client-iam';
import { GetAWSDefaultServiceQuotaCommand, GetServiceQuotaCommand } from '@aws-sdk/client-service-quotas';
import { GetParameterCommand } from '@aws-sdk/client-ssm';
import { GetCallerIdentityCommand, STSServiceException } from '@aws-sdk/client-sts';
import { allCustomMatcher } from 'aws-sdk-client-mock-vitest';
import 'aws-sdk-client-mock-vitest/extend';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import type { BootstrapRequirement } from '../../lib/doctor/bootstrap.ts';
import { bootstrapRequirement } from '../../lib/doctor/bootstrap-requirement.ts';
import { type DoctorReport, doctorPassed, runDoctor } from '../../lib/doctor/doctor.ts';
import type { DoctorCheck, DoctorLine } from '../../lib/doctor/model.ts';
import { AZS, CALLER_ROLE_ARN, type FakeAccount, healthyAccount, mockAccount } from './fake-account.ts';

expect.extend(allCustomMatcher);

let requirement: BootstrapRequirement;
beforeAll(() => {
  requirement = bootstrapRequirement();
});

let restore: (() => void) | undefined;
afterEach(() => {
  restore?.();
  restore = undefined;
});

const DEFAULT = parseLabConfig({});
const NOW = new Date('2026-12-01T12:00:00Z');

async function doctor(account: FakeAccount, config: LabConfig = DEFAULT) {
  const fake = mockAccount(account);
  restore = fake.restore;
  const steps: string[] = [];
  const report = await runDoctor(fake.clients, config, {
    requirement,
    progress: (step) => steps.push(step),
    now: () => NOW,
  });
  return { report, mocks: fake.mocks, steps };
}

function linesOf(report: DoctorReport, check: DoctorCheck): DoctorLine[] {
  return report.lines.filter((line) => line.check === check);
}

function only(report: DoctorReport, check: DoctorCheck): DoctorLine {
  const lines = linesOf(report, check);
  expect(lines).toHaveLength(1);
  return lines[0] as DoctorLine;
}

describe("the bootstrap requirement, read from this project's aws-cdk-lib", () => {
  it('is 6 to deploy and 8 for lookups, in the qualifier parameter; the CLI template is newer', () => {
    expect(requirement).toMatchObject({
      toolkitStackName: 'CDKToolkit',
      qualifier: 'hnb659fds',
      versionParameter: '/cdk-bootstrap/hnb659fds/version',
      deployVersion: 6,
      lookupVersion: 8,
    });
    expect(requirement.cliTemplateVersion).toBeGreaterThanOrEqual(requirement.lookupVersion);
  });

  it('follows a qualifier and toolkit stack name', () => {
    expect(bootstrapRequirement({ qualifier: 'lab42', toolkitStackName: 'LabToolkit' })).toMatchObject({
      qualifier: 'lab42',
      versionParameter: '/cdk-bootstrap/lab42/version',
      toolkitStackName: 'LabToolkit',
    });
  });
});

describe('lab doctor on a healthy account', () => {
  it('passes every line of the default lab and asks only read calls', async () => {
    const { report, mocks, steps } = await doctor(healthyAccount());

    expect(report.lines.filter((line) => line.status !== 'pass')).toEqual([]);
    expect(doctorPassed(report)).toBe(true);
    expect(report).toMatchObject({ account: '123456789012', region: 'us-west-2', lab: 'llm-gateway' });
    expect(report.lines.map((line) => line.check)).toEqual([
      'credentials',
      'bootstrap',
      'instance-types',
      'ami',
      'quota',
      'live-hosts',
      'permissions',
      'permissions',
    ]);
    expect(steps.length).toBeGreaterThanOrEqual(6);
    // Offerings come in pages of two: every page was read.
    expect(mocks.ec2).toHaveReceivedCommandTimes(DescribeInstanceTypeOfferingsCommand, 2);
    expect(mocks.ec2).toHaveReceivedCommandWith(DescribeInstanceTypeOfferingsCommand, {
      LocationType: 'availability-zone',
      Filters: [{ Name: 'instance-type', Values: ['g6.12xlarge'] }],
    });
    expect(mocks.serviceQuotas).toHaveReceivedCommandWith(GetServiceQuotaCommand, {
      ServiceCode: 'ec2',
      QuotaCode: 'L-DB2E81BA',
    });
    expect(mocks.ssm).toHaveReceivedCommandWith(GetParameterCommand, {
      Name: '/cdk-bootstrap/hnb659fds/version',
    });
  });
});

describe('credentials', () => {
  it('pass: names the caller, account and region', async () => {
    const { report } = await doctor(healthyAccount());
    expect(only(report, 'credentials')).toEqual({
      check: 'credentials',
      status: 'pass',
      subject: 'account 123456789012, region us-west-2',
      message: 'arn:aws:sts::123456789012:assumed-role/LabDeployer/alice',
    });
  });

  it('warn: the root user', async () => {
    const { report } = await doctor({ ...healthyAccount(), arn: 'arn:aws:iam::123456789012:root' });
    expect(only(report, 'credentials')).toMatchObject({
      status: 'warn',
      fix: expect.stringContaining('IAM role or user'),
    });
    // Root is not limited by policies: the caller's permission line passes without a simulation.
    expect(linesOf(report, 'permissions')[0]).toMatchObject({
      status: 'pass',
      message: expect.stringContaining('root'),
    });
  });

  it('fail: no credentials stops the run with one line', async () => {
    const fake = mockAccount(healthyAccount());
    restore = fake.restore;
    fake.mocks.sts.on(GetCallerIdentityCommand).rejects(
      Object.assign(new Error('Could not load credentials from any providers'), {
        name: 'CredentialsProviderError',
      }),
    );
    await expect(runDoctor(fake.clients, DEFAULT, { requirement })).rejects.toMatchObject({
      kind: 'no-credentials',
      message: expect.stringMatching(
        /^No AWS credentials found \(Could not load credentials from any providers\)\. lab doctor uses/,
      ),
    });
    expect(fake.mocks.ec2).not.toHaveReceivedAnyCommand();
  });

  it('fail: expired credentials stop the run with one line', async () => {
    const fake = mockAccount(healthyAccount());
    restore = fake.restore;
    fake.mocks.sts.on(GetCallerIdentityCommand).rejects(
      new STSServiceException({
        name: 'ExpiredToken',
        $fault: 'client',
        $metadata: { httpStatusCode: 403 },
        message: 'The security token included in the request is expired',
      }),
    );
    await expect(runDoctor(fake.clients, DEFAULT, { requirement })).rejects.toMatchObject({
      kind: 'no-credentials',
      message: expect.stringContaining('AWS rejected the credentials (ExpiredToken'),
    });
  });
});

describe('bootstrap', () => {
  const withVersion = (version: string, status = 'UPDATE_COMPLETE'): FakeAccount => {
    const account = healthyAccount();
    return {
      ...account,
      stacks: { CDKToolkit: { status, version } },
      parameters: { ...account.parameters, '/cdk-bootstrap/hnb659fds/version': version },
    };
  };

  it('pass: the current template', async () => {
    const { report } = await doctor(healthyAccount());
    expect(only(report, 'bootstrap')).toMatchObject({
      status: 'pass',
      subject: 'CDKToolkit (qualifier hnb659fds)',
      message: expect.stringContaining('bootstrap version 33 (this aws-cdk-lib needs at least 6 to deploy'),
    });
  });

  it('warn: deployable but older than the CLI template', async () => {
    const { report } = await doctor(withVersion('21'));
    expect(only(report, 'bootstrap')).toMatchObject({
      status: 'warn',
      fix: 'optional: npx cdk bootstrap aws://123456789012/us-west-2 upgrades it',
    });
  });

  it('warn: too old for the lookup role', async () => {
    const { report } = await doctor(withVersion('7'));
    expect(only(report, 'bootstrap')).toMatchObject({
      status: 'warn',
      message: expect.stringContaining('lookup role needs 8'),
    });
  });

  it('fail: older than aws-cdk-lib needs', async () => {
    const { report } = await doctor(withVersion('5'));
    expect(only(report, 'bootstrap')).toMatchObject({
      status: 'fail',
      message: expect.stringContaining('bootstrap version 5; this aws-cdk-lib needs at least 6'),
      fix: 'upgrade it: npx cdk bootstrap aws://123456789012/us-west-2',
    });
    expect(doctorPassed((await doctor(withVersion('5'))).report)).toBe(false);
  });

  it('fail: not bootstrapped at all', async () => {
    const account = healthyAccount();
    const { '/cdk-bootstrap/hnb659fds/version': _, ...parameters } = account.parameters;
    const { report } = await doctor({ ...account, stacks: {}, parameters });
    expect(only(report, 'bootstrap')).toMatchObject({
      status: 'fail',
      message: expect.stringContaining('is not bootstrapped for CDK'),
      fix: 'npx cdk bootstrap aws://123456789012/us-west-2',
    });
    // The execution role does not exist either: its simulation says so instead of failing twice.
    expect(linesOf(report, 'permissions')[1]).toMatchObject({
      status: 'warn',
      message: expect.stringContaining('does not exist'),
    });
  });

  it('fail: a stack bootstrapped with another qualifier', async () => {
    const account = healthyAccount();
    const { '/cdk-bootstrap/hnb659fds/version': _, ...parameters } = account.parameters;
    const { report } = await doctor({
      ...account,
      parameters: { ...parameters, '/cdk-bootstrap/other/version': '33' },
    });
    expect(only(report, 'bootstrap')).toMatchObject({
      status: 'fail',
      message: expect.stringContaining('another qualifier'),
    });
  });

  it('fail: a bootstrap stack that rolled back', async () => {
    const { report } = await doctor(withVersion('33', 'ROLLBACK_COMPLETE'));
    expect(only(report, 'bootstrap')).toMatchObject({
      status: 'fail',
      message: 'the bootstrap stack is ROLLBACK_COMPLETE',
    });
  });

  it('warn: the parameter without a stack of that name', async () => {
    const { report } = await doctor({ ...healthyAccount(), stacks: {} });
    expect(only(report, 'bootstrap')).toMatchObject({
      status: 'warn',
      message: expect.stringContaining('no stack named CDKToolkit'),
      fix: 'pass --toolkit-stack-name with the stack cdk bootstrap made',
    });
  });

  it('fail: a version parameter that is not a number', async () => {
    const { report } = await doctor(withVersion('latest'));
    expect(only(report, 'bootstrap')).toMatchObject({
      status: 'fail',
      message: '/cdk-bootstrap/hnb659fds/version holds "latest", not a version number',
    });
  });

  it('warn: not checked when the stack cannot be read', async () => {
    const fake = mockAccount(healthyAccount());
    restore = fake.restore;
    fake.mocks.cloudFormation.on(DescribeStacksCommand).rejects(
      new CloudFormationServiceException({
        name: 'AccessDenied',
        $fault: 'client',
        $metadata: { httpStatusCode: 403 },
        message: 'User is not authorized to perform: cloudformation:DescribeStacks',
      }),
    );
    const report = await runDoctor(fake.clients, DEFAULT, { requirement, now: () => NOW });
    expect(only(report, 'bootstrap')).toMatchObject({
      status: 'warn',
      message: 'not checked: the caller may not call cloudformation:DescribeStacks (AccessDenied)',
    });
    // One denied call hides nothing else.
    expect(report.lines).toHaveLength(8);
  });
});

describe('instance types', () => {
  it('pass: the AZs offering the server type', async () => {
    const { report } = await doctor(healthyAccount());
    expect(only(report, 'instance-types')).toMatchObject({
      status: 'pass',
      subject: 'server: g6.12xlarge',
      message: 'offered: g6.12xlarge in us-west-2a, us-west-2b, us-west-2c',
    });
  });

  it('warn: only a fallback type is offered', async () => {
    const config = parseLabConfig({ instance: { fallbackTypes: ['g6.xlarge'] } });
    const { report } = await doctor({ ...healthyAccount(), offerings: { 'g6.xlarge': AZS } }, config);
    expect(only(report, 'instance-types')).toMatchObject({
      status: 'warn',
      message: expect.stringContaining(
        'g6.12xlarge is not offered in us-west-2; the launch would use g6.xlarge',
      ),
    });
  });

  it('fail: no Availability Zone offers the type', async () => {
    const { report } = await doctor({ ...healthyAccount(), offerings: {} });
    expect(only(report, 'instance-types')).toMatchObject({
      status: 'fail',
      message: 'not offered in any Availability Zone of us-west-2',
      fix: expect.stringContaining(
        'aws ec2 describe-instance-type-offerings --location-type availability-zone',
      ),
    });
  });

  it('warn: a preferred AZ that offers none of the types', async () => {
    const config = parseLabConfig({ instance: { preferredAzs: ['us-west-2d'] } });
    const { report } = await doctor(healthyAccount(), config);
    expect(only(report, 'instance-types')).toMatchObject({
      status: 'warn',
      message: expect.stringContaining('us-west-2d'),
    });
  });

  it("agents: warn when the agent's type misses some of the server's AZs, fail when it misses all", async () => {
    const config = parseLabConfig({
      instance: { readyTimeoutMinutes: 60 },
      cluster: {
        agents: [
          { name: 'gpu', role: 'gpu', count: 1, instanceType: 'g6.12xlarge' },
          { name: 'cpu', role: 'cpu', instanceType: 'c7i.4xlarge' },
        ],
      },
      vllm: { replicas: 4 },
    });
    const partly = {
      ...healthyAccount(),
      offerings: { ...healthyAccount().offerings, 'c7i.4xlarge': ['us-west-2a', 'us-west-2d'] },
    };
    const { report } = await doctor(partly, config);
    expect(linesOf(report, 'instance-types').map((line) => [line.subject, line.status])).toEqual([
      ['server: g6.12xlarge', 'pass'],
      ['gpu-1: g6.12xlarge', 'pass'],
      ['cpu-1: c7i.4xlarge', 'warn'],
    ]);
    expect(linesOf(report, 'instance-types')[2]?.fix).toBe('set instance.preferredAzs to [us-west-2a]');

    const apart = {
      ...healthyAccount(),
      offerings: { ...healthyAccount().offerings, 'c7i.4xlarge': ['us-west-2d'] },
    };
    const second = await doctor(apart, config);
    expect(linesOf(second.report, 'instance-types')[2]).toMatchObject({
      status: 'fail',
      message: expect.stringContaining("an agent launches in the server's Availability Zone"),
    });
  });

  it("warn: a type EC2 describes otherwise than the configuration; the quota counts EC2's vCPUs", async () => {
    const config = parseLabConfig({ instance: { type: 'g6.48xlarge' } });
    const account = { ...healthyAccount(), offerings: { ...healthyAccount().offerings, 'g6.48xlarge': AZS } };
    const { report, mocks } = await doctor(account, config);
    expect(mocks.ec2).toHaveReceivedCommandWith(DescribeInstanceTypesCommand, {
      InstanceTypes: ['g6.48xlarge'],
    });
    expect(linesOf(report, 'instance-types')[1]).toEqual({
      check: 'instance-types',
      status: 'warn',
      subject: 'server: g6.48xlarge size',
      message:
        "instance says 48 vCPUs (EC2: 192), 4 GPUs (EC2: 8), 192 GiB (EC2: 768); the quota line counts EC2's vCPUs",
      fix: "set instance's vcpus, gpus and memoryGiB to the type's: 192, 8, 768",
    });
    expect(only(report, 'quota')).toMatchObject({
      status: 'fail',
      message: 'quota 96 vCPUs; the stack needs 192 vCPUs at once (server 192)',
    });
  });

  it('asks EC2 for the sizes of offered types only', async () => {
    const config = parseLabConfig({ instance: { fallbackTypes: ['g6.xlarge'] } });
    const { report, mocks } = await doctor({ ...healthyAccount(), offerings: { 'g6.xlarge': AZS } }, config);
    expect(mocks.ec2).not.toHaveReceivedCommand(DescribeInstanceTypesCommand);
    expect(linesOf(report, 'instance-types')).toHaveLength(1);
  });

  it('warn: not checked when EC2 refuses the call', async () => {
    const { report } = await doctor({ ...healthyAccount(), denied: ['ec2:DescribeInstanceTypeOfferings'] });
    expect(only(report, 'instance-types')).toMatchObject({
      status: 'warn',
      message:
        'not checked: the caller may not call ec2:DescribeInstanceTypeOfferings (UnauthorizedOperation)',
    });
  });
});

describe('AMI parameters', () => {
  it('pass: the public parameter resolves to an image', async () => {
    const { report } = await doctor(healthyAccount());
    expect(only(report, 'ami')).toMatchObject({
      status: 'pass',
      message: 'resolves to ami-0a1b2c3d4e5f60718',
    });
  });

  it('fail: the parameter does not exist in the region', async () => {
    const config = parseLabConfig({ instance: { amiParameter: '/aws/service/no/such/ami-id' } });
    const { report } = await doctor(healthyAccount(), config);
    expect(only(report, 'ami')).toMatchObject({
      status: 'fail',
      subject: '/aws/service/no/such/ami-id (server)',
      message: "no such parameter in us-west-2: the launch template's image cannot resolve",
    });
  });

  it('fail: a parameter that holds no image id', async () => {
    const account = healthyAccount();
    const config = parseLabConfig({ instance: { amiParameter: '/my/ami' } });
    const { report } = await doctor(
      { ...account, parameters: { ...account.parameters, '/my/ami': 'ubuntu-22.04' } },
      config,
    );
    expect(only(report, 'ami')).toMatchObject({
      status: 'fail',
      message: 'resolves to "ubuntu-22.04", not an AMI id',
    });
  });

  it('warn: not checked when SSM refuses the call', async () => {
    const { report } = await doctor({ ...healthyAccount(), denied: ['ssm:GetParameter'] });
    expect(only(report, 'ami')).toMatchObject({
      status: 'warn',
      message: expect.stringContaining('not checked'),
    });
  });
});

describe('vCPU quotas', () => {
  it('pass: room for the server beside what else runs', async () => {
    const account: FakeAccount = {
      ...healthyAccount(),
      instances: [{ id: 'i-0123456789abcdef0', type: 'g6.xlarge', state: 'running', vcpus: 4 }],
    };
    const { report } = await doctor(account);
    expect(only(report, 'quota')).toMatchObject({
      status: 'pass',
      subject: 'Running On-Demand G and VT instances (L-DB2E81BA)',
      message:
        'quota 96 vCPUs, 4 in use by other instances; the stack needs 48 vCPUs at once (server 48): 44 to spare',
    });
  });

  it("fail: a new account's default quota, read when none was applied, with the request command", async () => {
    const { report, mocks } = await doctor({ ...healthyAccount(), quotas: {} });
    expect(mocks.serviceQuotas).toHaveReceivedCommandWith(GetAWSDefaultServiceQuotaCommand, {
      QuotaCode: 'L-DB2E81BA',
    });
    expect(only(report, 'quota')).toMatchObject({
      status: 'fail',
      message: 'quota 0 vCPUs; the stack needs 48 vCPUs at once (server 48)',
      fix: 'request 48 vCPUs: aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-DB2E81BA --desired-value 48 --region us-west-2 (or https://us-west-2.console.aws.amazon.com/servicequotas/home/services/ec2/quotas/L-DB2E81BA)',
    });
  });

  it("fail: other running instances leave too little; stopped ones and this stack's own do not count", async () => {
    const account: FakeAccount = {
      ...healthyAccount(),
      quotas: { 'L-DB2E81BA': 64, 'L-1216C47A': 640 },
      instances: [
        { id: 'i-0aaaaaaaaaaaaaaaa', type: 'g6.4xlarge', state: 'running', vcpus: 16 },
        { id: 'i-0bbbbbbbbbbbbbbbb', type: 'g6.8xlarge', state: 'stopped', vcpus: 32 },
        {
          id: 'i-0cccccccccccccccc',
          type: 'g6.12xlarge',
          state: 'running',
          vcpus: 48,
          labStack: DEFAULT.stackName,
        },
        { id: 'i-0dddddddddddddddd', type: 'g6.xlarge', state: 'pending', vcpus: 4 },
      ],
    };
    const { report } = await doctor(account);
    expect(only(report, 'quota')).toMatchObject({
      status: 'fail',
      message: 'quota 64 vCPUs, 20 in use by running instances; the stack needs 48 vCPUs at once (server 48)',
      fix: expect.stringMatching(/^stop instances using 4 vCPUs of this quota, or request 68 vCPUs/),
    });
  });

  it('sums the hosts of each quota: server and GPU agents in G and VT, the CPU agent in Standard', async () => {
    const config = parseLabConfig({
      instance: { readyTimeoutMinutes: 60 },
      cluster: {
        agents: [
          { name: 'gpu', role: 'gpu', count: 2, instanceType: 'g6.12xlarge' },
          { name: 'cpu', role: 'cpu', instanceType: 'c7i.4xlarge' },
        ],
      },
      vllm: { replicas: 8 },
    });
    const { report } = await doctor(healthyAccount(), config);
    expect(linesOf(report, 'quota').map((line) => [line.status, line.message])).toEqual([
      ['fail', 'quota 96 vCPUs; the stack needs 144 vCPUs at once (server 48 + gpu-1 48 + gpu-2 48)'],
      [
        'pass',
        'quota 640 vCPUs, 0 in use by other instances; the stack needs 16 vCPUs at once (cpu-1 16): 624 to spare',
      ],
    ]);
  });

  it('warn: what other instances use is unknown when they cannot be read', async () => {
    const { report } = await doctor({ ...healthyAccount(), denied: ['ec2:DescribeInstances'] });
    expect(only(report, 'quota')).toMatchObject({
      status: 'warn',
      message: expect.stringContaining('was not read'),
    });
    expect(only(report, 'live-hosts')).toMatchObject({
      status: 'warn',
      message: expect.stringContaining('ec2:DescribeInstances'),
    });
  });

  it('warn: not checked when Service Quotas refuses the call', async () => {
    const { report } = await doctor({ ...healthyAccount(), denied: ['servicequotas:GetServiceQuota'] });
    expect(only(report, 'quota')).toMatchObject({
      status: 'warn',
      message: 'not checked: the caller may not call servicequotas:GetServiceQuota (AccessDeniedException)',
    });
  });
});

describe('live lab hosts', () => {
  it('pass: none in the region', async () => {
    const { report, mocks } = await doctor(healthyAccount());
    expect(only(report, 'live-hosts')).toMatchObject({ status: 'pass' });
    expect(mocks.ec2).toHaveReceivedCommandWith(DescribeInstancesCommand, {
      Filters: [{ Name: 'instance-state-name', Values: ['pending', 'running', 'stopping', 'stopped'] }],
    });
  });

  it("warn: this stack's and another lab's hosts, with their cost per hour and age", async () => {
    const account: FakeAccount = {
      ...healthyAccount(),
      quotas: { 'L-DB2E81BA': 192, 'L-1216C47A': 640 },
      instances: [
        { id: 'i-0123', type: 'm5.large', state: 'running', vcpus: 2 },
        {
          id: 'i-0aaaaaaaaaaaaaaaa',
          type: 'g6.12xlarge',
          state: 'running',
          vcpus: 48,
          labStack: DEFAULT.stackName,
          launchTime: new Date('2026-12-01T09:30:00Z'),
        },
        {
          id: 'i-0bbbbbbbbbbbbbbbb',
          type: 'c7i.2xlarge',
          state: 'running',
          vcpus: 8,
          labStack: 'NetworkLab',
        },
        {
          id: 'i-0cccccccccccccccc',
          type: 'c7i.2xlarge',
          state: 'stopped',
          vcpus: 8,
          labStack: 'NetworkLab',
        },
      ],
    };
    const { report } = await doctor(account);
    const lines = linesOf(report, 'live-hosts');
    expect(lines.map((line) => [line.status, line.subject, line.message])).toEqual([
      [
        'warn',
        `stack ${DEFAULT.stackName} (this one)`,
        'already has 1 live host(s): i-0aaaaaaaaaaaaaaaa g6.12xlarge (4.60 USD/h, up 2.5 h); 4.60 USD/h on demand in all',
      ],
      [
        'warn',
        'stack NetworkLab',
        '2 live host(s) of another lab: i-0bbbbbbbbbbbbbbbb c7i.2xlarge (0.36 USD/h); i-0cccccccccccccccc c7i.2xlarge stopped (0.36 USD/h); 0.36 USD/h on demand in all',
      ],
    ]);
    expect(lines[1]?.fix).toContain('npx cdk destroy NetworkLab');
    expect(doctorPassed(report)).toBe(true);
  });
});

describe('permissions', () => {
  it('pass: simulated for the role behind the assumed-role session, with its path', async () => {
    const { report, mocks } = await doctor(healthyAccount());
    expect(linesOf(report, 'permissions').map((line) => line.status)).toEqual(['pass', 'pass']);
    expect(mocks.iam).toHaveReceivedCommandWith(SimulatePrincipalPolicyCommand, {
      PolicySourceArn: CALLER_ROLE_ARN,
      ActionNames: ['sts:AssumeRole'],
      ResourceArns: [
        'arn:aws:iam::123456789012:role/cdk-hnb659fds-deploy-role-123456789012-us-west-2',
        'arn:aws:iam::123456789012:role/cdk-hnb659fds-file-publishing-role-123456789012-us-west-2',
      ],
    });
    // The execution role's 18 actions come back in pages of five: all four were read.
    expect(mocks.iam).toHaveReceivedCommandWith(SimulatePrincipalPolicyCommand, {
      PolicySourceArn: 'arn:aws:iam::123456789012:role/cdk-hnb659fds-cfn-exec-role-123456789012-us-west-2',
      Marker: '15',
    });
  });

  it('fail: the caller may not assume the deploy role', async () => {
    const account: FakeAccount = {
      ...healthyAccount(),
      decide: (principal, _action, resource) =>
        principal === CALLER_ROLE_ARN && resource.includes('deploy-role') ? 'implicitDeny' : 'allowed',
    };
    const { report } = await doctor(account);
    expect(linesOf(report, 'permissions')[0]).toMatchObject({
      status: 'fail',
      message: `${CALLER_ROLE_ARN} may not: sts:AssumeRole on arn:aws:iam::123456789012:role/cdk-hnb659fds-deploy-role-123456789012-us-west-2 (implicitDeny)`,
    });
  });

  it('fail: an execution role narrowed below what the stack makes', async () => {
    const account: FakeAccount = {
      ...healthyAccount(),
      decide: (principal, action) =>
        principal.includes('cfn-exec-role') && action.startsWith('secretsmanager:')
          ? 'explicitDeny'
          : 'allowed',
    };
    const { report } = await doctor(account);
    expect(linesOf(report, 'permissions')[1]).toMatchObject({
      status: 'fail',
      message: 'not allowed: secretsmanager:CreateSecret (explicitDeny)',
      fix: expect.stringContaining('--cloudformation-execution-policies'),
    });
  });

  it('warn: not checked when the caller may not simulate', async () => {
    const { report } = await doctor({ ...healthyAccount(), denied: ['iam:SimulatePrincipalPolicy'] });
    expect(linesOf(report, 'permissions').map((line) => [line.status, line.message])).toEqual([
      ['warn', 'not checked: the caller may not call iam:SimulatePrincipalPolicy (AccessDenied)'],
      ['warn', 'not checked: the caller may not call iam:SimulatePrincipalPolicy (AccessDenied)'],
    ]);
  });

  it('warn: not checked for a federated user', async () => {
    const { report } = await doctor({
      ...healthyAccount(),
      arn: 'arn:aws:sts::123456789012:federated-user/bob',
    });
    expect(linesOf(report, 'permissions')[0]).toMatchObject({
      status: 'warn',
      message: expect.stringContaining('neither an IAM user nor an assumed role'),
    });
  });
});

describe('the network lab', () => {
  const config = parseLabConfig({
    lab: 'network',
    stackName: 'NetworkLab',
    network: {
      cells: [
        { name: 'mesh', datapath: 'iptables', mesh: 'sidecar' },
        { name: 'dp-cilium', datapath: 'cilium' },
      ],
    },
  });

  it('checks every cell and sums their vCPUs in the Standard quota', async () => {
    const { report } = await doctor(healthyAccount(), config);
    expect(report.lab).toBe('network');
    expect(linesOf(report, 'instance-types').map((line) => line.subject)).toEqual([
      'cell mesh: c7i.2xlarge',
      'cell dp-cilium: c7i.2xlarge',
    ]);
    expect(only(report, 'ami')).toMatchObject({
      status: 'pass',
      subject: expect.stringContaining('(cell mesh, cell dp-cilium)'),
    });
    expect(only(report, 'quota')).toMatchObject({
      status: 'pass',
      subject: 'Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (L-1216C47A)',
      message: expect.stringContaining('the stack needs 16 vCPUs at once (cell mesh 8 + cell dp-cilium 8)'),
    });
  });

  it("fail: a new account's Standard quota of 5 vCPUs", async () => {
    const { report } = await doctor({ ...healthyAccount(), quotas: {} }, config);
    expect(only(report, 'quota')).toMatchObject({
      status: 'fail',
      message: 'quota 5 vCPUs; the stack needs 16 vCPUs at once (cell mesh 8 + cell dp-cilium 8)',
    });
  });
});
