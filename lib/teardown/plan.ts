import {
  type CloudFormationClient,
  DescribeStacksCommand,
  GetTemplateCommand,
  ListStackResourcesCommand,
  type StackResourceSummary,
} from '@aws-sdk/client-cloudformation';
import { DescribeInstancesCommand, type EC2Client } from '@aws-sdk/client-ec2';
import type { IAMClient } from '@aws-sdk/client-iam';
import { findRolePolicies, type RolePolicies } from '../aws/role-cleanup/cleanup.ts';
import { STACK_TAG_KEY } from '../aws/tags.ts';
import { INSTANCE_ID, LIVE_STATES } from '../facts/instances.ts';
import { awsCall, type CallContext, explainAwsError, stackNotFound, TeardownError } from './errors.ts';
import {
  type CfnTemplate,
  contextFromStackId,
  type DeclaredPolicies,
  declaredPoliciesByRole,
} from './template.ts';

/** The AWS clients `lab teardown` uses, injected so tests can swap them. */
export interface TeardownClients {
  readonly cloudFormation: CloudFormationClient;
  readonly iam: IAMClient;
  readonly ec2: EC2Client;
}

export interface RolePlan {
  readonly logicalId: string;
  readonly roleName: string;
  /** What is on the role now, split against the stack's declarations; `foreign*` is what gets stripped. */
  readonly policies: RolePolicies;
  readonly declared: DeclaredPolicies;
  /** Why some policies are left alone although they might be foreign. */
  readonly warnings: readonly string[];
}

export interface InstanceRef {
  readonly instanceId: string;
  readonly state: string;
  readonly launchTime?: Date;
}

export interface TeardownPlan {
  readonly stackName: string;
  readonly stackId: string;
  readonly stackStatus: string;
  readonly region: string;
  readonly roles: readonly RolePlan[];
  /** Instances tagged with the stack that no stack resource tracks: terminated with `--yes`. */
  readonly orphans: readonly InstanceRef[];
  /** Instances tagged with the stack that the stack still tracks: left to `cdk destroy`. */
  readonly tracked: readonly InstanceRef[];
}

/** True when the plan strips nothing and terminates nothing. */
export function planIsEmpty(plan: TeardownPlan): boolean {
  return (
    plan.orphans.length === 0 &&
    plan.roles.every((role) => role.policies.foreignManaged.length + role.policies.foreignInline.length === 0)
  );
}

/**
 * Reads the stack (status, resources, template), the policies on each of its roles and the
 * instances tagged with it, and works out what `lab teardown --yes` would do. Reads only.
 */
