import { CfnOutput, Duration, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  CapacityLaunch,
  type CapacityLaunchProps,
} from '../../../lib/aws/capacity-launch/capacity-launch.ts';
import { testApp } from '../app.ts';
import { stagedHandler } from '../handler-bundle.ts';

interface TestBed {
  readonly stack: Stack;
  readonly vpc: ec2.Vpc;
  readonly role: iam.Role;
  readonly launchTemplate: ec2.LaunchTemplate;
  readonly securityGroup: ec2.SecurityGroup;
}

// Skipping bundling keeps the validation tests fast; the wiring tests bundle for real.
function testBed(options: { bundle?: boolean; templateSecurityGroup?: boolean; envAgnostic?: boolean } = {}) {
  const app = testApp({ context: options.bundle ? {} : { 'aws:cdk:bundling-stacks': [] } });
  const env = options.envAgnostic ? undefined : { account: '111122223333', region: 'us-west-2' };
  const stack = new Stack(app, 'LabTest', { env });
  const vpc = new ec2.Vpc(stack, 'Vpc', {
    maxAzs: 3,
    natGateways: 0,
    subnetConfiguration: [{ name: 'Public', subnetType: ec2.SubnetType.PUBLIC }],
  });
  const role = new iam.Role(stack, 'InstanceRole', {
    assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
  });
  const securityGroup = new ec2.SecurityGroup(stack, 'HostSg', { vpc, allowAllOutbound: true });
  const launchTemplate = new ec2.LaunchTemplate(stack, 'HostTemplate', {
    machineImage: ec2.MachineImage.latestAmazonLinux2023(),
    role,
    requireImdsv2: true,
    securityGroup: options.templateSecurityGroup ? securityGroup : undefined,
  });
  return { stack, vpc, role, launchTemplate, securityGroup };
}

function props(bed: TestBed, overrides: Partial<CapacityLaunchProps> = {}): CapacityLaunchProps {
  return {
    launchTemplate: bed.launchTemplate,
    subnets: bed.vpc.publicSubnets,
    securityGroup: bed.securityGroup,
    instanceType: 'g6.12xlarge',
    vcpusNeeded: 48,
    instanceRole: bed.role,
    ...overrides,
  };
}

