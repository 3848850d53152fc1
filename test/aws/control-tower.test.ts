import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../temp.ts';
import { combinedRules, guardReport, rulesNotApplying } from './control-tower.ts';

/**
 * One deliberately broken resource for each family of Control Tower rules that applies to the
 * lab's stacks and has a rule to break (EC2, IAM, Lambda, CloudWatch Logs, S3, Step Functions).
 * ControlTowerChecks runs the rule files as one combined rules file; each finding must still be
 * reported under its own rule's name, on its resource.
 */
const BROKEN = {
  Resources: {
    PublicSubnet: {
      Type: 'AWS::EC2::Subnet',
      Properties: { VpcId: 'vpc-1', CidrBlock: '10.0.240.0/24', MapPublicIpOnLaunch: true },
    },
    AdminPolicy: {
      Type: 'AWS::IAM::Policy',
      Properties: {
        PolicyName: 'admin',
        PolicyDocument: {
          Version: '2012-10-17',
          Statement: [{ Effect: 'Allow', Action: '*', Resource: '*' }],
        },
        Roles: ['role'],
      },
    },
    OutsideVpc: {
      Type: 'AWS::Lambda::Function',
      Properties: {
        Role: 'arn:aws:iam::111122223333:role/fn',
        Code: { ZipFile: 'exports.handler = async () => 1;' },
        Runtime: 'nodejs22.x',
        Handler: 'index.handler',
      },
    },
    ForeverLogs: { Type: 'AWS::Logs::LogGroup', Properties: {} },
    PlainBucket: { Type: 'AWS::S3::Bucket', Properties: {} },
    // Not in the lab's stacks: rule files whose parameterized rules take a parameter named like a
    // variable of the file (`rule check(sqs_queues)`), which the combined form must not rename.
    UnrotatedKey: {
      Type: 'AWS::KMS::Key',
      Properties: { KeyPolicy: { Version: '2012-10-17', Statement: [] }, EnableKeyRotation: false },
    },
    NoDeadLetters: { Type: 'AWS::SQS::Queue', Properties: { SqsManagedSseEnabled: false } },
    SilentMachine: {
      Type: 'AWS::StepFunctions::StateMachine',
      Properties: { RoleArn: 'arn:aws:iam::111122223333:role/sfn', DefinitionString: '{}' },
    },
  },
};

describe('Control Tower rules in one cfn-guard pass', () => {
  it('reports each broken family under its own rule names and resources', () => {
    const path = join(tempDir('lab-guard-'), 'Broken.template.json');
    writeFileSync(path, JSON.stringify(BROKEN));
    const report = guardReport([path], rulesNotApplying([path]));
    expect(report.success).toBe(false);
    const findings = [
      ...new Set(
        report.violations.flatMap((v) =>
          v.violatingResources.map(
            (at) => `${at.resourceLogicalId} ${v.ruleName} ${[...new Set(at.locations)].join(' ')}`,
          ),
        ),
      ),
    ].sort();
    // The same findings as cfn-guard gives with the rule files one by one (compared in full,
    // descriptions and locations too, when the combined form was introduced: docs/testing.md).
    expect(findings).toEqual([
      'AdminPolicy iam_inline_policy_no_statements_with_admin_access_check /Resources/AdminPolicy/Properties/PolicyDocument/Statement/0/Resource',
      'AdminPolicy iam_inline_policy_no_statements_with_full_access_check /Resources/AdminPolicy/Properties/PolicyDocument/Statement/0/Action',
      'ForeverLogs cloudwatch_log_group_encrypted_check /Resources/ForeverLogs/Properties',
      'NoDeadLetters sqs_dlq_check /Resources/NoDeadLetters/Properties',
      'NoDeadLetters sqs_queue_encrypted_check /Resources/NoDeadLetters/Properties/SqsManagedSseEnabled /Resources/NoDeadLetters/Properties',
      'OutsideVpc lambda_inside_vpc_check /Resources/OutsideVpc/Properties',
      'PlainBucket s3_bucket_default_encryption_kms_check /Resources/PlainBucket/Properties',
      'PlainBucket s3_bucket_level_public_access_prohibited_check /Resources/PlainBucket/Properties',
      'PlainBucket s3_bucket_logging_enabled_check /Resources/PlainBucket/Properties',
      'PlainBucket s3_bucket_object_lock_enabled_check /Resources/PlainBucket/Properties',
      'PlainBucket s3_bucket_versioning_enabled_check /Resources/PlainBucket/Properties',
      'PlainBucket s3_event_notifications_enabled_check /Resources/PlainBucket/Properties',
      'PlainBucket s3_lifecycle_policy_check /Resources/PlainBucket/Properties',
      'PublicSubnet subnet_auto_assign_public_ip_disabled_check /Resources/PublicSubnet/Properties/MapPublicIpOnLaunch',
      'SilentMachine step_functions_state_machine_logging_enabled_check /Resources/SilentMachine/Properties',
      'SilentMachine step_functions_state_machine_tracing_enabled_check /Resources/SilentMachine/Properties',
      'UnrotatedKey kms_create_grant_aws_service_check /Resources/UnrotatedKey/Properties/KeyPolicy/Statement',
      'UnrotatedKey kms_key_rotation_enabled_check /Resources/UnrotatedKey/Properties/EnableKeyRotation',
    ]);
  });

  it('refuses two rule files that define the same rule', () => {
    const dir = tempDir('lab-guard-rules-');
    const rule = 'let T = "AWS::S3::Bucket"\nrule same_rule when %T !empty { %T == "x" }\n';
    writeFileSync(join(dir, 'a.guard'), rule);
    writeFileSync(join(dir, 'b.guard'), rule);
    expect(() => combinedRules([join(dir, 'a.guard'), join(dir, 'b.guard')])).toThrow(
      /b\.guard and .*a\.guard both define rule same_rule/,
    );
  });
});
