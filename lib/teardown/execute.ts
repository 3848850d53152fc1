import { DescribeInstancesCommand, TerminateInstancesCommand } from '@aws-sdk/client-ec2';
import { type Removal, stripForeignPolicies } from '../aws/role-cleanup/cleanup.ts';
import { isInstanceGone } from '../facts/instances.ts';
import { awsCall, type CallContext, explainAwsError, TeardownError } from './errors.ts';
import type { TeardownClients, TeardownPlan } from './plan.ts';

export interface TeardownOutcome {
  /** Policies detached or deleted. */
  readonly removed: number;
  /** Planned policies that had already gone. */
  readonly alreadyGone: number;
  readonly terminated: readonly string[];
}

export interface ExecuteOptions {
  /** How long to wait for terminated instances to reach `terminated`; default 10 minutes. */
  readonly waitMs?: number;
  /** Time between checks; default 10 seconds. */
  readonly pollMs?: number;
  readonly sleep?: (ms: number) => Promise<void>;
}

/**
 * Does exactly what the plan lists: detaches and deletes each foreign policy (not-found counts as
 * done), terminates each orphan instance, then waits until the orphans are terminated so that
 * `cdk destroy` can delete the security group and instance profile they used.
 */
export async function executeTeardown(
  clients: TeardownClients,
  plan: TeardownPlan,
  report: (line: string) => void,
  options: ExecuteOptions = {},
): Promise<TeardownOutcome> {
  const where: CallContext = { stackName: plan.stackName, region: plan.region };
  let removed = 0;
  let alreadyGone = 0;
  const onRemoval = (removal: Removal) => {
    const what = removal.kind === 'managed' ? 'managed policy' : 'inline policy';
    const verb = removal.kind === 'managed' ? 'detached' : 'deleted';
    if (removal.outcome === 'removed') {
      removed += 1;
      report(`${verb} ${what} ${removal.policy} from role ${removal.roleName}`);
    } else {
      alreadyGone += 1;
      report(`${what} ${removal.policy} was already gone from role ${removal.roleName}`);
    }
  };
  for (const role of plan.roles) {
    if (role.policies.foreignManaged.length + role.policies.foreignInline.length === 0) continue;
    await stripForeignPolicies(clients.iam, role.policies, onRemoval).catch((error: unknown) => {
      throw explainAwsError(error, 'iam:DetachRolePolicy', where);
    });
  }

  const terminated: string[] = [];
  for (const orphan of plan.orphans) {
    try {
      await clients.ec2.send(new TerminateInstancesCommand({ InstanceIds: [orphan.instanceId] }));
      terminated.push(orphan.instanceId);
      report(`terminating instance ${orphan.instanceId}`);
    } catch (error) {
      if (!isInstanceGone(error)) {
        throw explainAwsError(
          error,
          'ec2:TerminateInstances',
          where,
          `ec2:TerminateInstances failed on instance ${orphan.instanceId}: ${String((error as Error).name)}: ${(error as Error).message}`,
        );
      }
      report(`instance ${orphan.instanceId} was already gone`);
    }
  }
  if (terminated.length > 0) await waitUntilTerminated(clients, terminated, where, report, options);
  return { removed, alreadyGone, terminated };
}

async function waitUntilTerminated(
  clients: TeardownClients,
  instanceIds: readonly string[],
  where: CallContext,
  report: (line: string) => void,
  options: ExecuteOptions,
): Promise<void> {
  const waitMs = options.waitMs ?? 10 * 60_000;
  const pollMs = options.pollMs ?? 10_000;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  let waited = 0;
  for (;;) {
    const response = await awsCall('ec2:DescribeInstances', where, () =>
      clients.ec2.send(new DescribeInstancesCommand({ InstanceIds: [...instanceIds] })),
    ).catch((error: unknown) => {
      // Terminated instances drop out of DescribeInstances after a while; gone is terminated.
      if (isInstanceGone((error as TeardownError).cause)) return { Reservations: [] };
      throw error;
    });
    const pending = (response.Reservations ?? [])
      .flatMap((reservation) => reservation.Instances ?? [])
      .filter((instance) => instance.State?.Name !== 'terminated')
      .map((instance) => `${instance.InstanceId} (${instance.State?.Name ?? 'unknown'})`);
    if (pending.length === 0) {
      report(`terminated: ${instanceIds.join(', ')}`);
      return;
    }
    if (waited >= waitMs) {
      throw new TeardownError(
        'aws',
        `Instances not terminated after ${Math.round(waitMs / 60_000)} minutes: ${pending.join(', ')}. Wait until they are, then run cdk destroy again.`,
      );
    }
    await sleep(pollMs);
    waited += pollMs;
  }
}