export async function planTeardown(
  clients: TeardownClients,
  stackName: string,
  region: string,
): Promise<TeardownPlan> {
  const where: CallContext = { stackName, region };
  const described = await awsCall('cloudformation:DescribeStacks', where, () =>
    clients.cloudFormation.send(new DescribeStacksCommand({ StackName: stackName })),
  );
  const stack = described.Stacks?.[0];
  if (!stack?.StackId) throw stackNotFound(where);
  const resources = await listStackResources(clients.cloudFormation, stackName, where);
  const live = resources.filter((resource) => resource.ResourceStatus !== 'DELETE_COMPLETE');
  const physicalIds = new Map<string, string>();
  for (const resource of live) {
    if (resource.LogicalResourceId && resource.PhysicalResourceId) {
      physicalIds.set(resource.LogicalResourceId, resource.PhysicalResourceId);
    }
  }
  const parameters = new Map<string, string>();
  for (const parameter of stack.Parameters ?? []) {
    const value = parameter.ResolvedValue ?? parameter.ParameterValue;
    if (parameter.ParameterKey && value !== undefined) parameters.set(parameter.ParameterKey, value);
  }
  const template = await readTemplate(clients.cloudFormation, stackName, where);
  const declared = declaredPoliciesByRole(
    template,
    contextFromStackId(stack.StackId, stackName, physicalIds, parameters),
  );

  const roles: RolePlan[] = [];
  for (const resource of live) {
    if (resource.ResourceType !== 'AWS::IAM::Role' || !resource.PhysicalResourceId) continue;
    const logicalId = resource.LogicalResourceId ?? resource.PhysicalResourceId;
    const roleName = resource.PhysicalResourceId;
    const declaredHere = declared.get(logicalId) ?? {
      managedPolicyArns: [],
      inlinePolicyNames: [],
      unresolvedManaged: [],
      unresolvedInline: [],
    };
    const found = await findRolePolicies(clients.iam, {
      roleName,
      managedPolicyArns: declaredHere.managedPolicyArns,
      inlinePolicyNames: declaredHere.inlinePolicyNames,
    }).catch((error: unknown) => {
      throw explainAwsError(error, 'iam:ListAttachedRolePolicies', where);
    });
    const warnings: string[] = [];
    let policies = found;
    // A declaration that cannot be resolved might be any attached policy: leave that kind alone.
    if (declaredHere.unresolvedManaged.length > 0 && found.foreignManaged.length > 0) {
      warnings.push(
        `managed policies left alone: cannot resolve the stack's declaration ${declaredHere.unresolvedManaged.join(', ')}`,
      );
      policies = {
        ...policies,
        foreignManaged: [],
        keptManaged: [...found.keptManaged, ...found.foreignManaged],
      };
    }
    if (declaredHere.unresolvedInline.length > 0 && found.foreignInline.length > 0) {
      warnings.push(
        `inline policies left alone: cannot resolve the stack's declaration ${declaredHere.unresolvedInline.join(', ')}`,
      );
      policies = {
        ...policies,
        foreignInline: [],
        keptInline: [...found.keptInline, ...found.foreignInline],
      };
    }
    roles.push({ logicalId, roleName, policies, declared: declaredHere, warnings });
  }

  const trackedIds = new Set(
    live.map((resource) => resource.PhysicalResourceId ?? '').filter((id) => INSTANCE_ID.test(id)),
  );
  const instances = await taggedInstances(clients.ec2, stackName, where);
  return {
    stackName,
    stackId: stack.StackId,
    stackStatus: stack.StackStatus ?? 'UNKNOWN',
    region,
    roles,
    orphans: instances.filter((instance) => !trackedIds.has(instance.instanceId)),
    tracked: instances.filter((instance) => trackedIds.has(instance.instanceId)),
  };
}

async function listStackResources(
  cloudFormation: CloudFormationClient,
  stackName: string,
  where: CallContext,
): Promise<StackResourceSummary[]> {
  const resources: StackResourceSummary[] = [];
  let nextToken: string | undefined;
  do {
    const page = await awsCall('cloudformation:ListStackResources', where, () =>
      cloudFormation.send(new ListStackResourcesCommand({ StackName: stackName, NextToken: nextToken })),
    );
    resources.push(...(page.StackResourceSummaries ?? []));
    nextToken = page.NextToken;
  } while (nextToken);
  return resources;
}

async function readTemplate(
  cloudFormation: CloudFormationClient,
  stackName: string,
  where: CallContext,
): Promise<CfnTemplate> {
  const response = await awsCall('cloudformation:GetTemplate', where, () =>
    cloudFormation.send(new GetTemplateCommand({ StackName: stackName, TemplateStage: 'Original' })),
  );
  try {
    return JSON.parse(response.TemplateBody ?? '{}') as CfnTemplate;
  } catch {
    throw new TeardownError(
      'template',
      `The template of stack ${stackName} is not JSON. lab teardown reads the JSON templates cdk deploy uploads; was this stack deployed by the lab?`,
    );
  }
}

async function taggedInstances(
  ec2: EC2Client,
  stackName: string,
  where: CallContext,
): Promise<InstanceRef[]> {
  const instances: InstanceRef[] = [];
  let nextToken: string | undefined;
  do {
    const page = await awsCall('ec2:DescribeInstances', where, () =>
      ec2.send(
        new DescribeInstancesCommand({
          Filters: [
            { Name: `tag:${STACK_TAG_KEY}`, Values: [stackName] },
            { Name: 'instance-state-name', Values: [...LIVE_STATES] },
          ],
          NextToken: nextToken,
        }),
      ),
    );
    for (const reservation of page.Reservations ?? []) {
      for (const instance of reservation.Instances ?? []) {
        if (!instance.InstanceId) continue;
        instances.push({
          instanceId: instance.InstanceId,
          state: instance.State?.Name ?? 'unknown',
          ...(instance.LaunchTime ? { launchTime: instance.LaunchTime } : {}),
        });
      }
    }
    nextToken = page.NextToken;
  } while (nextToken);
  return instances;
}
