import {
  DeleteRolePolicyCommand,
  DetachRolePolicyCommand,
  type IAMClient,
  ListAttachedRolePoliciesCommand,
  ListInstanceProfilesForRoleCommand,
  ListRolePoliciesCommand,
  RemoveRoleFromInstanceProfileCommand,
} from '@aws-sdk/client-iam';

/**
 * Strips from an IAM role the policies its stack did not declare: what Systems Manager Quick Setup
 * (and anything else) attached after the stack created the role, so that CloudFormation's
 * `DeleteRole` does not fail with `DeleteConflict`. Pure logic: the IAM client is a parameter.
 * Shared by the `RoleCleanup` handler (stack delete) and `lab teardown` (recovery).
 */

/** What the stack itself declared on one role; everything else on the role is foreign. */
export interface RoleAllowList {
  readonly roleName: string;
  /** ARNs of the managed policies the stack attaches (exact ARNs, partition resolved). */
  readonly managedPolicyArns: readonly string[];
  /** Names of the inline policies the stack puts on the role (`Policies` and `AWS::IAM::Policy`). */
  readonly inlinePolicyNames: readonly string[];
}

export interface ManagedPolicyRef {
  readonly arn: string;
  readonly name: string;
}

/** The policies found on a role, split into the stack's own and the foreign ones. */
export interface RolePolicies {
  readonly roleName: string;
  /** False when IAM says the role does not exist (already deleted): nothing to strip. */
  readonly roleExists: boolean;
  readonly foreignManaged: readonly ManagedPolicyRef[];
  readonly foreignInline: readonly string[];
  readonly keptManaged: readonly ManagedPolicyRef[];
  readonly keptInline: readonly string[];
}

/** What a cleanup did to one role. */
export interface RoleCleanupResult {
  readonly roleName: string;
  readonly roleExists: boolean;
  /** ARNs of the managed policies detached. */
  readonly detached: readonly string[];
  /** Names of the inline policies deleted. */
  readonly deleted: readonly string[];
  /** Policies that were listed but had gone by the time they were removed (not an error). */
  readonly alreadyGone: readonly string[];
}

/** One removal, reported as it happens (for logs and the CLI's progress lines). */
export interface Removal {
  readonly roleName: string;
  readonly kind: 'managed' | 'inline';
  /** ARN for a managed policy, name for an inline policy. */
  readonly policy: string;
  readonly outcome: 'removed' | 'already-gone';
}

/** How a `RoleCleanupError` about an instance profile (not a policy) names it. */
const INSTANCE_PROFILE_SUBJECT = 'instance profile ';

/** An IAM call failed with something other than not-found; names the role and the policy. */
export class RoleCleanupError extends Error {
  override readonly name = 'RoleCleanupError';
  constructor(
    /** The IAM action, e.g. `iam:DetachRolePolicy`: what the caller needs permission for. */
    readonly action: string,
    readonly roleName: string,
    /** The policy (ARN or inline name) the call was about, when it was about one. */
    readonly policy: string | undefined,
    override readonly cause: unknown,
  ) {
    const subject = policy?.startsWith(INSTANCE_PROFILE_SUBJECT) ? policy : `policy ${policy}`;
    const what = policy === undefined ? `role ${roleName}` : `role ${roleName}, ${subject}`;
    super(`${action} failed on ${what}: ${errorText(cause)}`);
  }
}

/** IAM's not-found, as the SDK raises it (`NoSuchEntityException`) or as an unmodelled code (`NoSuchEntity`). */
export function isNoSuchEntity(error: unknown): boolean {
  const name = (error as { name?: unknown } | null)?.name;
  return name === 'NoSuchEntityException' || name === 'NoSuchEntity';
}

