import {
  CustomResource,
  Duration,
  type IResolveContext,
  Lazy,
  RemovalPolicy,
  Stack,
  Validations,
} from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as cr from 'aws-cdk-lib/custom-resources';
import { Construct, type IConstruct } from 'constructs';
import { acknowledgeHandler, acknowledgeProviderFramework } from '../acknowledgements.ts';
import { HandlerBundling, handlerCode, handlerName } from '../handler-code.ts';
import {
  INLINE_POLICY_NAMES,
  INSTANCE_PROFILE_NAMES,
  MANAGED_POLICY_ARNS,
  ROLE_CLEANUP_RESOURCE_TYPE,
  ROLE_NAME,
  ROLES,
} from './props.ts';

export interface RoleCleanupProps {
  /**
   * The roles, created by this stack, whose undeclared policies are stripped on stack delete
   * (typically the instance role). Imported roles are not accepted: the cleanup only touches roles
   * the stack owns.
   */
  readonly roles: readonly iam.Role[];
}

const HANDLER_RUNTIME = lambda.Runtime.NODEJS_22_X;

/**
 * The handler's bundle (index.js, CommonJS), made by esbuild in the synthesizing process: the
 * lab's toolchain has no Docker engine. The AWS SDK v3 is in the runtime.
 */
const HANDLER_BUNDLING = new HandlerBundling({
  entry: new URL('./handler.ts', import.meta.url),
  runtime: HANDLER_RUNTIME,
  format: 'cjs',
  minify: false,
  externalModules: ['@aws-sdk/*'],
});

/**
 * On stack delete, strips from the stack's roles every managed and inline policy the stack did not
 * declare (Systems Manager Quick Setup attaches some to instance roles after deploy), so that
 * CloudFormation's `DeleteRole` does not fail with `DeleteConflict`. Not-found is success.
 *
 * The allow-list is derived from the stack itself at synthesis, per role:
 * - managed policies: the role's own `ManagedPolicyArns` (what `managedPolicies` and
 *   `addManagedPolicy` put there), plus every `AWS::IAM::ManagedPolicy` in the stack whose `Roles`
 *   names the role (`ManagedPolicy({ roles })`, `attachToRole`);
 * - inline policies: the names in the role's own `Policies` (`inlinePolicies`), plus the
 *   `PolicyName` of every `AWS::IAM::Policy` (`addToPrincipalPolicy`'s default policy,
 *   `Policy({ roles })`) and `AWS::IAM::RolePolicy` in the stack attached to the role: IAM stores
 *   those as inline policies of the role under that name.
 * It is computed lazily, so policies added after this construct is created are still included.
 *
 * On delete the roles are also removed from every instance profile the stack did not create (IAM
 * refuses `DeleteRole` while a profile holds the role); the stack's own profiles (every
 * `AWS::IAM::InstanceProfile` naming the role) are left to CloudFormation.
 *
 * Dependency order on delete (CloudFormation deletes a resource only after every resource that
 * depends on it has been deleted, i.e. in reverse dependency order):
 * - the custom resource depends on each role (and its default policy), so its Delete runs while
 *   the roles still exist, and the roles are deleted only after the cleanup has succeeded;
 * - `mustRunAfterDeletionOf(capacityLaunch)` makes the capacity launch depend on this custom
 *   resource, so CloudFormation deletes the capacity launch first (its Delete terminates the
 *   instance and waits for `terminated`) and only then runs this cleanup: no running instance is
 *   left to have policies re-attached to its role behind the cleanup's back.
 * - the handler, its role and its log group are dependencies of the custom resource (through the
 *   service token), so they still exist when the Delete runs.
 */
export class RoleCleanup extends Construct {
  /** The custom resource; add dependencies on it, not on the whole construct. */
  readonly resource: CustomResource;
  /** The `onEvent` function; its role may only list, detach and delete policies of `props.roles`. */
  readonly handler: lambda.Function;
  /** The Provider framework that calls `handler`. */
  readonly provider: cr.Provider;

