import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_TOWER_ACKNOWLEDGEMENTS } from '../../lib/aws/acknowledgements.ts';
import { launchInputsChanged } from '../../lib/aws/capacity-launch/request.ts';
import { LabStack, RESULTS_NONCURRENT_DAYS } from '../../lib/aws/lab-stack.ts';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import { tempDir } from '../temp.ts';
import { synthValidated, testApp } from './app.ts';
import { allRules, ControlTowerChecks, guardReport, rulesNotApplying } from './control-tower.ts';

const ACCOUNT = '123456789012';
const REGION = 'us-west-2';
const AZS = ['us-west-2a', 'us-west-2b', 'us-west-2c', 'us-west-2d'];

function build(config: LabConfig = defaultLabConfig(), env?: { account: string; region: string }) {
  const app = testApp({
    context: env ? { [`availability-zones:account=${env.account}:region=${env.region}`]: AZS } : {},
  });
  const stack = new LabStack(app, config.stackName, { config, ...(env ? { env } : {}) });
  return { app, stack };
}

function synth(config: LabConfig = defaultLabConfig(), env?: { account: string; region: string }) {
  const { app, stack } = build(config, env);
  return { app, stack, template: Template.fromStack(stack) };
}

/**
 * Syntheses that tests only read, made once: the default lab (checked by cdk-nag and the Control
 * Tower rules in the same synthesis), a second independent synthesis of it (for the tests that
 * check the same input gives the same ids), the default lab in a concrete region, and the default
 * lab with one deliberate finding for each set of checks. A test that changes the configuration,
 * the context or the stack otherwise synthesizes its own.
 */
const once = <T>(make: () => T) => {
  let value: T | undefined;
  return () => (value ??= make());
};
const defaultLab = once(() => {
  const { app, stack } = build();
  const checks = synthValidated(app, new AwsSolutionsChecks(app), new ControlTowerChecks());
  // Should the checks fail, the tests of the template still read one, from a synthesis without them.
  const lab = checks.error === undefined ? { app, stack, template: Template.fromStack(stack) } : synth();
  return { ...lab, checks };
});
const brokenLab = once(() => {
  const { app, stack } = build();
  new ec2.CfnSubnet(stack, 'AutoPublic', {
    vpcId: stack.network.vpc.vpcId,
    cidrBlock: '10.0.240.0/24',
    mapPublicIpOnLaunch: true,
  });
  new s3.Bucket(stack, 'Unencrypted', { enforceSSL: false });
  return synthValidated(app, new AwsSolutionsChecks(app), new ControlTowerChecks());
});
const defaultLabAgain = once(() => synth());
const concreteLab = once(() => synth(defaultLabConfig(), { account: ACCOUNT, region: REGION }));

