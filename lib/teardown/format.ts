import { STACK_TAG_KEY } from '../aws/tags.ts';
import type { TeardownOutcome } from './execute.ts';
import { planIsEmpty, type TeardownPlan } from './plan.ts';

function count(n: number, singular: string, plural = `${singular}s`): string {
  return `${n} ${n === 1 ? singular : plural}`;
}

/** The plan as the lines `lab teardown` prints. */
export function formatPlan(plan: TeardownPlan): string[] {
  const lines = [`Stack ${plan.stackName} in ${plan.region}: ${plan.stackStatus}`];
  if (plan.roles.length === 0) lines.push('The stack has no IAM role left.');
  for (const role of plan.roles) {
    const { policies } = role;
    if (!policies.roleExists) {
      lines.push(`Role ${role.roleName}: already deleted`);
      continue;
    }
    lines.push(`Role ${role.roleName} (${role.logicalId}):`);
    for (const policy of policies.keptManaged) lines.push(`  keep    managed policy ${policy.arn}`);
    for (const name of policies.keptInline) lines.push(`  keep    inline policy ${name}`);
    for (const policy of policies.foreignManaged) {
      lines.push(`  detach  managed policy ${policy.arn} (not declared by the stack)`);
    }
    for (const name of policies.foreignInline)
      lines.push(`  delete  inline policy ${name} (not declared by the stack)`);
    const total =
      policies.keptManaged.length +
      policies.keptInline.length +
      policies.foreignManaged.length +
      policies.foreignInline.length;
    if (total === 0) lines.push('  (no policies)');
    for (const warning of role.warnings) lines.push(`  warning: ${warning}`);
  }
  const instances = [...plan.orphans, ...plan.tracked];
  if (instances.length === 0) {
    lines.push(`Instances tagged ${STACK_TAG_KEY}=${plan.stackName}: none running`);
  } else {
    lines.push(`Instances tagged ${STACK_TAG_KEY}=${plan.stackName}:`);
    for (const instance of plan.orphans) {
      const launched = instance.launchTime ? `, launched ${instance.launchTime.toISOString()}` : '';
      lines.push(
        `  terminate ${instance.instanceId} (${instance.state}${launched}): not tracked by the stack`,
      );
    }
    for (const instance of plan.tracked) {
      lines.push(
        `  keep      ${instance.instanceId} (${instance.state}): tracked by the stack, cdk destroy terminates it`,
      );
    }
  }
  return lines;
}

/** One line: what `--yes` does, or that there is nothing to do. */
export function summarizePlan(plan: TeardownPlan): string {
  if (planIsEmpty(plan)) {
    const advice = plan.stackStatus.startsWith('DELETE_FAILED')
      ? ` If cdk destroy still fails, the cause is elsewhere: aws cloudformation describe-stack-events --stack-name ${plan.stackName} --region ${plan.region}`
      : '';
    return `Nothing to do: the stack's roles carry only the policies the stack declared, and no instance tagged with the stack is untracked.${advice}`;
  }
  const managed = plan.roles.reduce((sum, role) => sum + role.policies.foreignManaged.length, 0);
  const inline = plan.roles.reduce((sum, role) => sum + role.policies.foreignInline.length, 0);
  const roles = plan.roles.filter(
    (role) => role.policies.foreignManaged.length + role.policies.foreignInline.length > 0,
  ).length;
  const parts = [];
  if (managed + inline > 0) {
    parts.push(
      `detach ${count(managed, 'managed policy', 'managed policies')} and delete ${count(inline, 'inline policy', 'inline policies')} on ${count(roles, 'role')}`,
    );
  }
  if (plan.orphans.length > 0) parts.push(`terminate ${count(plan.orphans.length, 'orphan instance')}`);
  return `Plan: ${parts.join('; ')}.`;
}

/** The closing lines after `--yes`. */
export function formatOutcome(plan: TeardownPlan, outcome: TeardownOutcome): string {
  const gone =
    outcome.alreadyGone > 0 ? ` (${count(outcome.alreadyGone, 'policy', 'policies')} had already gone)` : '';
  return `Done: removed ${count(outcome.removed, 'policy', 'policies')}${gone}, terminated ${count(outcome.terminated.length, 'instance')}. Now run cdk destroy again: npx cdk destroy ${plan.stackName}`;
}
