import { AwsCliError, awsErrorHelpers, awsErrorMessage, awsErrorName } from '../aws-cli/errors.ts';
import { type DoctorCheck, type DoctorLine, lineOf } from './model.ts';

/**
 * How `lab doctor` meets AWS errors. Missing or rejected credentials and a missing region stop it
 * with one line (the shared AWS command errors); any other failure of one check's call becomes a
 * warning saying what was not checked and why, so one denied call does not hide the other lines.
 */

export const { explainAwsError } = awsErrorHelpers({
  command: 'lab doctor',
  permissionsDoc: 'docs/first-run.md',
  stackNotFoundHint: '',
});

const DENIED = new Set(['AccessDenied', 'AccessDeniedException', 'UnauthorizedOperation']);

/** Whether an error means the whole run cannot go on (no credentials, no region). */
export function isFatal(error: unknown): boolean {
  const explained = explainAwsError(error, '', { stackName: '', region: '' });
  return explained.kind === 'no-credentials' || explained.kind === 'no-region';
}

/** The warning line of a check whose call failed; fatal errors are thrown as the one-line error. */
export function notChecked(check: DoctorCheck, subject: string, action: string, error: unknown): DoctorLine {
  if (isFatal(error)) throw explainAwsError(error, action, { stackName: '', region: '' });
  if (error instanceof AwsCliError) throw error;
  const name = awsErrorName(error);
  if (DENIED.has(name)) {
    return lineOf(check)(
      'warn',
      subject,
      `not checked: the caller may not call ${action} (${name})`,
      `allow ${action} to the caller to run this check`,
    );
  }
  return lineOf(check)(
    'warn',
    subject,
    `not checked: ${action} failed: ${name}: ${awsErrorMessage(error)}`,
    'run lab doctor again; if it persists, check the AWS Health Dashboard for the region',
  );
}
