/**
 * Errors of the `lab` commands that call AWS from a laptop (`lab teardown`, `lab run`, `lab status`,
 * `lab results`): an AWS SDK error becomes a message that says what to do - which credentials,
 * which region, which IAM permission, which stack. Each command binds the helpers to its own name
 * and documentation with `awsErrorHelpers`.
 */

/** Why a command stopped, for the kinds every AWS-calling command shares. */
export type AwsErrorKind = 'stack-not-found' | 'no-region' | 'no-credentials' | 'access-denied' | 'aws';

/** An error with a message meant for the user; `kind` lets callers and tests tell the cases apart. */
export class AwsCliError<Kind extends string = string> extends Error {
  override readonly name: string = 'AwsCliError';
  constructor(
    readonly kind: Kind,
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

/** What the messages say about the command that made the calls. */
export interface CommandProfile {
  /** As the user typed it: `lab teardown`. */
  readonly command: string;
  /** Where the command's IAM permissions are listed: `docs/teardown.md`. */
  readonly permissionsDoc: string;
  /** The last sentence of the stack-not-found message. */
  readonly stackNotFoundHint: string;
  /**
   * An error of the command's own that carries the AWS error as its cause, with the IAM action
   * of the failed call and a sentence about what it was doing; undefined for other errors.
   */
  readonly unwrap?: (error: unknown) => { cause: unknown; action: string; subject: string } | undefined;
}

export interface AwsErrorHelpers {
  /**
   * Turns an error from an AWS call into an `AwsCliError` with a message a user can act on.
   * `action` is the IAM action of the call (`cloudformation:DescribeStacks`), named when access is
   * denied; `subject` replaces the generic message for other failures.
   */
  explainAwsError(error: unknown, action: string, context: CallContext, subject?: string): AwsCliError;
  stackNotFound(context: CallContext, cause?: unknown): AwsCliError;
  /** Runs one AWS call, turning its failure into an `AwsCliError`. */
  awsCall<T>(action: string, context: CallContext, call: () => Promise<T>): Promise<T>;
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

/** The `name` an SDK v3 error carries (`InvalidInstanceId`, `NoSuchKey`, ...). */
export function awsErrorName(error: unknown): string {
  return String((error as { name?: unknown } | null)?.name ?? 'Error');
}

export function awsErrorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The action AWS names in an authorization failure ("... not authorized to perform: iam:X ..."). */
function deniedAction(message: string): string | undefined {
  return /not authorized to perform:? ([a-z0-9-]+:[A-Za-z0-9*]+)/.exec(message)?.[1];
}

export function awsErrorHelpers(profile: CommandProfile): AwsErrorHelpers {
  const { command } = profile;

  function stackNotFound(context: CallContext, cause?: unknown): AwsCliError {
    return new AwsCliError<AwsErrorKind>(
      'stack-not-found',
      `Stack ${context.stackName} does not exist in ${context.region}. Check the name (the lab's stackName setting; \`aws cloudformation list-stacks\` lists the region's stacks) and --region. ${profile.stackNotFoundHint}`,
      { cause },
    );
  }

  function explainAwsError(error: unknown, action: string, context: CallContext, subject = ''): AwsCliError {
    if (error instanceof AwsCliError) return error;
    const wrapped = profile.unwrap?.(error);
    if (wrapped) return explainAwsError(wrapped.cause, wrapped.action, context, wrapped.subject);
    const name = awsErrorName(error);
    const message = awsErrorMessage(error);
    if (name === 'CredentialsProviderError') {
      return new AwsCliError<AwsErrorKind>(
        'no-credentials',
        `No AWS credentials found (${message}). ${command} uses the standard credential chain: set AWS_PROFILE (and run \`aws sso login\` for an SSO profile), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run where an instance role is available.`,
        { cause: error },
      );
    }
    if (REJECTED_CREDENTIALS.has(name)) {
      return new AwsCliError<AwsErrorKind>(
        'no-credentials',
        `AWS rejected the credentials (${name}: ${message}). Refresh them (for an SSO profile: \`aws sso login\`) and retry.`,
        { cause: error },
      );
    }
    if (message === 'Region is missing' || message.startsWith('Region not accepted')) {
      const detail = message === 'Region is missing' ? '' : ` (${message})`;
      return new AwsCliError<AwsErrorKind>(
        'no-region',
        `No AWS region${detail}: pass --region, or set AWS_REGION or a region in your AWS profile.`,
        { cause: error },
      );
    }
    if (ACCESS_DENIED.has(name)) {
      const permission = deniedAction(message) ?? action;
      return new AwsCliError<AwsErrorKind>(
        'access-denied',
        `Access denied: the caller lacks permission ${permission}, which ${command} needs for stack ${context.stackName} in ${context.region} (${profile.permissionsDoc} lists every permission). AWS said: ${name}: ${message}`,
        { cause: error },
      );
    }
    if (name === 'ValidationError' && /does not exist/.test(message)) return stackNotFound(context, error);
    return new AwsCliError<AwsErrorKind>('aws', subject || `${action} failed: ${name}: ${message}`, {
      cause: error,
    });
  }

  async function awsCall<T>(action: string, context: CallContext, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw explainAwsError(error, action, context);
    }
  }

  return { explainAwsError, stackNotFound, awsCall };
}
