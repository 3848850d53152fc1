import { type EvaluationResult, GetRoleCommand, SimulatePrincipalPolicyCommand } from '@aws-sdk/client-iam';
import { awsErrorName } from '../aws-cli/errors.ts';
import type { BootstrapRequirement } from './bootstrap.ts';
import { notChecked } from './errors.ts';
import { type CallerContext, type DoctorClients, type DoctorLine, lineOf } from './model.ts';

/**
 * The permission lines, checked without side effects by IAM policy simulation
 * (iam:SimulatePrincipalPolicy): the caller may assume the bootstrap's deploy and file-publishing
 * roles (what `cdk deploy` does with a modern bootstrap), and the bootstrap's CloudFormation
 * execution role may make the kinds of resource the lab's stack holds. The simulation evaluates the
 * principal's identity policies (and its permissions boundary); a session policy or a
 * resource policy elsewhere can still deny, so a pass is strong evidence, not proof.
 */

const line = lineOf('permissions');

/** What the execution role makes for the lab (lib/aws: network, bucket, roles, launch Lambdas, template, secret). */
export const EXECUTION_ACTIONS = [
  'ec2:CreateVpc',
  'ec2:CreateSubnet',
  'ec2:CreateInternetGateway',
  'ec2:CreateRouteTable',
  'ec2:CreateSecurityGroup',
  'ec2:CreateFlowLogs',
  'ec2:CreateLaunchTemplate',
  'logs:CreateLogGroup',
  's3:CreateBucket',
  's3:PutBucketPolicy',
  'iam:CreateRole',
  'iam:PutRolePolicy',
  'iam:AttachRolePolicy',
  'iam:PassRole',
  'lambda:CreateFunction',
  'lambda:InvokeFunction',
  'secretsmanager:CreateSecret',
  'ssm:GetParameters',
] as const;

/** The bootstrap's role ARNs (aws-cdk-lib DefaultStackSynthesizer's DEFAULT_*_ROLE_ARN patterns). */
export function bootstrapRoleArn(
  kind: 'deploy-role' | 'file-publishing-role' | 'cfn-exec-role',
  requirement: Pick<BootstrapRequirement, 'qualifier'>,
  caller: CallerContext,
): string {
  return `arn:${caller.partition}:iam::${caller.account}:role/cdk-${requirement.qualifier}-${kind}-${caller.account}-${caller.region}`;
}

/** What the caller's ARN is as a policy source: an IAM user or role, root, or not simulable. */
export type PrincipalSource =
  | { readonly kind: 'arn'; readonly arn: string }
  | { readonly kind: 'role-name'; readonly roleName: string }
  | { readonly kind: 'root' }
  | { readonly kind: 'other'; readonly why: string };

