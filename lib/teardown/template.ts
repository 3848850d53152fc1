/**
 * Reads, from a deployed stack's template, which policies the stack itself declares on each of
 * its roles: the allow-list `lab teardown` strips against. Handles the forms CDK emits
 * (`Fn::Join` with `AWS::Partition`, `Ref` to a managed policy, `Fn::Sub`) and says which
 * declarations it could not resolve, so the caller can stay away from them rather than guess.
 */

/** What resolving template expressions needs to know about the deployed stack. */
export interface TemplateContext {
  readonly partition: string;
  readonly region: string;
  readonly accountId: string;
  readonly stackName: string;
  readonly stackId: string;
  /** Logical id to physical id (role name, managed policy ARN, ...) from the stack's resources. */
  readonly physicalIds: ReadonlyMap<string, string>;
  /** Parameter values of the deployed stack. */
  readonly parameters: ReadonlyMap<string, string>;
}

/** The policies a template declares on one role, resolved to what IAM lists. */
export interface DeclaredPolicies {
  readonly managedPolicyArns: readonly string[];
  readonly inlinePolicyNames: readonly string[];
  /** Declarations that could not be resolved (JSON of the expression). */
  readonly unresolvedManaged: readonly string[];
  readonly unresolvedInline: readonly string[];
}

interface TemplateResource {
  readonly Type?: unknown;
  readonly Properties?: Record<string, unknown>;
}

/** The parts of a CloudFormation template read here. */
export interface CfnTemplate {
  readonly Resources?: Record<string, TemplateResource>;
}

/** Splits a stack ARN into partition, region and account, for the pseudo parameters. */
export function contextFromStackId(
  stackId: string,
  stackName: string,
  physicalIds: ReadonlyMap<string, string>,
  parameters: ReadonlyMap<string, string>,
): TemplateContext {
  const [, partition = 'aws', , region = '', accountId = ''] = stackId.split(':');
  return { partition, region, accountId, stackName, stackId, physicalIds, parameters };
}

function urlSuffix(partition: string): string {
  return partition === 'aws-cn' ? 'amazonaws.com.cn' : 'amazonaws.com';
}

function pseudoParameter(name: string, context: TemplateContext): string | undefined {
  switch (name) {
    case 'AWS::Partition':
      return context.partition;
    case 'AWS::Region':
      return context.region;
    case 'AWS::AccountId':
      return context.accountId;
    case 'AWS::URLSuffix':
      return urlSuffix(context.partition);
    case 'AWS::StackName':
      return context.stackName;
    case 'AWS::StackId':
      return context.stackId;
    default:
      return undefined;
  }
}

function resolveName(name: string, context: TemplateContext): string | undefined {
  return pseudoParameter(name, context) ?? context.parameters.get(name) ?? context.physicalIds.get(name);
}

/** Resolves a template expression to a string, or `undefined` when it cannot be known here. */
export function resolveString(value: unknown, context: TemplateContext): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const entries = Object.entries(value);
  if (entries.length !== 1) return undefined;
  const [[fn, arg]] = entries as [[string, unknown]];
  switch (fn) {
    case 'Ref':
      return typeof arg === 'string' ? resolveName(arg, context) : undefined;
    case 'Fn::Join': {
      if (!Array.isArray(arg) || typeof arg[0] !== 'string' || !Array.isArray(arg[1])) return undefined;
      const parts = (arg[1] as unknown[]).map((part) => resolveString(part, context));
      return parts.every((part) => part !== undefined) ? parts.join(arg[0]) : undefined;
    }
    case 'Fn::Sub': {
      const [text, variables] = Array.isArray(arg) ? arg : [arg, {}];
      if (typeof text !== 'string' || typeof variables !== 'object' || variables === null) return undefined;
      let unresolved = false;
      const result = text.replace(/\$\{(!?)([^}]*)\}/g, (whole, literal: string, name: string) => {
        if (literal) return `\${${name}}`;
        const own = (variables as Record<string, unknown>)[name];
        const resolved = own !== undefined ? resolveString(own, context) : resolveName(name, context);
        if (resolved === undefined) unresolved = true;
        return resolved ?? whole;
      });
      return unresolved ? undefined : result;
    }
    case 'Fn::GetAtt': {
      // A managed policy's ARN is also its physical id; other attributes are not known here.
      const [logicalId, attribute] = Array.isArray(arg) ? arg : typeof arg === 'string' ? arg.split('.') : [];
      return attribute === 'PolicyArn' && typeof logicalId === 'string'
        ? context.physicalIds.get(logicalId)
        : undefined;
    }
    default:
      return undefined;
  }
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/**
 * The policies the template declares on each `AWS::IAM::Role` (keyed by logical id): the role's
 * `ManagedPolicyArns` and `Policies`, plus every `AWS::IAM::Policy`, `AWS::IAM::RolePolicy` and
 * `AWS::IAM::ManagedPolicy` of the template attached to it (CDK's default policies are
 * `AWS::IAM::Policy` resources, which IAM stores as inline policies of the role).
 */
export function declaredPoliciesByRole(
  template: CfnTemplate,
  context: TemplateContext,
): Map<string, DeclaredPolicies> {
  const resources = Object.entries(template.Resources ?? {});
  const result = new Map<string, DeclaredPolicies>();
  for (const [logicalId, resource] of resources) {
    if (resource.Type !== 'AWS::IAM::Role') continue;
    const roleName = context.physicalIds.get(logicalId);
    const isThisRole = (reference: unknown) => {
      const name = resolveString(reference, context);
      return name !== undefined && name === roleName;
    };
    const managed: unknown[] = [...list(resource.Properties?.ManagedPolicyArns)];
    const inline: unknown[] = list(resource.Properties?.Policies).map(
      (policy) => (policy as { PolicyName?: unknown } | null)?.PolicyName,
    );
    for (const [otherId, other] of resources) {
      const properties = other.Properties ?? {};
      if (other.Type === 'AWS::IAM::Policy' && list(properties.Roles).some(isThisRole)) {
        inline.push(properties.PolicyName);
      } else if (other.Type === 'AWS::IAM::RolePolicy' && isThisRole(properties.RoleName)) {
        inline.push(properties.PolicyName);
      } else if (other.Type === 'AWS::IAM::ManagedPolicy' && list(properties.Roles).some(isThisRole)) {
        managed.push({ Ref: otherId });
      }
    }
    const resolve = (values: unknown[]) => {
      const resolved: string[] = [];
      const unresolved: string[] = [];
      for (const value of values) {
        const text = resolveString(value, context);
        if (text === undefined) unresolved.push(JSON.stringify(value));
        else resolved.push(text);
      }
      return { resolved, unresolved };
    };
    const managedPolicies = resolve(managed);
    const inlinePolicies = resolve(inline);
    result.set(logicalId, {
      managedPolicyArns: managedPolicies.resolved,
      inlinePolicyNames: inlinePolicies.resolved,
      unresolvedManaged: managedPolicies.unresolved,
      unresolvedInline: inlinePolicies.unresolved,
    });
  }
  return result;
}