  constructor(scope: Construct, id: string, props: RoleCleanupProps) {
    super(scope, id);
    const roles = [...props.roles];
    if (roles.length === 0) {
      throw new Error(`RoleCleanup ${this.node.path}: props.roles must name at least one role, got []`);
    }
    const stack = Stack.of(this);
    for (const role of roles) {
      if (!(role instanceof iam.Role)) {
        throw new Error(
          `RoleCleanup ${this.node.path}: props.roles must hold roles created by this stack (iam.Role), got ${String(role)}`,
        );
      }
      if (Stack.of(role) !== stack) {
        throw new Error(
          `RoleCleanup ${this.node.path}: props.roles must hold roles of stack ${stack.node.path}, got ${role.node.path} from stack ${Stack.of(role).node.path}`,
        );
      }
    }
    if (new Set(roles).size !== roles.length) {
      throw new Error(
        `RoleCleanup ${this.node.path}: props.roles names a role twice: ${roles.map((role) => role.node.path).join(', ')}`,
      );
    }

    const logGroup = new logs.LogGroup(this, 'HandlerLogs', {
      retention: logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.handler = new lambda.Function(this, 'Handler', {
      code: handlerCode(HANDLER_BUNDLING),
      handler: handlerName(HANDLER_BUNDLING, 'handler'),
      runtime: HANDLER_RUNTIME,
      timeout: Duration.minutes(2),
      description: 'RoleCleanup: strips policies the stack did not declare from its roles on stack delete',
      logGroup,
    });
    this.handler.addToRolePolicy(
      new iam.PolicyStatement({
        actions: [
          'iam:ListAttachedRolePolicies',
          'iam:ListRolePolicies',
          'iam:DetachRolePolicy',
          'iam:DeleteRolePolicy',
        ],
        resources: roles.map((role) => role.roleArn),
      }),
    );
    // IAM refuses DeleteRole while any instance profile holds the role; RemoveRoleFromInstanceProfile
    // is authorized on the instance profile, whose name (someone else's) is not known here.
    this.handler.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['iam:ListInstanceProfilesForRole'],
        resources: roles.map((role) => role.roleArn),
      }),
    );
    this.handler.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['iam:RemoveRoleFromInstanceProfile'],
        resources: [
          stack.formatArn({ service: 'iam', region: '', resource: 'instance-profile', resourceName: '*' }),
        ],
      }),
    );
    this.provider = new cr.Provider(this, 'Provider', {
      onEventHandler: this.handler,
      logGroup: new logs.LogGroup(this, 'ProviderLogs', {
        retention: logs.RetentionDays.ONE_MONTH,
        removalPolicy: RemovalPolicy.DESTROY,
      }),
    });
    acknowledgeHandler(this.handler);
    acknowledgeProviderFramework(this.provider, [this.handler]);
    Validations.of(this.handler).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*]',
      reason:
        "The profiles to leave are ones the stack did not create, so their names cannot be known; IAM authorizes the action on the profile alone, and the handler only removes the stack's own roles, found through ListInstanceProfilesForRole scoped to those roles",
    });
    this.resource = new CustomResource(this, 'Resource', {
      serviceToken: this.provider.serviceToken,
      resourceType: ROLE_CLEANUP_RESOURCE_TYPE,
      properties: {
        // Uncached: resolved at synthesis, after aspects, so late additions to the roles count too.
        [ROLES]: Lazy.uncachedAny({
          produce: (context: IResolveContext) => roles.map((role) => declaredPolicies(role, context)),
        }),
      },
    });
    // Explicit, on top of the Ref in the properties: deleted before each role and its default policy.
    for (const role of roles) this.resource.node.addDependency(role);
  }

  /** The AwsSolutions findings on this construct's own functions, each with its reason. */

  /**
   * Makes this cleanup run only after `constructs` are deleted, by making each of them depend on
   * the custom resource (CloudFormation deletes dependents first). Use it with the capacity launch,
   * whose Delete terminates the instance: `roleCleanup.mustRunAfterDeletionOf(capacityLaunch)`.
   */
  mustRunAfterDeletionOf(...constructs: IConstruct[]): void {
    for (const construct of constructs) construct.node.addDependency(this.resource);
  }
}

/** One `Roles` entry: the role's name and what the stack declares on it, resolved at synthesis. */
function declaredPolicies(role: iam.Role, context: IResolveContext): Record<string, unknown> {
  const cfnRole = role.node.defaultChild as iam.CfnRole;
  const roleRef = JSON.stringify(context.resolve(role.roleName));
  const namesRole = (names: unknown): boolean =>
    Array.isArray(names) && names.some((name) => JSON.stringify(name) === roleRef);
  const managed: unknown[] = [...asList(context.resolve(cfnRole.managedPolicyArns))];
  const profiles: unknown[] = [];
  const inline: unknown[] = asList(context.resolve(cfnRole.policies)).map(
    (policy) => (policy as iam.CfnRole.PolicyProperty).policyName,
  );
  for (const construct of Stack.of(role).node.findAll()) {
    if (construct instanceof iam.CfnPolicy && namesRole(context.resolve(construct.roles))) {
      inline.push(context.resolve(construct.policyName));
    } else if (construct instanceof iam.CfnRolePolicy) {
      if (JSON.stringify(context.resolve(construct.roleName)) === roleRef) {
        inline.push(context.resolve(construct.policyName));
      }
    } else if (construct instanceof iam.CfnManagedPolicy && namesRole(context.resolve(construct.roles))) {
      managed.push(context.resolve(construct.ref));
    } else if (construct instanceof iam.CfnInstanceProfile && namesRole(context.resolve(construct.roles))) {
      // Ref of an instance profile is its name.
      profiles.push(context.resolve(construct.ref));
    }
  }
  return {
    [ROLE_NAME]: context.resolve(role.roleName),
    [MANAGED_POLICY_ARNS]: managed,
    [INLINE_POLICY_NAMES]: inline,
    [INSTANCE_PROFILE_NAMES]: profiles,
  };
}

function asList(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}