function arnJoin(suffix: string) {
  return { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:ec2:us-west-2:${suffix}`]] };
}

describe('CapacityLaunch wiring', () => {
  let template: Template;
  let bed: TestBed;
  let launch: CapacityLaunch;

  beforeAll(() => {
    bed = testBed({ bundle: true });
    launch = new CapacityLaunch(
      bed.stack,
      'CapacityLaunch',
      props(bed, { fallbackInstanceTypes: ['g5.12xlarge'], preferredAzs: ['dummy1b'] }),
    );
    new CfnOutput(bed.stack, 'InstanceId', { value: launch.instanceId });
    new CfnOutput(bed.stack, 'AttemptLog', { value: launch.attemptLog });
    template = Template.fromStack(bed.stack);
  });

  const ref = (construct: { node: { defaultChild?: unknown } }) =>
    bed.stack.getLogicalId(construct.node.defaultChild as never);

  it('passes the launch inputs to the custom resource', () => {
    template.hasResourceProperties('Custom::CapacityLaunch', {
      LaunchTemplateId: { Ref: ref(bed.launchTemplate) },
      LaunchTemplateVersion: { 'Fn::GetAtt': [ref(bed.launchTemplate), 'LatestVersionNumber'] },
      Subnets: [
        { SubnetId: { Ref: Match.anyValue() }, AvailabilityZone: 'dummy1a' },
        { SubnetId: { Ref: Match.anyValue() }, AvailabilityZone: 'dummy1b' },
        { SubnetId: { Ref: Match.anyValue() }, AvailabilityZone: 'dummy1c' },
      ],
      SecurityGroupId: { 'Fn::GetAtt': [ref(bed.securityGroup), 'GroupId'] },
      InstanceTypes: ['g6.12xlarge', 'g5.12xlarge'],
      PreferredAzs: ['dummy1b'],
      VcpusNeeded: 48,
      StackTagKey: 'llm-gateway-lab:stack',
      StackTagValue: 'LabTest',
    });
  });

  it('wires onEvent and isComplete through the Provider framework', () => {
    const onEvent = ref(launch.onEventFunction);
    const isComplete = ref(launch.isCompleteFunction);
    template.hasResourceProperties('AWS::Lambda::Function', {
      Handler: 'framework.onEvent',
      Environment: {
        Variables: {
          USER_ON_EVENT_FUNCTION_ARN: { 'Fn::GetAtt': [onEvent, 'Arn'] },
          USER_IS_COMPLETE_FUNCTION_ARN: { 'Fn::GetAtt': [isComplete, 'Arn'] },
          WAITER_STATE_MACHINE_ARN: { Ref: Match.anyValue() },
        },
      },
    });
    template.resourceCountIs('AWS::StepFunctions::StateMachine', 1);
    const [resource] = Object.values(template.findResources('Custom::CapacityLaunch'));
    const token = resource?.Properties.ServiceToken['Fn::GetAtt'][0] as string;
    expect(template.toJSON().Resources[token].Properties.Handler).toBe('framework.onEvent');
  });

  it('runs the handlers on Node 22 from the bundled handler', () => {
    template.hasResourceProperties('AWS::Lambda::Function', {
      Handler: 'index.onEvent',
      Runtime: 'nodejs22.x',
      Timeout: 600,
    });
    template.hasResourceProperties('AWS::Lambda::Function', {
      Handler: 'index.isComplete',
      Runtime: 'nodejs22.x',
    });
  });

  it('runs one ES module bundle, made in-process, that exports both handlers', () => {
    const onEvent = stagedHandler(bed.stack, template, launch.onEventFunction);
    const isComplete = stagedHandler(bed.stack, template, launch.isCompleteFunction);
    expect(onEvent.files).toEqual(['index.mjs']);
    expect(isComplete.files).toEqual(['index.mjs']);
    const bundle = onEvent.load();
    expect(typeof bundle.onEvent).toBe('function');
    expect(typeof bundle.isComplete).toBe('function');
  });

  it('keeps the functions logs for a month and removes them with the stack', () => {
    const groups = template.findResources('AWS::Logs::LogGroup');
    expect(Object.keys(groups)).toHaveLength(3);
    for (const group of Object.values(groups)) {
      expect(group.Properties.RetentionInDays).toBe(30);
      expect(group.DeletionPolicy).toBe('Delete');
    }
  });

  it('exposes the attributes as GetAtt strings', () => {
    const [logical] = Object.keys(template.findResources('Custom::CapacityLaunch'));
    template.hasOutput('InstanceId', { Value: { 'Fn::GetAtt': [logical, 'InstanceId'] } });
    template.hasOutput('AttemptLog', { Value: { 'Fn::GetAtt': [logical, 'AttemptLog'] } });
    expect(bed.stack.resolve(launch.availabilityZone)).toEqual({
      'Fn::GetAtt': [logical, 'AvailabilityZone'],
    });
    expect(bed.stack.resolve(launch.instanceType)).toEqual({ 'Fn::GetAtt': [logical, 'InstanceType'] });
  });

  it('lets the launch function run instances only from the lab template, tagged', () => {
    template.hasResourceProperties('AWS::IAM::Policy', {
      Roles: [{ Ref: Match.stringLikeRegexp('OnEventServiceRole') }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          {
            Sid: 'RunInstancesFromTheLabTemplateOnly',
            Effect: 'Allow',
            Action: 'ec2:RunInstances',
            Resource: arnJoin('111122223333:instance/*'),
            Condition: {
              ArnLike: {
                'ec2:LaunchTemplate': {
                  'Fn::Join': [
                    '',
                    [
                      'arn:',
                      { Ref: 'AWS::Partition' },
                      ':ec2:us-west-2:111122223333:launch-template/',
                      { Ref: ref(bed.launchTemplate) },
                    ],
                  ],
                },
              },
              StringEquals: {
                'aws:RequestTag/llm-gateway-lab:stack': 'LabTest',
                'ec2:InstanceType': ['g6.12xlarge', 'g5.12xlarge'],
              },
            },
          },
          Match.objectLike({
            Sid: 'RunInstancesUsesTheLabNetworkAndTemplate',
            Action: 'ec2:RunInstances',
            Resource: Match.arrayWith([
              arnJoin('111122223333:network-interface/*'),
              arnJoin('111122223333:volume/*'),
              arnJoin(':image/*'),
            ]),
          }),
        ]),
      },
    });
    const statements = onEventStatements(template);
    const network = statements.find((s) => s.Sid === 'RunInstancesUsesTheLabNetworkAndTemplate');
    const resources = JSON.stringify(network?.Resource);
    for (const subnet of bed.vpc.publicSubnets) expect(resources).toContain(ref(subnet));
    expect(resources).toContain(`${ref(bed.securityGroup)}","GroupId"`);
    expect(resources).not.toContain('instance/*');
  });

  it('tags only at launch, passes only the instance role, terminates only tagged instances', () => {
    template.hasResourceProperties('AWS::IAM::Policy', {
      Roles: [{ Ref: Match.stringLikeRegexp('OnEventServiceRole') }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          {
            Sid: 'TagOnlyWhileLaunching',
            Effect: 'Allow',
            Action: 'ec2:CreateTags',
            Resource: [arnJoin('111122223333:instance/*'), arnJoin('111122223333:volume/*')],
            Condition: { StringEquals: { 'ec2:CreateAction': 'RunInstances' } },
          },
          {
            Sid: 'PassOnlyTheInstanceRole',
            Effect: 'Allow',
            Action: 'iam:PassRole',
            Resource: { 'Fn::GetAtt': [ref(bed.role), 'Arn'] },
            Condition: { StringEquals: { 'iam:PassedToService': 'ec2.amazonaws.com' } },
          },
          {
            Sid: 'TerminateOnlyTheStacksInstances',
            Effect: 'Allow',
            Action: 'ec2:TerminateInstances',
            Resource: arnJoin('111122223333:instance/*'),
            Condition: { StringEquals: { 'aws:ResourceTag/llm-gateway-lab:stack': 'LabTest' } },
          },
          {
            Sid: 'ReadThisStacksStatus',
            Effect: 'Allow',
            Action: ['cloudformation:DescribeStacks', 'cloudformation:DescribeStackResource'],
            Resource: { Ref: 'AWS::StackId' },
          },
          {
            Sid: 'ReadInstancesAndOfferings',
            Effect: 'Allow',
            Action: ['ec2:DescribeInstances', 'ec2:DescribeInstanceTypeOfferings'],
            Resource: '*',
          },
        ]),
      },
    });
  });

  it('grants nothing else on *; isComplete, which launches a replacement, gets exactly the same', () => {
    const wildcard = statementsOf(template, 'OnEventServiceRole').filter((s) => s.Resource === '*');
    expect(wildcard.map((s) => s.Sid)).toEqual(['ReadInstancesAndOfferings']);
    expect(statementsOf(template, 'IsCompleteServiceRole')).toEqual(
      statementsOf(template, 'OnEventServiceRole'),
    );
  });

  it('launches after the instance role exists', () => {
    const [resource] = Object.values(template.findResources('Custom::CapacityLaunch'));
    expect(resource?.DependsOn).toContain(ref(bed.role));
  });
});

