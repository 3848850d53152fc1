import { RoleCleanupError } from '../aws/role-cleanup/cleanup.ts';

/** Why `lab teardown` stopped; each kind has its own message with what to do about it. */
export type TeardownErrorKind =
  | 'stack-not-found'
  | 'no-region'
  | 'no-credentials'
  | 'access-denied'
  | 'template'
  | 'aws';

export class TeardownError extends Error {
  override readonly name = 'TeardownError';
  constructor(
    readonly kind: TeardownErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Where a call was made, for messages. */
export interface CallContext {
  readonly stackName: string;
  readonly region: string;
}

const ACCESS_DENIED = new Set(['AccessDenied', 'AccessDeniedException', 'UnauthorizedOperation']);
/** Credentials were found but AWS refused them (expired session, deleted key, wrong signature). */
const REJECTED_CREDENTIALS = new Set([
  'ExpiredToken',
  'ExpiredTokenException',
  'InvalidClientTokenId',
  'UnrecognizedClientException',
  'AuthFailure',
  'SignatureDoesNotMatch',
]);

function nameOf(error: unknown): string {
  return String((error as { name?: unknown } | null)?.name ?? 'Error');
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The action AWS names in an authorization failure ("... not authorized to perform: iam:X ..."). */
function deniedAction(message: string): string | undefined {
  return /not authorized to perform:? ([a-z0-9-]+:[A-Za-z0-9*]+)/.exec(message)?.[1];
}

/**
 * Turns an error from an AWS call into a `TeardownError` with a message a user can act on.
 * `action` is the IAM action of the call (`cloudformation:ListStackResources`), named when access
 * is denied; `subject` says what the call was about, for other failures.
 */
export function explainAwsError(
  error: unknown,
  action: string,
  context: CallContext,
  subject = '',
): TeardownError {
  if (error instanceof TeardownError) return error;
  if (error instanceof RoleCleanupError) {
    return explainAwsError(error.cause, error.action, context, error.message);
  }
  const name = nameOf(error);
  const message = messageOf(error);
  if (name === 'CredentialsProviderError') {
    return new TeardownError(
      'no-credentials',
      `No AWS credentials found (${message}). lab teardown uses the standard credential chain: set AWS_PROFILE (and run \`aws sso login\` for an SSO profile), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run where an instance role is available.`,
      { cause: error },
    );
  }
  if (REJECTED_CREDENTIALS.has(name)) {
    return new TeardownError(
      'no-credentials',
      `AWS rejected the credentials (${name}: ${message}). Refresh them (for an SSO profile: \`aws sso login\`) and retry.`,
      { cause: error },
    );
  }
  if (message === 'Region is missing' || message.startsWith('Region not accepted')) {
    const detail = message === 'Region is missing' ? '' : ` (${message})`;
    return new TeardownError(
      'no-region',
      `No AWS region${detail}: pass --region, or set AWS_REGION or a region in your AWS profile.`,
      { cause: error },
    );
  }
  if (ACCESS_DENIED.has(name)) {
    const permission = deniedAction(message) ?? action;
    return new TeardownError(
      'access-denied',
      `Access denied: the caller lacks permission ${permission}, which lab teardown needs for stack ${context.stackName} in ${context.region} (docs/teardown.md lists every permission). AWS said: ${name}: ${message}`,
      { cause: error },
    );
  }
  if (name === 'ValidationError' && /does not exist/.test(message)) return stackNotFound(context, error);
  return new TeardownError('aws', subject || `${action} failed: ${name}: ${message}`, { cause: error });
}

export function stackNotFound(context: CallContext, cause?: unknown): TeardownError {
  return new TeardownError(
    'stack-not-found',
    `Stack ${context.stackName} does not exist in ${context.region}. Check the name (the lab's stackName setting; \`aws cloudformation list-stacks\` lists the region's stacks) and --region. A stack that has finished deleting needs no teardown.`,
    { cause },
  );
}

/** Runs one AWS call, turning its failure into a `TeardownError`. */
export async function awsCall<T>(action: string, context: CallContext, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw explainAwsError(error, action, context);
  }
}
