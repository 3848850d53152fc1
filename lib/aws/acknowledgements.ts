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
