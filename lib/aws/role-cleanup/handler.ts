import { IAMClient } from '@aws-sdk/client-iam';
import {
  cleanupRole,
  type InstanceProfileCleanupResult,
  type RoleAllowList,
  type RoleCleanupResult,
  removeFromForeignInstanceProfiles,
} from './cleanup.ts';
import {
  INLINE_POLICY_NAMES,
  INSTANCE_PROFILE_NAMES,
  MANAGED_POLICY_ARNS,
  PHYSICAL_ID_PREFIX,
  ROLE_NAME,
  ROLES,
} from './props.ts';

/** One role's allow-list and the instance profiles the stack made for it. */
export interface RoleEntry extends RoleAllowList {
  readonly instanceProfileNames: readonly string[];
}

/**
 * The `RoleCleanup` handler (the Provider framework's `onEvent`; no `isComplete`: IAM calls are
 * synchronous). Create and Update only check and log the allow-list, which CloudFormation keeps in
 * the resource's properties; Delete strips every policy the stack did not declare from each role.
 */

/** The part of the Provider framework's `onEvent` request this handler reads. */
export interface RoleCleanupEvent {
  readonly RequestType: 'Create' | 'Update' | 'Delete';
  readonly PhysicalResourceId?: string;
  readonly ResourceProperties: Readonly<Record<string, unknown>>;
}

export interface RoleCleanupResponse {
  readonly PhysicalResourceId: string;
  readonly Data?: Readonly<Record<string, string>>;
}

/** Reads the `Roles` property; a malformed one is a bug in the construct, reported as such. */
export function parseAllowLists(properties: Readonly<Record<string, unknown>>): RoleEntry[] {
  const roles = properties[ROLES];
  if (!Array.isArray(roles) || roles.length === 0) {
    throw new Error(`RoleCleanup: property ${ROLES} must be a non-empty list, got ${JSON.stringify(roles)}`);
  }
  return roles.map((entry: unknown, index) => {
    const record = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
    const roleName = record[ROLE_NAME];
    if (typeof roleName !== 'string' || roleName === '') {
      throw new Error(
        `RoleCleanup: ${ROLES}[${index}].${ROLE_NAME} must be a role name, got ${JSON.stringify(entry)}`,
      );
    }
    return {
      roleName,
      managedPolicyArns: stringList(record[MANAGED_POLICY_ARNS], `${ROLES}[${index}].${MANAGED_POLICY_ARNS}`),
      inlinePolicyNames: stringList(record[INLINE_POLICY_NAMES], `${ROLES}[${index}].${INLINE_POLICY_NAMES}`),
      instanceProfileNames: stringList(
        record[INSTANCE_PROFILE_NAMES],
        `${ROLES}[${index}].${INSTANCE_PROFILE_NAMES}`,
      ),
    };
  });
}

/** CloudFormation may leave out an empty list; anything else must be a list of strings. */
function stringList(value: unknown, where: string): string[] {
  if (value === undefined || value === '') return [];
  if (Array.isArray(value) && value.every((item) => typeof item === 'string')) return value;
  throw new Error(`RoleCleanup: ${where} must be a list of strings, got ${JSON.stringify(value)}`);
}

/** Stable across updates: the physical id never changes, so an Update never triggers a Delete. */
export function physicalIdOf(allowLists: readonly RoleAllowList[]): string {
  return `${PHYSICAL_ID_PREFIX}${allowLists.map((allow) => allow.roleName).join(',')}`;
}

/** Handles one event with the given IAM client; what the tests drive. */
export async function handleEvent(
  event: RoleCleanupEvent,
  iam: IAMClient,
  log: (line: string) => void = console.log,
): Promise<RoleCleanupResponse> {
  const allowLists = parseAllowLists(event.ResourceProperties);
  switch (event.RequestType) {
    case 'Create':
    case 'Update': {
      log(JSON.stringify({ requestType: event.RequestType, allowLists }));
      return { PhysicalResourceId: event.PhysicalResourceId ?? physicalIdOf(allowLists) };
    }
    case 'Delete': {
      const results: RoleCleanupResult[] = [];
      const profiles: InstanceProfileCleanupResult[] = [];
      const failures: string[] = [];
      // Every role is tried even when one fails, so one stubborn role does not leave the others dirty.
      for (const entry of allowLists) {
        try {
          results.push(await cleanupRole(iam, entry, (removal) => log(JSON.stringify({ removal }))));
          profiles.push(
            await removeFromForeignInstanceProfiles(iam, entry.roleName, entry.instanceProfileNames, (name) =>
              log(JSON.stringify({ removedFromInstanceProfile: { roleName: entry.roleName, name } })),
            ),
          );
        } catch (error) {
          failures.push(error instanceof Error ? error.message : String(error));
        }
      }
      log(JSON.stringify({ requestType: 'Delete', results, profiles }));
      if (failures.length > 0)
        throw new Error(
          `RoleCleanup could not strip foreign policies and instance profiles: ${failures.join('; ')}`,
        );
      const removed =
        results.reduce((sum, result) => sum + result.detached.length + result.deleted.length, 0) +
        profiles.reduce((sum, result) => sum + result.removedFrom.length, 0);
      return {
        PhysicalResourceId: event.PhysicalResourceId ?? physicalIdOf(allowLists),
        Data: { Removed: String(removed) },
      };
    }
    default:
      throw new Error(
        `RoleCleanup: unknown RequestType ${JSON.stringify((event as { RequestType: unknown }).RequestType)}`,
      );
  }
}

let client: IAMClient | undefined;

/** The Lambda entry point (`index.handler` after bundling). */
export async function handler(event: RoleCleanupEvent): Promise<RoleCleanupResponse> {
  client ??= new IAMClient({});
  return handleEvent(event, client);
}
