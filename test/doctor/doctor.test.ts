import { CloudFormationServiceException, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { DescribeInstanceTypeOfferingsCommand, DescribeInstanceTypesCommand } from '@aws-sdk/client-ec2';
import { GetServiceQuotaCommand } from '@aws-sdk/client-service-quotas';
import { GetParameterCommand, SSMServiceException } from '@aws-sdk/client-ssm';
import { GetCallerIdentityCommand, STSServiceException } from '@aws-sdk/client-sts';
import { allCustomMatcher } from 'aws-sdk-client-mock-vitest';
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import { bootstrapRequirement } from '../../lib/doctor/bootstrap-requirement.ts';
import { doctorPassed, runDoctor } from '../../lib/doctor/doctor.ts';
import { AZS, type FakeAccount, healthyAccount, mockAccount } from './fake-account.ts';
import {
  DEFAULT,
  doctor,
  linesOf,
  NOW,
  only,
  requirement,
  track,
  useDoctorHarness,
  withAgents,
} from './harness.ts';

expect.extend(allCustomMatcher);
useDoctorHarness();

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
      'asset-key',
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
    track(fake.restore);
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
    track(fake.restore);
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

  it("judges by the stack's BootstrapVersion output when the parameter cannot be read", async () => {
    const fake = mockAccount(withVersion('5'));
    track(fake.restore);
    fake.mocks.ssm.on(GetParameterCommand, { Name: '/cdk-bootstrap/hnb659fds/version' }).rejects(
      new SSMServiceException({
        name: 'AccessDeniedException',
        $fault: 'client',
        $metadata: { httpStatusCode: 400 },
        message: 'User is not authorized to perform: ssm:GetParameter',
      }),
    );
    const report = await runDoctor(fake.clients, DEFAULT, { requirement, now: () => NOW });
    expect(only(report, 'bootstrap')).toMatchObject({
      status: 'fail',
      message: expect.stringMatching(
        /^bootstrap version 5; .* \(from the stack's BootstrapVersion output: \/cdk-bootstrap\/hnb659fds\/version was not read, AccessDeniedException\)$/,
      ),
    });
  });

  it('warn: not checked when the stack cannot be read', async () => {
    const fake = mockAccount(healthyAccount());
    track(fake.restore);
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
    expect(report.lines).toHaveLength(9);
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
    const config = withAgents(1);
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
