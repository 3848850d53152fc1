import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import { describe, expect, it } from 'vitest';
import {
  type CfnTemplate,
  contextFromStackId,
  declaredPoliciesByRole,
  resolveString,
} from '../../lib/teardown/template.ts';

const STACK_ID =
  'arn:aws:cloudformation:us-west-2:123456789012:stack/lab/0a1b2c3d-1111-2222-3333-444455556666';

function context(
  physicalIds: Record<string, string> = {},
  parameters: Record<string, string> = {},
  stackId = STACK_ID,
) {
  return contextFromStackId(
    stackId,
    'lab',
    new Map(Object.entries(physicalIds)),
    new Map(Object.entries(parameters)),
  );
}

describe('resolveString', () => {
  it('resolves the Fn::Join CDK emits for an AWS managed policy, per partition', () => {
    const join = {
      'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':iam::aws:policy/AmazonSSMManagedInstanceCore']],
    };
    expect(resolveString(join, context())).toBe('arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore');
    const china = context({}, {}, 'arn:aws-cn:cloudformation:cn-north-1:123456789012:stack/lab/x');
    expect(resolveString(join, china)).toBe('arn:aws-cn:iam::aws:policy/AmazonSSMManagedInstanceCore');
  });

  it('resolves Ref to pseudo parameters, parameters and resources', () => {
    const ctx = context(
      { WriteResults: 'arn:aws:iam::123456789012:policy/lab-WriteResults-ABC' },
      { Suffix: 'x' },
    );
    expect(resolveString({ Ref: 'AWS::AccountId' }, ctx)).toBe('123456789012');
    expect(resolveString({ Ref: 'AWS::Region' }, ctx)).toBe('us-west-2');
    expect(resolveString({ Ref: 'AWS::StackName' }, ctx)).toBe('lab');
    expect(resolveString({ Ref: 'Suffix' }, ctx)).toBe('x');
    expect(resolveString({ Ref: 'WriteResults' }, ctx)).toBe(
      'arn:aws:iam::123456789012:policy/lab-WriteResults-ABC',
    );
    expect(resolveString({ 'Fn::GetAtt': ['WriteResults', 'PolicyArn'] }, ctx)).toBe(
      'arn:aws:iam::123456789012:policy/lab-WriteResults-ABC',
    );
    expect(resolveString({ Ref: 'Unknown' }, ctx)).toBeUndefined();
  });

  it('resolves Fn::Sub in both forms and keeps escaped literals', () => {
    const ctx = context();
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Fn::Sub placeholders, not JavaScript templates
    expect(resolveString({ 'Fn::Sub': 'arn:${AWS::Partition}:iam::${AWS::AccountId}:policy/p' }, ctx)).toBe(
      'arn:aws:iam::123456789012:policy/p',
    );
    expect(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Fn::Sub placeholders, not JavaScript templates
      resolveString({ 'Fn::Sub': ['arn:${P}:iam::aws:policy/${Name}', { P: 'aws', Name: 'X' }] }, ctx),
    ).toBe('arn:aws:iam::aws:policy/X');
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Fn::Sub placeholders, not JavaScript templates
    expect(resolveString({ 'Fn::Sub': 'a-${!Literal}' }, ctx)).toBe('a-${Literal}');
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Fn::Sub placeholders, not JavaScript templates
    expect(resolveString({ 'Fn::Sub': 'a-${Role.Arn}' }, ctx)).toBeUndefined();
  });

  it('gives up on what it cannot know', () => {
    expect(resolveString({ 'Fn::ImportValue': 'shared-policy-arn' }, context())).toBeUndefined();
    expect(resolveString({ 'Fn::If': ['C', 'a', 'b'] }, context())).toBeUndefined();
    expect(resolveString(42, context())).toBeUndefined();
  });
});

describe('declaredPoliciesByRole', () => {
  it('reads back from a synthesized CDK template everything the stack declares on a role', () => {
    const stack = new Stack(new App({ builtinCloudFormationValidation: false }), 'lab');
    const role = new iam.Role(stack, 'InstanceRole', {
      assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
      managedPolicies: [iam.ManagedPolicy.fromAwsManagedPolicyName('AmazonSSMManagedInstanceCore')],
      inlinePolicies: {
        ReadModels: new iam.PolicyDocument({
          statements: [new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: ['*'] })],
        }),
      },
    });
    role.addToPrincipalPolicy(new iam.PolicyStatement({ actions: ['s3:PutObject'], resources: ['*'] }));
    new iam.ManagedPolicy(stack, 'WriteResults', {
      statements: [new iam.PolicyStatement({ actions: ['s3:PutObject'], resources: ['*'] })],
      roles: [role],
    });
    const other = new iam.Role(stack, 'Other', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
    });
    other.addToPrincipalPolicy(new iam.PolicyStatement({ actions: ['s3:ListBucket'], resources: ['*'] }));
    const json = Template.fromStack(stack).toJSON() as CfnTemplate;
    const logicalId = (type: string, prefix: string) =>
      Object.entries(json.Resources ?? {}).find(
        ([id, resource]) => resource.Type === type && id.startsWith(prefix),
      )?.[0] ?? '';
    const roleId = logicalId('AWS::IAM::Role', 'InstanceRole');
    const otherId = logicalId('AWS::IAM::Role', 'Other');
    const managedId = logicalId('AWS::IAM::ManagedPolicy', 'WriteResults');
    const defaultPolicyName =
      json.Resources?.[logicalId('AWS::IAM::Policy', 'InstanceRoleDefaultPolicy')]?.Properties?.PolicyName;

    const declared = declaredPoliciesByRole(
      json,
      context({
        [roleId]: 'lab-InstanceRole3CCE2F1D-Q1W2E3R4T5Y6',
        [otherId]: 'lab-Other-ZZZ',
        [managedId]: 'arn:aws:iam::123456789012:policy/lab-WriteResults-ABC',
      }),
    );

    expect(declared.get(roleId)).toEqual({
      managedPolicyArns: [
        'arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore',
        'arn:aws:iam::123456789012:policy/lab-WriteResults-ABC',
      ],
      inlinePolicyNames: ['ReadModels', defaultPolicyName],
      unresolvedManaged: [],
      unresolvedInline: [],
    });
    expect(declared.get(otherId)?.inlinePolicyNames).toEqual([
      json.Resources?.[logicalId('AWS::IAM::Policy', 'OtherDefaultPolicy')]?.Properties?.PolicyName,
    ]);
    expect(declared.get(otherId)?.managedPolicyArns).toEqual([]);
  });

  it('counts AWS::IAM::RolePolicy and reports what it cannot resolve', () => {
    const template: CfnTemplate = {
      Resources: {
        Role: {
          Type: 'AWS::IAM::Role',
          Properties: { ManagedPolicyArns: [{ 'Fn::ImportValue': 'shared-policy' }] },
        },
        Extra: {
          Type: 'AWS::IAM::RolePolicy',
          Properties: { RoleName: { Ref: 'Role' }, PolicyName: 'extra' },
        },
        Elsewhere: {
          Type: 'AWS::IAM::RolePolicy',
          Properties: { RoleName: 'someone-else', PolicyName: 'not-ours' },
        },
      },
    };

    expect(declaredPoliciesByRole(template, context({ Role: 'lab-Role-1' })).get('Role')).toEqual({
      managedPolicyArns: [],
      inlinePolicyNames: ['extra'],
      unresolvedManaged: ['{"Fn::ImportValue":"shared-policy"}'],
      unresolvedInline: [],
    });
  });
});
