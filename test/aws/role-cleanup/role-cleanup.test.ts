import { App, CfnResource, Stack, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { RoleCleanup } from '../../../lib/aws/role-cleanup/role-cleanup.ts';
import { testApp } from '../app.ts';
import { stagedHandler } from '../handler-bundle.ts';

interface Resource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
  readonly DependsOn?: string[];
}

/** A small stand-in for the lab stack: an instance role, a helper role, the cleanup and a capacity launch. */
function testStack() {
  const app = testApp();
  const stack = new Stack(app, 'RoleCleanupTest');
  const instanceRole = new iam.Role(stack, 'InstanceRole', {
    assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
    managedPolicies: [iam.ManagedPolicy.fromAwsManagedPolicyName('AmazonSSMManagedInstanceCore')],
    inlinePolicies: {
      ReadModels: new iam.PolicyDocument({
        statements: [
          new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: ['arn:aws:s3:::models/*'] }),
        ],
      }),
    },
  });
  const helperRole = new iam.Role(stack, 'HelperRole', {
    assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
  });
  const outsider = new iam.Role(stack, 'NotCleaned', {
    assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
  });
  new iam.ManagedPolicy(stack, 'WriteResults', {
    statements: [
      new iam.PolicyStatement({ actions: ['s3:PutObject'], resources: ['arn:aws:s3:::results/*'] }),
    ],
    roles: [instanceRole],
  });
  new iam.Policy(stack, 'OutsiderPolicy', {
    statements: [new iam.PolicyStatement({ actions: ['s3:ListBucket'], resources: ['*'] })],
    roles: [outsider],
  });
  // As a launch template with a role makes one: the stack's own profile, left to CloudFormation.
  new iam.CfnInstanceProfile(stack, 'InstanceProfile', { roles: [instanceRole.roleName] });
  const cleanup = new RoleCleanup(stack, 'RoleCleanup', { roles: [instanceRole, helperRole] });
  // Added after the construct: the allow-list is derived at synthesis, so it still counts.
  instanceRole.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: ['ssm:GetParameter'],
      resources: ['arn:aws:ssm:*:*:parameter/lab/*'],
    }),
  );
  const capacityLaunch = new CfnResource(stack, 'CapacityLaunch', {
    type: 'AWS::CloudFormation::WaitConditionHandle',
  });
  cleanup.mustRunAfterDeletionOf(capacityLaunch);
  return { app, stack, instanceRole, helperRole, cleanup };
}