interface Statement {
  readonly Sid?: string;
  readonly Resource: unknown;
}

function statementsOf(template: Template, role: string): Statement[] {
  const policies = template.findResources('AWS::IAM::Policy', {
    Properties: { Roles: [{ Ref: Match.stringLikeRegexp(role) }] },
  });
  return Object.values(policies).flatMap((p) => p.Properties.PolicyDocument.Statement as Statement[]);
}

function onEventStatements(template: Template): Statement[] {
  return statementsOf(template, 'OnEventServiceRole');
}

describe('CapacityLaunch options', () => {
  it('uses the given stack tag, timeout and query interval', () => {
    const bed = testBed();
    new CapacityLaunch(
      bed.stack,
      'CapacityLaunch',
      props(bed, {
        stackTag: { key: 'lab', value: 'mine' },
        totalTimeout: Duration.minutes(50),
        queryInterval: Duration.seconds(30),
      }),
    );
    const template = Template.fromStack(bed.stack);
    template.hasResourceProperties('Custom::CapacityLaunch', { StackTagKey: 'lab', StackTagValue: 'mine' });
    const statements = onEventStatements(template) as unknown as { Sid: string; Condition?: unknown }[];
    expect(statements.find((s) => s.Sid === 'TerminateOnlyTheStacksInstances')?.Condition).toEqual({
      StringEquals: { 'aws:ResourceTag/lab': 'mine' },
    });
    const machine = JSON.stringify(Object.values(template.findResources('AWS::StepFunctions::StateMachine')));
    // 50 minutes at one check every 30 seconds.
    expect(machine).toContain('\\"IntervalSeconds\\":30');
    expect(machine).toContain('\\"MaxAttempts\\":100');
  });

  it('synthesizes env-agnostic, where the AZs are tokens and preferences cannot be checked', () => {
    const bed = testBed({ envAgnostic: true });
    new CapacityLaunch(bed.stack, 'CapacityLaunch', props(bed, { preferredAzs: ['us-west-2a'] }));
    const template = Template.fromStack(bed.stack);
    template.hasResourceProperties('Custom::CapacityLaunch', {
      StackTagValue: 'LabTest',
      Subnets: Match.arrayWith([
        { SubnetId: Match.anyValue(), AvailabilityZone: { 'Fn::Select': [0, { 'Fn::GetAZs': '' }] } },
      ]),
    });
  });
});