function errorText(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

/** Lists a role's managed and inline policies (every page) and splits them against the allow-list. */
export async function findRolePolicies(iam: IAMClient, allow: RoleAllowList): Promise<RolePolicies> {
  const { roleName } = allow;
  const gone: RolePolicies = {
    roleName,
    roleExists: false,
    foreignManaged: [],
    foreignInline: [],
    keptManaged: [],
    keptInline: [],
  };
  const managed: ManagedPolicyRef[] = [];
  const inline: string[] = [];
  try {
    let marker: string | undefined;
    do {
      const page = await iam.send(
        new ListAttachedRolePoliciesCommand({ RoleName: roleName, Marker: marker }),
      );
      for (const policy of page.AttachedPolicies ?? []) {
        if (policy.PolicyArn)
          managed.push({ arn: policy.PolicyArn, name: policy.PolicyName ?? policy.PolicyArn });
      }
      marker = page.IsTruncated ? page.Marker : undefined;
    } while (marker);
  } catch (error) {
    if (isNoSuchEntity(error)) return gone;
    throw new RoleCleanupError('iam:ListAttachedRolePolicies', roleName, undefined, error);
  }
  try {
    let marker: string | undefined;
    do {
      const page = await iam.send(new ListRolePoliciesCommand({ RoleName: roleName, Marker: marker }));
      inline.push(...(page.PolicyNames ?? []));
      marker = page.IsTruncated ? page.Marker : undefined;
    } while (marker);
  } catch (error) {
    if (isNoSuchEntity(error)) return gone;
    throw new RoleCleanupError('iam:ListRolePolicies', roleName, undefined, error);
  }
  const allowedArns = new Set(allow.managedPolicyArns);
  const allowedNames = new Set(allow.inlinePolicyNames);
  return {
    roleName,
    roleExists: true,
    foreignManaged: managed.filter((policy) => !allowedArns.has(policy.arn)),
    foreignInline: inline.filter((name) => !allowedNames.has(name)),
    keptManaged: managed.filter((policy) => allowedArns.has(policy.arn)),
    keptInline: inline.filter((name) => allowedNames.has(name)),
  };
}

/**
 * Detaches the foreign managed policies and deletes the foreign inline policies found by
 * `findRolePolicies`, and nothing else. Not-found (the policy or the role went away meanwhile) is
 * success; any other error stops with a `RoleCleanupError` naming the role and the policy.
 */
export async function stripForeignPolicies(
  iam: IAMClient,
  found: RolePolicies,
  onRemoval: (removal: Removal) => void = () => {},
): Promise<RoleCleanupResult> {
  const { roleName } = found;
  const detached: string[] = [];
  const deleted: string[] = [];
  const alreadyGone: string[] = [];
  for (const policy of found.foreignManaged) {
    try {
      await iam.send(new DetachRolePolicyCommand({ RoleName: roleName, PolicyArn: policy.arn }));
      detached.push(policy.arn);
      onRemoval({ roleName, kind: 'managed', policy: policy.arn, outcome: 'removed' });
    } catch (error) {
      if (!isNoSuchEntity(error))
        throw new RoleCleanupError('iam:DetachRolePolicy', roleName, policy.arn, error);
      alreadyGone.push(policy.arn);
      onRemoval({ roleName, kind: 'managed', policy: policy.arn, outcome: 'already-gone' });
    }
  }
  for (const name of found.foreignInline) {
    try {
      await iam.send(new DeleteRolePolicyCommand({ RoleName: roleName, PolicyName: name }));
      deleted.push(name);
      onRemoval({ roleName, kind: 'inline', policy: name, outcome: 'removed' });
    } catch (error) {
      if (!isNoSuchEntity(error)) throw new RoleCleanupError('iam:DeleteRolePolicy', roleName, name, error);
      alreadyGone.push(name);
      onRemoval({ roleName, kind: 'inline', policy: name, outcome: 'already-gone' });
    }
  }
  return { roleName, roleExists: found.roleExists, detached, deleted, alreadyGone };
}

/** Lists and strips in one go: what the custom resource does on stack delete. */
export async function cleanupRole(
  iam: IAMClient,
  allow: RoleAllowList,
  onRemoval?: (removal: Removal) => void,
): Promise<RoleCleanupResult> {
  return stripForeignPolicies(iam, await findRolePolicies(iam, allow), onRemoval);
}

/** What removing a role from the instance profiles the stack did not create did. */
export interface InstanceProfileCleanupResult {
  readonly roleName: string;
  /** Names of the foreign instance profiles the role was removed from. */
  readonly removedFrom: readonly string[];
  /** The stack's own instance profiles, left to CloudFormation (it deletes them before the role). */
  readonly kept: readonly string[];
}

/**
 * Removes the role from every instance profile the stack did not create. IAM refuses `DeleteRole`
 * with `DeleteConflict` while any instance profile still holds the role, and a profile made by hand
 * or by another tool (to start a debugging instance with the lab's role, say) is not CloudFormation's
 * to delete. The profiles themselves are left in place, empty. Not-found is success.
 */
export async function removeFromForeignInstanceProfiles(
  iam: IAMClient,
  roleName: string,
  ownProfileNames: readonly string[],
  onRemoval: (profileName: string) => void = () => {},
): Promise<InstanceProfileCleanupResult> {
  const names: string[] = [];
  try {
    let marker: string | undefined;
    do {
      const page = await iam.send(
        new ListInstanceProfilesForRoleCommand({ RoleName: roleName, Marker: marker }),
      );
      for (const profile of page.InstanceProfiles ?? []) {
        if (profile.InstanceProfileName) names.push(profile.InstanceProfileName);
      }
      marker = page.IsTruncated ? page.Marker : undefined;
    } while (marker);
  } catch (error) {
    if (isNoSuchEntity(error)) return { roleName, removedFrom: [], kept: [] };
    throw new RoleCleanupError('iam:ListInstanceProfilesForRole', roleName, undefined, error);
  }
  const own = new Set(ownProfileNames);
  const removedFrom: string[] = [];
  for (const name of names.filter((n) => !own.has(n))) {
    try {
      await iam.send(
        new RemoveRoleFromInstanceProfileCommand({ RoleName: roleName, InstanceProfileName: name }),
      );
      removedFrom.push(name);
      onRemoval(name);
    } catch (error) {
      if (!isNoSuchEntity(error))
        throw new RoleCleanupError(
          'iam:RemoveRoleFromInstanceProfile',
          roleName,
          `${INSTANCE_PROFILE_SUBJECT}${name}`,
          error,
        );
    }
  }
  return { roleName, removedFrom, kept: names.filter((n) => own.has(n)) };
}