/** Pure: an STS caller ARN to the IAM entity whose policies apply. */
export function principalSource(callerArn: string): PrincipalSource {
  if (/^arn:[^:]+:iam::\d+:root$/.test(callerArn)) return { kind: 'root' };
  if (/^arn:[^:]+:iam::\d+:user\//.test(callerArn)) return { kind: 'arn', arn: callerArn };
  const assumed = /^arn:[^:]+:sts::\d+:assumed-role\/([^/]+)\//.exec(callerArn);
  // An assumed-role ARN has no role path: the role's own ARN comes from iam:GetRole.
  if (assumed?.[1]) return { kind: 'role-name', roleName: assumed[1] };
  return { kind: 'other', why: `${callerArn} is neither an IAM user nor an assumed role` };
}

/** Actions (with their resources) that the results do not allow. */
export function deniedOf(results: readonly EvaluationResult[]): string[] {
  const denied: string[] = [];
  for (const result of results) {
    const perResource = result.ResourceSpecificResults ?? [];
    if (perResource.length > 0) {
      for (const r of perResource) {
        if (r.EvalResourceDecision !== 'allowed')
          denied.push(`${result.EvalActionName} on ${r.EvalResourceName} (${r.EvalResourceDecision})`);
      }
    } else if (result.EvalDecision !== 'allowed') {
      const on =
        result.EvalResourceName && result.EvalResourceName !== '*' ? ` on ${result.EvalResourceName}` : '';
      denied.push(`${result.EvalActionName}${on} (${result.EvalDecision})`);
    }
  }
  return denied;
}

async function simulate(
  clients: DoctorClients,
  source: string,
  actions: readonly string[],
  resources?: readonly string[],
): Promise<EvaluationResult[]> {
  const results: EvaluationResult[] = [];
  let Marker: string | undefined;
  do {
    const page = await clients.iam.send(
      new SimulatePrincipalPolicyCommand({
        PolicySourceArn: source,
        ActionNames: [...actions],
        ...(resources ? { ResourceArns: [...resources] } : {}),
        ...(Marker ? { Marker } : {}),
      }),
    );
    results.push(...(page.EvaluationResults ?? []));
    Marker = page.IsTruncated ? page.Marker : undefined;
  } while (Marker);
  return results;
}

/** The caller's line: may it assume the deploy and file-publishing roles? */
async function callerLine(
  clients: DoctorClients,
  requirement: BootstrapRequirement,
  caller: CallerContext,
): Promise<DoctorLine> {
  const roles = [
    bootstrapRoleArn('deploy-role', requirement, caller),
    bootstrapRoleArn('file-publishing-role', requirement, caller),
  ];
  const subject = 'caller: sts:AssumeRole on the CDK deploy and file-publishing roles';
  const source = principalSource(caller.arn);
  if (source.kind === 'root') return line('pass', subject, 'the root user is not limited by IAM policies');
  if (source.kind === 'other') {
    return line(
      'warn',
      subject,
      `not checked: ${source.why}`,
      `make sure the caller may sts:AssumeRole ${roles.join(' and ')}`,
    );
  }
  let arn: string;
  if (source.kind === 'arn') arn = source.arn;
  else {
    try {
      const got = await clients.iam.send(new GetRoleCommand({ RoleName: source.roleName }));
      arn = got.Role?.Arn ?? `arn:${caller.partition}:iam::${caller.account}:role/${source.roleName}`;
    } catch (error) {
      return notChecked('permissions', subject, 'iam:GetRole', error);
    }
  }
  try {
    const denied = deniedOf(await simulate(clients, arn, ['sts:AssumeRole'], roles));
    if (denied.length === 0) return line('pass', subject, `${arn} may assume both`);
    return line(
      'fail',
      subject,
      `${arn} may not: ${denied.join('; ')}`,
      `allow sts:AssumeRole on ${roles.join(' and ')} to the caller (or deploy with credentials that have it)`,
    );
  } catch (error) {
    return notChecked('permissions', subject, 'iam:SimulatePrincipalPolicy', error);
  }
}

/** The execution role's line: may it make the stack's kinds of resource? */
async function executionLine(
  clients: DoctorClients,
  requirement: BootstrapRequirement,
  caller: CallerContext,
): Promise<DoctorLine> {
  const role = bootstrapRoleArn('cfn-exec-role', requirement, caller);
  const subject = `CloudFormation execution role cdk-${requirement.qualifier}-cfn-exec-role: ${EXECUTION_ACTIONS.length} actions the stack's resources need`;
  try {
    const denied = deniedOf(await simulate(clients, role, EXECUTION_ACTIONS));
    if (denied.length === 0) return line('pass', subject, 'all allowed');
    return line(
      'fail',
      subject,
      `not allowed: ${denied.join('; ')}`,
      `re-bootstrap with execution policies that allow them (cdk bootstrap --cloudformation-execution-policies; the default is AdministratorAccess)`,
    );
  } catch (error) {
    if (awsErrorName(error) === 'NoSuchEntityException' || awsErrorName(error) === 'NoSuchEntity') {
      return line(
        'warn',
        subject,
        `not checked: ${role} does not exist (see the bootstrap line)`,
        'bootstrap the account first',
      );
    }
    return notChecked('permissions', subject, 'iam:SimulatePrincipalPolicy', error);
  }
}

/** Both permission lines. Reads only. */
export async function checkPermissions(
  clients: DoctorClients,
  requirement: BootstrapRequirement,
  caller: CallerContext,
): Promise<DoctorLine[]> {
  return [await callerLine(clients, requirement, caller), await executionLine(clients, requirement, caller)];
}
