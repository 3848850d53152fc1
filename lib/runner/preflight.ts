import type { ResourceRef } from './ports.ts';

/**
 * What an arm's preflight checks besides one request through its front end (docs/facts.md §4.2,
 * issue 10 item 10): the status conditions of the Gateway API objects on the arm's path. Pure:
 * the runner reads the status through the Cluster port, these functions judge it.
 */

/** A namespaced object whose status conditions must be True before the arm's first run. */
export interface StatusCheck extends ResourceRef {
  /** The object's kind, for messages (`HTTPRoute`, `Gateway`). */
  readonly kind: string;
  /** Condition types that must have status "True". */
  readonly conditions: readonly string[];
  /**
   * Where the conditions live: `status.conditions` (a Gateway), or per parent in
   * `status.parents[].conditions` (a route: one entry per Gateway that took it).
   */
  readonly at: 'status' | 'parents';
}

/** The status checks of each arm, by arm id (written by charts/study-runner.ts). */
export type StatusChecks = Readonly<Record<string, readonly StatusCheck[]>>;

interface Condition {
  readonly type?: unknown;
  readonly status?: unknown;
  readonly reason?: unknown;
  readonly message?: unknown;
}

function conditionsOf(value: unknown): Condition[] {
  return Array.isArray(value) ? value.filter((c): c is Condition => !!c && typeof c === 'object') : [];
}

/** The problems of one condition list against the required types, naming the object. */
function conditionProblems(
  who: string,
  conditions: readonly Condition[],
  required: readonly string[],
): string[] {
  return required.flatMap((type) => {
    const found = conditions.find((c) => c.type === type);
    if (!found) return [`${who}: has no ${type} condition yet`];
    if (found.status === 'True') return [];
    const why = [found.reason, found.message].filter((x) => typeof x === 'string' && x !== '').join(': ');
    return [`${who}: ${type} is ${String(found.status)}${why ? ` (${why})` : ''}`];
  });
}

/**
 * Why an object's status fails its check; empty when every required condition is True. A route
 * must be taken by at least one parent and be Accepted and ResolvedRefs there: Accepted alone
 * proves nothing (docs/facts.md §3.6, the manual lab's `ResolvedRefs=False reason=InvalidKind`).
 */
export function statusProblems(
  check: StatusCheck,
  status: Readonly<Record<string, unknown>> | undefined,
): string[] {
  const who = `${check.kind} ${check.namespace}/${check.name}`;
  if (status === undefined) return [`${who} does not exist`];
  if (check.at === 'status') return conditionProblems(who, conditionsOf(status.conditions), check.conditions);
  const parents = Array.isArray(status.parents) ? (status.parents as Record<string, unknown>[]) : [];
  if (parents.length === 0) return [`${who}: no Gateway has taken it yet (status.parents is empty)`];
  return parents.flatMap((parent) => {
    const ref = (parent?.parentRef ?? {}) as { name?: unknown };
    const via = typeof ref.name === 'string' ? `${who} on Gateway ${ref.name}` : who;
    return conditionProblems(via, conditionsOf(parent?.conditions), check.conditions);
  });
}