describe('RoleCleanup construct', () => {
  let template: Template;
  let resources: Record<string, Resource>;
  let ids: {
    instanceRole: string;
    helperRole: string;
    cleanup: string;
    defaultPolicy: string;
    handlerRole: string;
  };

  let built: ReturnType<typeof testStack>;

  beforeAll(() => {
    built = testStack();
    template = Template.fromStack(built.stack);
    resources = template.toJSON().Resources as Record<string, Resource>;
    const logicalId = (construct: { node: { defaultChild?: unknown } } | CfnResource) =>
      built.stack.getLogicalId(
        (construct instanceof CfnResource ? construct : construct.node.defaultChild) as CfnResource,
      );
    const defaultPolicy = built.instanceRole.node.findChild('DefaultPolicy') as iam.Policy;
    ids = {
      instanceRole: logicalId(built.instanceRole),
      helperRole: logicalId(built.helperRole),
      cleanup: logicalId(built.cleanup.resource),
      defaultPolicy: logicalId(defaultPolicy),
      handlerRole: logicalId(built.cleanup.handler.role as iam.Role),
    };
  });

  it('is a Custom::RoleCleanup that depends on each role and its default policy', () => {
    const cleanup = resources[ids.cleanup];
    expect(cleanup?.Type).toBe('Custom::RoleCleanup');
    expect(cleanup?.DependsOn).toEqual(
      expect.arrayContaining([ids.instanceRole, ids.helperRole, ids.defaultPolicy]),
    );
  });

  it('makes the capacity launch depend on the cleanup, so the launch (instance) is deleted first', () => {
    expect(resources.CapacityLaunch?.DependsOn).toEqual([ids.cleanup]);
    // And the reverse never holds: that would be a cycle, or the cleanup running before termination.
    expect(resources[ids.cleanup]?.DependsOn ?? []).not.toContain('CapacityLaunch');
  });

  it('derives the allow-list from the stack: managed ARNs, inline, default and attached policies', () => {
    const defaultPolicyName = resources[ids.defaultPolicy]?.Properties?.PolicyName;
    expect(defaultPolicyName).toEqual(expect.any(String));
    template.hasResourceProperties('Custom::RoleCleanup', {
      Roles: [
        {
          RoleName: { Ref: ids.instanceRole },
          ManagedPolicyArns: [
            {
              'Fn::Join': [
                '',
                ['arn:', { Ref: 'AWS::Partition' }, ':iam::aws:policy/AmazonSSMManagedInstanceCore'],
              ],
            },
            { Ref: Match.stringLikeRegexp('^WriteResults') },
          ],
          InlinePolicyNames: ['ReadModels', defaultPolicyName],
          InstanceProfileNames: [{ Ref: 'InstanceProfile' }],
        },
        {
          RoleName: { Ref: ids.helperRole },
          ManagedPolicyArns: [],
          InlinePolicyNames: [],
          InstanceProfileNames: [],
        },
      ],
    });
  });

  it('grants the handler the policy actions on the stack’s roles only, and instance profile removal', () => {
    const handlerPolicies = Object.values(resources).filter(
      (resource) =>
        resource.Type === 'AWS::IAM::Policy' &&
        JSON.stringify(resource.Properties?.Roles) === JSON.stringify([{ Ref: ids.handlerRole }]),
    );
    expect(handlerPolicies).toHaveLength(1);
    expect(handlerPolicies[0]?.Properties?.PolicyDocument).toEqual({
      Version: '2012-10-17',
      Statement: [
        {
          Effect: 'Allow',
          Action: [
            'iam:ListAttachedRolePolicies',
            'iam:ListRolePolicies',
            'iam:DetachRolePolicy',
            'iam:DeleteRolePolicy',
          ],
          Resource: [{ 'Fn::GetAtt': [ids.instanceRole, 'Arn'] }, { 'Fn::GetAtt': [ids.helperRole, 'Arn'] }],
        },
        {
          Effect: 'Allow',
          Action: 'iam:ListInstanceProfilesForRole',
          Resource: [{ 'Fn::GetAtt': [ids.instanceRole, 'Arn'] }, { 'Fn::GetAtt': [ids.helperRole, 'Arn'] }],
        },
        {
          Effect: 'Allow',
          Action: 'iam:RemoveRoleFromInstanceProfile',
          Resource: {
            'Fn::Join': [
              '',
              ['arn:', { Ref: 'AWS::Partition' }, ':iam::', { Ref: 'AWS::AccountId' }, ':instance-profile/*'],
            ],
          },
        },
      ],
    });
    // No other statement anywhere in the stack grants these actions.
    const grants = Object.values(resources)
      .filter((resource) => resource.Type === 'AWS::IAM::Policy')
      .flatMap((resource) => {
        const document = resource.Properties?.PolicyDocument as
          | { Statement: { Action: unknown }[] }
          | undefined;
        return document?.Statement ?? [];
      })
      .filter((statement) => JSON.stringify(statement.Action).includes('RolePolic'));
    expect(grants).toHaveLength(1);
  });

  it('runs on nodejs22.x, bundled locally', () => {
    template.hasResourceProperties('AWS::Lambda::Function', {
      Runtime: 'nodejs22.x',
      Handler: 'index.handler',
      Description: Match.stringLikeRegexp('^RoleCleanup'),
    });
  });

  it('runs a CommonJS bundle, made in-process, that exports the handler', () => {
    const staged = stagedHandler(built.stack, template, built.cleanup.handler);
    expect(staged.files).toEqual(['index.js']);
    expect(staged.handler).toBe('index.handler');
    const bundle = staged.load();
    expect(typeof bundle.handler).toBe('function');
  });

  it('keeps no log group behind on destroy', () => {
    const logGroups = Object.values(template.findResources('AWS::Logs::LogGroup')) as {
      DeletionPolicy?: string;
    }[];
    expect(logGroups).toHaveLength(2);
    for (const logGroup of logGroups) expect(logGroup.DeletionPolicy).toBe('Delete');
  });

  it('has no unacknowledged AwsSolutions finding of its own (the stand-in roles of the test stack do)', () => {
    const { app } = testStack();
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    let report = '';
    try {
      app.synth();
    } catch (error) {
      report = String((error as Error).message);
    }
    expect(report).toContain('RoleCleanupTest/InstanceRole/Resource');
    expect(report).not.toContain('RoleCleanupTest/RoleCleanup/');
  });

  describe('validation', () => {
    it('needs at least one role', () => {
      const stack = new Stack(new App({ builtinCloudFormationValidation: false }), 'Empty');
      expect(() => new RoleCleanup(stack, 'RoleCleanup', { roles: [] })).toThrow(
        'RoleCleanup Empty/RoleCleanup: props.roles must name at least one role, got []',
      );
    });

    it('refuses a role of another stack', () => {
      const app = new App({ builtinCloudFormationValidation: false });
      const other = new Stack(app, 'Other');
      const role = new iam.Role(other, 'Role', { assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com') });
      expect(() => new RoleCleanup(new Stack(app, 'Lab'), 'RoleCleanup', { roles: [role] })).toThrow(
        'props.roles must hold roles of stack Lab, got Other/Role from stack Other',
      );
    });

    it('refuses an imported role', () => {
      const stack = new Stack(new App({ builtinCloudFormationValidation: false }), 'Lab');
      const imported = iam.Role.fromRoleName(stack, 'Imported', 'someone-elses-role');
      expect(() => new RoleCleanup(stack, 'RoleCleanup', { roles: [imported as iam.Role] })).toThrow(
        /props.roles must hold roles created by this stack \(iam.Role\)/,
      );
    });

    it('refuses a role named twice', () => {
      const stack = new Stack(new App({ builtinCloudFormationValidation: false }), 'Lab');
      const role = new iam.Role(stack, 'Role', { assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com') });
      expect(() => new RoleCleanup(stack, 'RoleCleanup', { roles: [role, role] })).toThrow(
        'props.roles names a role twice: Lab/Role, Lab/Role',
      );
    });
  });
});
