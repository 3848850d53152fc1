import { GetCallerIdentityCommand } from '@aws-sdk/client-sts';
import { explainAwsError } from './errors.ts';
import { type CallerContext, type DoctorClients, type DoctorLine, lineOf } from './model.ts';

/**
 * The credentials line: who the credentials are (STS GetCallerIdentity, which needs no permission)
 * and the region the lab would go to. Without credentials or a region nothing else can be checked,
 * so those stop `lab doctor` with one line.
 */

const line = lineOf('credentials');

/** The caller's partition from an ARN (`arn:aws:sts::...`). */
function partitionOf(arn: string): string {
  return arn.split(':')[1] || 'aws';
}

/** Resolves region and caller; throws the one-line error when either is missing. */
export async function resolveCaller(
  clients: DoctorClients,
): Promise<{ readonly caller: CallerContext; readonly line: DoctorLine }> {
  const where = { stackName: '', region: '(no region)' };
  const region = await clients.sts.config.region().catch((error: unknown) => {
    throw explainAwsError(error, 'region', where);
  });
  if (!region) throw explainAwsError(new Error('Region is missing'), 'region', where);
  const identity = await clients.sts.send(new GetCallerIdentityCommand({})).catch((error: unknown) => {
    throw explainAwsError(error, 'sts:GetCallerIdentity', { stackName: '', region });
  });
  const arn = identity.Arn ?? '';
  const account = identity.Account ?? '';
  const caller: CallerContext = { account, region, arn, partition: partitionOf(arn) };
  const subject = `account ${account}, region ${region}`;
  if (/:root$/.test(arn)) {
    return {
      caller,
      line: line(
        'warn',
        subject,
        `${arn}: the account's root user, which can do anything`,
        'deploy with an IAM role or user instead (AWS advises against using the root user for everyday tasks)',
      ),
    };
  }
  return { caller, line: line('pass', subject, arn) };
}