describe('CapacityLaunch validation', () => {
  const cases: [string, (bed: TestBed) => Partial<CapacityLaunchProps>, RegExp][] = [
    [
      'no subnets',
      () => ({ subnets: [] }),
      /CapacityLaunch: subnets must list at least one subnet, got \[\]/,
    ],
    [
      'a preferred AZ without a subnet',
      () => ({ preferredAzs: ['dummy1a', 'us-west-2z'] }),
      /CapacityLaunch: preferredAzs names "us-west-2z", which has no subnet; the subnets are in dummy1a, dummy1b, dummy1c/,
    ],
    [
      'an empty type',
      () => ({ instanceType: ' ' }),
      /CapacityLaunch: instanceType must name an instance type, got " "/,
    ],
    [
      'a repeated fallback type',
      () => ({ fallbackInstanceTypes: ['g5.12xlarge', 'g6.12xlarge'] }),
      /CapacityLaunch: fallbackInstanceTypes must not repeat a type already tried, got "g6.12xlarge" twice/,
    ],
    [
      'no vCPUs',
      () => ({ vcpusNeeded: 0 }),
      /CapacityLaunch: vcpusNeeded must be a whole number of at least 1, got 0/,
    ],
    [
      'a timeout over the framework limit',
      () => ({ totalTimeout: Duration.minutes(61) }),
      /CapacityLaunch: totalTimeout must be from 1 minute to 1 hour, got 3660 seconds/,
    ],
    [
      'an interval as long as the timeout',
      () => ({ totalTimeout: Duration.minutes(5), queryInterval: Duration.minutes(5) }),
      /CapacityLaunch: queryInterval must be at least 1 second and less than totalTimeout, got 300 seconds/,
    ],
    [
      'a reserved tag key',
      () => ({ stackTag: { key: 'aws:stack', value: 'x' } }),
      /CapacityLaunch: stackTag key must be non-empty and not start with "aws:", got "aws:stack"/,
    ],
  ];

  it.each(cases)('rejects %s', (_, change, message) => {
    const bed = testBed();
    expect(() => new CapacityLaunch(bed.stack, 'CapacityLaunch', props(bed, change(bed)))).toThrow(message);
  });

  it('rejects a launch template that carries security groups, at synthesis', () => {
    const bed = testBed({ templateSecurityGroup: true });
    new CapacityLaunch(bed.stack, 'CapacityLaunch', props(bed));
    expect(() => Template.fromStack(bed.stack)).toThrow(
      /the launch template sets securityGroupIds; CapacityLaunch gives the network interface per attempt/,
    );
  });
});
