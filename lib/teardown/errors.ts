import { RoleCleanupError } from '../aws/role-cleanup/cleanup.ts';
import { AwsCliError, type AwsErrorKind, awsErrorHelpers } from '../aws-cli/errors.ts';

export type { CallContext } from '../aws-cli/errors.ts';

/** Why `lab teardown` stopped; each kind has its own message with what to do about it. */
export type TeardownErrorKind = AwsErrorKind | 'template';

/** The errors `lab teardown` reports: the shared AWS command error, with teardown's own kinds. */
export type TeardownError = AwsCliError<TeardownErrorKind>;
export const TeardownError = AwsCliError<TeardownErrorKind>;

/** The shared AWS error helpers, worded for `lab teardown`. */
export const { explainAwsError, stackNotFound, awsCall } = awsErrorHelpers({
  command: 'lab teardown',
  permissionsDoc: 'docs/teardown.md',
  stackNotFoundHint: 'A stack that has finished deleting needs no teardown.',
  // RoleCleanup's pure logic is shared with its Lambda handler and wraps the IAM error it met.
  unwrap: (error) =>
    error instanceof RoleCleanupError
      ? { cause: error.cause, action: error.action, subject: error.message }
      : undefined,
});