describe('LabStack', () => {
  let template: Template;
  beforeAll(() => {
    ({ template } = defaultLab());
  });

  it('synthesizes offline without an environment, on two placeholder AZs', () => {
    template.resourceCountIs('AWS::EC2::Subnet', 2);
    template.resourceCountIs('AWS::EC2::NatGateway', 0);
  });

  it('spans every AZ of a concrete region, from context', () => {
    const { template: concrete } = concreteLab();
    concrete.resourceCountIs('AWS::EC2::Subnet', AZS.length);
    for (const az of AZS) {
      // The launch asks for the host's public IP; the subnets give none by themselves.
      concrete.hasResourceProperties('AWS::EC2::Subnet', {
        AvailabilityZone: az,
        MapPublicIpOnLaunch: false,
      });
    }
  });

  it('has no inbound rule anywhere', () => {
    template.resourceCountIs('AWS::EC2::SecurityGroupIngress', 0);
    for (const sg of Object.values(template.findResources('AWS::EC2::SecurityGroup'))) {
      expect(sg.Properties.SecurityGroupIngress ?? []).toEqual([]);
    }
  });

  it('requires IMDSv2 with one hop, an encrypted gp3 root volume, and terminate on shutdown', () => {
    template.hasResourceProperties('AWS::EC2::LaunchTemplate', {
      LaunchTemplateData: Match.objectLike({
        MetadataOptions: { HttpTokens: 'required', HttpPutResponseHopLimit: 1 },
        InstanceInitiatedShutdownBehavior: 'terminate',
        BlockDeviceMappings: [
          {
            DeviceName: '/dev/sda1',
            Ebs: { VolumeSize: 200, VolumeType: 'gp3', Encrypted: true, DeleteOnTermination: true },
          },
        ],
        ImageId: { Ref: Match.stringLikeRegexp('SsmParameterValue.*deeplearning.*') },
      }),
    });
  });

  it('gives the root volume 500 MiB/s of gp3 throughput for loading the model', () => {
    template.hasResourceProperties('AWS::EC2::LaunchTemplate', {
      LaunchTemplateData: Match.objectLike({
        BlockDeviceMappings: [Match.objectLike({ Ebs: Match.objectLike({ Throughput: 500 }) })],
      }),
    });
  });

  it('denies the host role every SSM parameter read that AmazonSSMManagedInstanceCore allows', () => {
    template.hasResourceProperties('AWS::IAM::Policy', {
      Roles: [{ Ref: Match.stringLikeRegexp('HostInstanceRole') }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Sid: 'NoParameterReads',
            Effect: 'Deny',
            Action: [
              'ssm:GetParameter',
              'ssm:GetParameters',
              'ssm:GetParametersByPath',
              'ssm:GetParameterHistory',
            ],
          }),
        ]),
      },
    });
  });

  it('gives no KMS permission when the configuration names no asset key (aws.assetKeyArns empty)', () => {
    const policies = JSON.stringify(template.findResources('AWS::IAM::Policy'));
    expect(policies).not.toContain('kms:');
  });

  it('says when an environment-agnostic synth assumed 2 Availability Zones', () => {
    const { stack } = defaultLab();
    const warnings = Annotations.fromStack(stack).findWarning(
      '*',
      Match.stringLikeRegexp('assumed 2 Availability Zones'),
    );
    expect(warnings).toHaveLength(1);
    const concrete = concreteLab();
    expect(
      Annotations.fromStack(concrete.stack).findWarning('*', Match.stringLikeRegexp('assumed 2')),
    ).toEqual([]);
  });

  it('keeps network interfaces and security groups out of the launch template (docs/facts.md §2.1 point 7)', () => {
    const [lt] = Object.values(template.findResources('AWS::EC2::LaunchTemplate'));
    expect(lt.Properties.LaunchTemplateData.NetworkInterfaces).toBeUndefined();
    expect(lt.Properties.LaunchTemplateData.SecurityGroupIds).toBeUndefined();
  });

  it('reads the AMI from the public DLAMI parameter', () => {
    const parameters = template.toJSON().Parameters as Record<string, { Default?: string; Type: string }>;
    expect(Object.values(parameters)).toContainEqual(
      expect.objectContaining({
        Type: 'AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>',
        Default: '/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id',
      }),
    );
  });

  it('keeps the results bucket, encrypted, private and TLS-only', () => {
    template.hasResource('AWS::S3::Bucket', {
      DeletionPolicy: 'Retain',
      Properties: Match.objectLike({
        BucketEncryption: {
          ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
        },
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          BlockPublicPolicy: true,
          IgnorePublicAcls: true,
          RestrictPublicBuckets: true,
        },
      }),
    });
  });

  it('waits for the bootstrap signal after the launch, with the configured timeout', () => {
    const conditions = template.findResources('AWS::CloudFormation::WaitCondition');
    const [[, condition]] = Object.entries(conditions);
    expect(condition.Properties).toEqual({
      Handle: { Ref: expect.stringMatching(/^HostReadyHandle[0-9a-f]{8}/) },
      Count: 1,
      Timeout: '2700',
    });
    const launchIds = Object.keys(template.findResources('AWS::CloudFormation::CustomResource')).concat(
      Object.keys(template.toJSON().Resources).filter(
        (id) =>
          id.startsWith('CapacityLaunch') && template.toJSON().Resources[id].Type.startsWith('Custom::'),
      ),
    );
    expect(launchIds.some((id) => (condition.DependsOn as string[]).includes(id))).toBe(true);
    const { template: slow } = synth(parseLabConfig({ instance: { readyTimeoutMinutes: 90 } }));
    slow.hasResourceProperties('AWS::CloudFormation::WaitCondition', { Timeout: '5400' });
  });

  it('waits anew when the host boots with something else: condition and handle follow the generation', () => {
    const ids = (t: Template) =>
      Object.keys(t.findResources('AWS::CloudFormation::WaitCondition')).concat(
        Object.keys(t.findResources('AWS::CloudFormation::WaitConditionHandle')),
      );
    const same = ids(defaultLabAgain().template);
    expect(ids(template)).toEqual(same);
    const changed = ids(synth(parseLabConfig({ vllm: { gpuMemoryUtilization: 0.8 } })).template);
    expect(changed).toHaveLength(2);
    for (const id of changed) expect(same).not.toContain(id);
  });

  it('waits anew when a network change replaces the host: a new AZ changes the launch inputs, the generation and the wait', () => {
    // The region gains an AZ: a new subnet joins the launch's Subnets, so its Update replaces the
    // host (request.ts launchInputsChanged) with nothing in the bootstrap changed.
    const launchAndWaits = (t: Template) => {
      const [launch] = Object.values(t.findResources('Custom::CapacityLaunch'));
      return {
        props: launch?.Properties as Record<string, unknown>,
        waits: [
          ...Object.keys(t.findResources('AWS::CloudFormation::WaitCondition')),
          ...Object.keys(t.findResources('AWS::CloudFormation::WaitConditionHandle')),
        ],
      };
    };
    const inRegion = (azs: string[]) => {
      const app = testApp({ context: { [`availability-zones:account=${ACCOUNT}:region=${REGION}`]: azs } });
      const stack = new LabStack(app, 'LlmGatewayLab', {
        config: defaultLabConfig(),
        env: { account: ACCOUNT, region: REGION },
      });
      return launchAndWaits(Template.fromStack(stack));
    };
    const before = inRegion(AZS.slice(0, 3));
    // All four AZs: the concrete-region lab.
    const after = launchAndWaits(concreteLab().template);
    expect(launchInputsChanged(before.props, after.props)).toBe(true);
    expect(after.props.Generation).not.toBe(before.props.Generation);
    expect(after.waits).toHaveLength(2);
    for (const id of after.waits) expect(before.waits).not.toContain(id);
    // And the same network twice is the same generation: no needless relaunch.
    expect(inRegion(AZS.slice(0, 3)).props.Generation).toBe(before.props.Generation);
  });

  it('relaunches the host exactly when it gets a new wait condition', () => {
    const resources = template.toJSON().Resources as Record<
      string,
      { Type: string; Properties: { Generation?: string } }
    >;
    const launch = Object.values(resources).find((r) => r.Type === 'Custom::CapacityLaunch');
    const generation = launch?.Properties.Generation;
    expect(generation).toMatch(/^[0-9a-f]{8}$/);
    const [conditionId] = Object.keys(template.findResources('AWS::CloudFormation::WaitCondition'));
    expect(conditionId).toMatch(new RegExp(`^Ready${generation}`));
  });

  it('refuses to relaunch a gone host under an old generation, naming -c relaunch', () => {
    template.hasResourceProperties('Custom::CapacityLaunch', {
      RelaunchAdvice: Match.stringLikeRegexp('npx cdk deploy -c relaunch=\\$\\(date \\+%s\\)'),
    });
  });

  it('launches a fresh host when asked with -c relaunch=<new value>', () => {
    const generationIn = (t: Template) =>
      Object.values(t.findResources('Custom::CapacityLaunch'))[0].Properties.Generation as string;
    const generationOf = (context: Record<string, string>) => {
      const app = testApp({ context });
      const stack = new LabStack(app, 'LlmGatewayLab', { config: defaultLabConfig() });
      return generationIn(Template.fromStack(stack));
    };
    // Two syntheses of the same input (no -c relaunch) agree.
    expect(generationIn(defaultLabAgain().template)).toBe(generationIn(template));
    expect(generationOf({ relaunch: '1732900000' })).not.toBe(generationIn(template));
  });

  it('expires replaced result versions, which the 5-minute sync leaves behind', () => {
    template.hasResourceProperties('AWS::S3::Bucket', {
      VersioningConfiguration: { Status: 'Enabled' },
      LifecycleConfiguration: {
        Rules: [
          Match.objectLike({
            Status: 'Enabled',
            NoncurrentVersionExpiration: { NoncurrentDays: RESULTS_NONCURRENT_DAYS },
            AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
          }),
        ],
      },
    });
  });

  it('turns on detailed monitoring of the host', () => {
    template.hasResourceProperties('AWS::EC2::LaunchTemplate', {
      LaunchTemplateData: Match.objectLike({ Monitoring: { Enabled: true } }),
    });
  });

  it('keeps the TLS-only policy with the retained bucket', () => {
    template.hasResource('AWS::S3::BucketPolicy', { DeletionPolicy: 'Retain' });
  });

  it('launches only after the role, instance profile and launch template exist', () => {
    const resources = template.toJSON().Resources as Record<
      string,
      { Type: string; Properties?: unknown; DependsOn?: string[] }
    >;
    const [launchId, launch] = Object.entries(resources).find(
      ([id, r]) =>
        id.startsWith('CapacityLaunch') &&
        (r.Type === 'AWS::CloudFormation::CustomResource' || r.Type.startsWith('Custom::')),
    ) ?? [undefined, undefined];
    expect(launchId).toBeDefined();
    const text = JSON.stringify(launch?.Properties);
    const ltId = Object.keys(resources).find((id) => resources[id].Type === 'AWS::EC2::LaunchTemplate');
    expect(text).toContain(ltId);
    // The template references the instance profile, which references the role.
    const lt = JSON.stringify(resources[ltId as string].Properties);
    const profileId = Object.keys(resources).find((id) => resources[id].Type === 'AWS::IAM::InstanceProfile');
    expect(lt).toContain(profileId);
  });

  it('strips foreign role policies after the instance is gone and before the role is deleted', () => {
    const resources = template.toJSON().Resources as Record<string, { Type: string; DependsOn?: string[] }>;
    const idOf = (type: string) => {
      const ids = Object.keys(resources).filter((id) => resources[id].Type === type);
      expect(ids, type).toHaveLength(1);
      return ids[0];
    };
    const cleanup = idOf('Custom::RoleCleanup');
    const launch = idOf('Custom::CapacityLaunch');
    const role = Object.keys(resources).find(
      (id) => id.startsWith('HostInstanceRole') && resources[id].Type === 'AWS::IAM::Role',
    );
    // Deletion runs against DependsOn: launch (terminate) first, then the cleanup, then the role.
    expect(resources[launch].DependsOn).toContain(cleanup);
    expect(resources[cleanup].DependsOn).toContain(role);
  });

  it("scopes the instance role to SSM, its own assets and the stack's results prefix", () => {
    template.hasResourceProperties('AWS::IAM::Role', {
      AssumeRolePolicyDocument: Match.objectLike({
        Statement: [Match.objectLike({ Principal: { Service: 'ec2.amazonaws.com' } })],
      }),
      ManagedPolicyArns: [
        {
          'Fn::Join': [
            '',
            ['arn:', { Ref: 'AWS::Partition' }, ':iam::aws:policy/AmazonSSMManagedInstanceCore'],
          ],
        },
      ],
    });
    const policies = Object.values(template.findResources('AWS::IAM::Policy')).filter((p) =>
      JSON.stringify(p.Properties.Roles).includes('HostInstanceRole'),
    );
    const statements = policies.flatMap((p) => p.Properties.PolicyDocument.Statement);
    const text = JSON.stringify(statements);
    expect(text).toContain('/LlmGatewayLab/*');
    for (const statement of statements) {
      expect(statement.Resource).not.toBe('*');
      expect(statement.Action).not.toContain('s3:*');
    }
  });

  it('tells the user how to connect, what it costs and when it stops', () => {
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(Object.keys(outputs)).toEqual(
      expect.arrayContaining([
        'InstanceId',
        'AvailabilityZone',
        'LaunchAttempts',
        'ConnectCommand',
        'PortForwardCommand',
        'ResultsBucketName',
        'BootstrapLog',
        'EstimatedCostPerHour',
        'MaxLifetime',
        'ReadyReport',
      ]),
    );
    expect(outputs.EstimatedCostPerHour.Value).toBe('4.60 USD/hour on demand (g6.12xlarge, instance only)');
    expect(outputs.MaxLifetime.Value).toContain('8 h after boot');
    expect(JSON.stringify(outputs.PortForwardCommand.Value)).toContain('portNumber=30800');
    expect(JSON.stringify(outputs.BootstrapLog.Value)).toContain('/LlmGatewayLab/host/bootstrap.log');
  });

  it('passes the AwsSolutions checks; every acknowledged finding carries its reason in the code', () => {
    // cdk-nag v3 reports through CDK's policy validation: synth throws on any unacknowledged finding.
    const { checks } = defaultLab();
    expect(checks.verdict(new AwsSolutionsChecks()), checks.error).toBe('passed');
  });

  it('passes the Control Tower proactive controls (cfn-guard); the rest is acknowledged in one place', () => {
    // The plugin runs the cfn-guard binary it ships; synth throws on any unacknowledged rule.
    const { checks } = defaultLab();
    expect(checks.verdict(new ControlTowerChecks()), checks.error).toBe('passed');
  });

  it('acknowledges exactly the Control Tower rules the template breaks: none stale, none missing', () => {
    const dir = tempDir('lab-guard-');
    const path = join(dir, 'LlmGatewayLab.template.json');
    writeFileSync(path, JSON.stringify(template.toJSON()));
    // Straight from the plugin, before CDK applies the acknowledgements, in two parts that together
    // are every rule file: the ones ControlTowerChecks runs (those that name a type of the
    // template; the report of defaultLab's checked synthesis, read again) and all the others.
    const skipped = rulesNotApplying([path]);
    const applying = guardReport([path], skipped);
    const rest = guardReport(
      [path],
      allRules().filter((rule) => !skipped.includes(rule)),
    );
    const broken = new Set(
      [...applying.violations, ...rest.violations].map((violation) => violation.ruleName),
    );
    expect([...broken].sort()).toEqual(Object.keys(CONTROL_TOWER_ACKNOWLEDGEMENTS).sort());
    // ControlTowerChecks leaves out only rule files that find nothing here: the same findings.
    const findings = (r: typeof applying) =>
      r.violations.flatMap((v) => v.violatingResources.map((at) => `${v.ruleName} ${at.resourceLogicalId}`));
    expect(findings(rest)).toEqual([]);
    expect(findings(applying).length).toBeGreaterThan(0);
    expect(skipped.length).toBeGreaterThan(0);
  });

  it('would fail the Control Tower checks on a new finding', () => {
    const checks = brokenLab();
    expect(checks.verdict(new ControlTowerChecks())).toBe('failed');
    expect(checks.error).toMatch(/CT\.EC2\.PR\.11.*\n.*LlmGatewayLab\/AutoPublic/);
  });

  it('would fail the AwsSolutions checks on a real finding', () => {
    const checks = brokenLab();
    expect(checks.verdict(new AwsSolutionsChecks())).toBe('failed');
    expect(checks.error).toMatch(/AwsSolutions-S1|AwsSolutions-S10/);
  });
});
