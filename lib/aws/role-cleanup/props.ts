/**
 * The `RoleCleanup` custom resource's contract, imported by the construct (which writes the
 * properties) and by the handler (which reads them), so the two sides cannot drift apart.
 */

/** CloudFormation resource type of the custom resource. */
export const ROLE_CLEANUP_RESOURCE_TYPE = 'Custom::RoleCleanup';

/** Property: a list of objects, one per role, with the keys below. */
export const ROLES = 'Roles';
/** Key in each role entry: the role's name (a `Ref` to the role). */
export const ROLE_NAME = 'RoleName';
/** Key in each role entry: ARNs of the managed policies the stack attaches to the role. */
export const MANAGED_POLICY_ARNS = 'ManagedPolicyArns';
/** Key in each role entry: names of the inline policies the stack puts on the role. */
export const INLINE_POLICY_NAMES = 'InlinePolicyNames';

/**
 * Key in each role entry: names of the instance profiles the stack creates for the role; the role
 * is removed from every other instance profile before CloudFormation deletes it.
 */
export const INSTANCE_PROFILE_NAMES = 'InstanceProfileNames';

/** Prefix of the physical id; the rest is the comma-separated role names. */
export const PHYSICAL_ID_PREFIX = 'RoleCleanup:';
