import {
  type CloudFormationClient,
  DescribeStackResourceCommand,
  DescribeStacksCommand,
} from '@aws-sdk/client-cloudformation';

/**
 * Whether a launch request still stands: CloudFormation cannot stop a custom resource's handler.
 * When a sibling resource fails, it marks the in-flight launch "Resource creation cancelled",
 * rolls back and sends a Delete with a physical id it generated itself
 * (aws-cloudformation/cloudformation-coverage-roadmap#1814), while the cancelled launch's handler
 * and the Provider framework's waiter go on. So every launch asks the stack first, and again right
 * after RunInstances, and the waiter asks on every poll.
 */

/** What CloudFormation says about the stack and the launching resource. */
export interface Standing {
  readonly stackStatus: string;
  /** Absent when the stack has no such resource (any more). */
  readonly resourceStatus?: string;
  /** When the resource's status last changed (ISO 8601): a new operation on it changes this. */
  readonly resourceSince?: string;
  /** The physical id the stack records for the resource. */
  readonly physicalId?: string;
}

/** The stack a request belongs to, as the request names it. */
export interface StackRef {
  readonly stackId: string;
  readonly logicalResourceId: string;
}

/** DescribeStackResource's answer for a resource the stack does not have. */
function isMissingResource(err: unknown): boolean {
  const { name, message } = (err ?? {}) as { name?: string; message?: string };
  return name === 'ValidationError' && /does not exist/i.test(message ?? '');
}

/** Reads the stack's status and the resource's (both answers are strongly tied to the stack id). */
export async function readStanding(cfn: CloudFormationClient, ref: StackRef): Promise<Standing> {
  const stacks = await cfn.send(new DescribeStacksCommand({ StackName: ref.stackId }));
  const stackStatus = stacks.Stacks?.[0]?.StackStatus;
  if (stackStatus === undefined) throw new Error(`CapacityLaunch: stack ${ref.stackId} has no status`);
  try {
    const answer = await cfn.send(
      new DescribeStackResourceCommand({ StackName: ref.stackId, LogicalResourceId: ref.logicalResourceId }),
    );
    const detail = answer.StackResourceDetail;
    return {
      stackStatus,
      resourceStatus: detail?.ResourceStatus,
      resourceSince: detail?.LastUpdatedTimestamp?.toISOString(),
      physicalId: detail?.PhysicalResourceId,
    };
  } catch (err) {
    if (isMissingResource(err)) return { stackStatus };
    throw err;
  }
}

/** Stack statuses in which CloudFormation undoes a failed operation. */
const ROLLBACK = /ROLLBACK_IN_PROGRESS$|ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS$/;

/** The stack statuses in which each request type may launch a host. */
const LAUNCHING_STACK: Record<'Create' | 'Update', readonly string[]> = {
  // A resource added by an update is created while the stack is UPDATE_IN_PROGRESS.
  Create: ['CREATE_IN_PROGRESS', 'UPDATE_IN_PROGRESS'],
  Update: ['UPDATE_IN_PROGRESS'],
};

export type LaunchVerdict =
  | { readonly launch: true }
  | {
      readonly launch: false;
      /** The stack is undoing a failed deploy: a rollback request completes without a host. */
      readonly rollingBack: boolean;
      readonly why: string;
    };

/**
 * Whether a request may launch now: the stack is creating or updating (not rolling back, not
 * deleting), the resource is in progress for this request type, and, when `mark` is given (the
 * resource's status time when the request began), no newer operation on the resource has begun.
 */
export function launchVerdict(
  requestType: 'Create' | 'Update',
  standing: Standing,
  mark?: string,
): LaunchVerdict {
  const { stackStatus, resourceStatus, resourceSince } = standing;
  if (ROLLBACK.test(stackStatus)) {
    return {
      launch: false,
      rollingBack: true,
      why: `the stack is ${stackStatus}: a failed deploy launches nothing (deploy again to get a host)`,
    };
  }
  if (!LAUNCHING_STACK[requestType].includes(stackStatus)) {
    return { launch: false, rollingBack: false, why: `the stack is ${stackStatus}, not launching` };
  }
  const expected = `${requestType.toUpperCase()}_IN_PROGRESS`;
  if (resourceStatus !== expected) {
    return {
      launch: false,
      rollingBack: false,
      why: `the resource is ${resourceStatus ?? 'gone from the stack'}, not ${expected}: CloudFormation cancelled this request`,
    };
  }
  if (mark !== undefined && resourceSince !== mark) {
    return {
      launch: false,
      rollingBack: false,
      why: `a newer operation on the resource began at ${resourceSince} (this request began at ${mark})`,
    };
  }
  return { launch: true };
}

/**
 * Stack statuses in which a Delete removes an old physical id of a resource the stack keeps
 * (after a replacement, or after a rollback): the id the stack records then stays.
 */
export function keepsResource(stackStatus: string): boolean {
  return stackStatus.endsWith('_CLEANUP_IN_PROGRESS');
}
