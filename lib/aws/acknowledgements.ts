import { type CfnElement, Stack, Validations } from 'aws-cdk-lib';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as cr from 'aws-cdk-lib/custom-resources';

/**
 * cdk-nag acknowledgements shared by the lab's Lambda-backed custom resources, each with the
 * reason a reviewer would check. Findings specific to one construct are acknowledged there.
 */

const BASIC_EXECUTION_ROLE =
  'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]';

const WAITER_ACKNOWLEDGEMENTS = [
  {
    id: 'AwsSolutions-SF1',
    reason: 'The waiter state machine only polls isComplete; its steps are logged by the framework functions',
  },
  {
    id: 'AwsSolutions-SF2',
    reason:
      'X-Ray tracing of a one-step polling loop adds cost without diagnostic value; handler logs suffice',
  },
];

/** A handler function of one of the lab's custom resources. */
export function acknowledgeHandler(fn: lambda.IFunction): void {
  Validations.of(fn).acknowledge(
    {
      id: BASIC_EXECUTION_ROLE,
      reason:
        'Grants only CloudWatch Logs writes for the function; its EC2/IAM permissions are separate scoped statements',
    },
    {
      id: 'AwsSolutions-L1',
      reason:
        'nodejs22.x is the runtime this project targets and tests (an active LTS line); it is raised deliberately, not by the linter',
    },
  );
}

/** The custom-resources Provider framework around the lab's handlers (functions and waiter). */
export function acknowledgeProviderFramework(
  provider: cr.Provider,
  handlers: readonly lambda.IFunction[],
): void {
  const stack = Stack.of(provider);
  const arnOf = (construct: { node: { defaultChild?: unknown } }) =>
    `<${stack.getLogicalId(construct.node.defaultChild as CfnElement)}.Arn>`;
  const frameworkFunctions = provider.node
    .findAll()
    .filter((c) => c.node.id.startsWith('framework-') && c.node.defaultChild !== undefined);
  const invoked = [...handlers, ...frameworkFunctions];
  // Only a provider with an isComplete handler has the waiter state machine.
  const waiter = provider.node.tryFindChild('waiter-state-machine') !== undefined;
  Validations.of(provider).acknowledge(
    { id: BASIC_EXECUTION_ROLE, reason: 'The framework functions only need to write their own logs' },
    {
      id: 'AwsSolutions-L1',
      reason: 'The Provider framework pins the runtime of its own functions; it is updated with aws-cdk-lib',
    },
    ...invoked.map((fn) => ({
      id: `AwsSolutions-IAM5[Resource::${arnOf(fn)}:*]`,
      reason: 'The framework invokes exactly this function; ":*" covers its versions and aliases',
    })),
    ...(waiter ? WAITER_ACKNOWLEDGEMENTS : []),
  );
}

/** The rule namespace of `@cdklabs/cdk-validator-cfnguard` findings (its plugin name). */
export const CFN_GUARD_NAMESPACE = 'cdk-validator-cfnguard';

/**
 * The AWS Control Tower proactive controls (run by cfn-guard through `@cdklabs/cdk-validator-cfnguard`)
 * that the lab does not follow, each with the reason. Everything else those rules found was fixed
 * (subnets assign no public IP, the results bucket expires noncurrent versions, the launch template
 * turns on detailed monitoring). Keyed by the guard rule name the plugin reports.
 */
export const CONTROL_TOWER_ACKNOWLEDGEMENTS: Readonly<Record<string, string>> = {
  // CT.LAMBDA.PR.3
  lambda_inside_vpc_check:
    'The lab VPC has public subnets only and no NAT gateway (docs/facts.md §2); a function inside it could not reach the EC2, IAM and CloudFormation endpoints it exists to call',
  // CT.EC2.PR.15
  ec2_launch_template_nitro_instance_type_check:
    "g6 instances are Nitro-based; the rule's NITRO_INSTANCE_TYPES list (rules/control-tower/cfn-guard/ec2/ct-ec2-pr-15.guard of @cdklabs/cdk-validator-cfnguard 0.0.62) stops at g5/g5g and lacks g6",
  // CT.CLOUDWATCH.PR.2
  cloudwatch_log_group_retention_period_check:
    'The lab is short-lived and its log groups are deleted with the stack; a month covers debugging a deploy, a year would only keep cost behind',
  // CT.CLOUDWATCH.PR.3
  cloudwatch_log_group_encrypted_check:
    'CloudWatch Logs encrypts every log group at rest; a customer-managed key would add a key, its policy and its cost to a lab whose logs hold no secrets (the WaitCondition URL is never logged)',
  // CT.STEPFUNCTIONS.PR.1
  step_functions_state_machine_logging_enabled_check:
    "The Provider framework's waiter only polls isComplete; the framework and handler functions log every step",
  // CT.STEPFUNCTIONS.PR.2
  step_functions_state_machine_tracing_enabled_check:
    'X-Ray tracing of a one-step polling loop adds cost without diagnostic value; the handler logs suffice',
  // CT.S3.PR.2
  s3_bucket_logging_enabled_check:
    "Only the lab's own host writes to the results bucket, under its stack prefix; CloudTrail data events audit object access without a second retained bucket",
  // CT.S3.PR.4
  s3_event_notifications_enabled_check:
    'Nothing consumes result uploads as events; people read them with lab report',
  // CT.S3.PR.9
  s3_bucket_object_lock_enabled_check:
    'Results must stay deletable by their owner ("Destroying the lab" in the README); versioning with noncurrent expiry guards against overwrites',
  // CT.S3.PR.10
  s3_bucket_default_encryption_kms_check:
    'SSE-S3 encrypts the results at rest; a KMS key would have to be retained with the retained bucket and cost beyond the lab',
};

/** Acknowledges, on the whole stack, the Control Tower rules the lab deliberately does not follow. */
export function acknowledgeControlTowerRules(stack: Stack): void {
  Validations.of(stack).acknowledge(
    ...Object.entries(CONTROL_TOWER_ACKNOWLEDGEMENTS).map(([rule, reason]) => ({
      id: `${CFN_GUARD_NAMESPACE}::${rule}`,
      reason,
    })),
  );
}
