import { DescribeStacksCommand, type Stack } from '@aws-sdk/client-cloudformation';
import { awsErrorMessage, awsErrorName } from '../aws-cli/errors.ts';
import type { BootstrapRequirement } from './bootstrap.ts';
import { notChecked } from './errors.ts';
import { type CallerContext, type DoctorClients, type DoctorLine, lineOf } from './model.ts';

/**
 * The asset-key line: which KMS key encrypts the CDK asset bucket the hosts download their
 * bootstrap from, and whether the configuration gives the hosts kms:Decrypt on it. The bootstrap
 * stack's FileAssetsBucketKmsKeyId parameter says it (docs/facts.md §2.7): `AWS_MANAGED_KEY` (what
 * a plain `cdk bootstrap` sets), empty (`--bootstrap-customer-key`: a key the bootstrap creates,
 * whose key policy lets the account's principals use it through S3), or the id or ARN of a
 * customer-managed key (`--bootstrap-kms-key-id`), on which only an IAM statement lets the hosts
 * decrypt.
 */

/** The bootstrap template's parameter and its magic value (aws-cdk-cli bootstrap-template.yaml). */
export const ASSET_KEY_PARAMETER = 'FileAssetsBucketKmsKeyId';
export const AWS_MANAGED_KEY = 'AWS_MANAGED_KEY';
/** The output naming the key (the created key's ARN, or the parameter's value). */
export const ASSET_KEY_OUTPUT = 'FileAssetKeyArn';

const line = lineOf('asset-key');
const SETTING = 'aws.assetKeyArns';

/** The key id of a key ARN or of a bare id; undefined for an alias. */
function keyIdOf(value: string): string | undefined {
  if (value.startsWith('alias/') || value.includes(':alias/')) return undefined;
  return value.split(':key/').at(-1);
}

/** Judges the bootstrap's asset key against the configured key ARNs. Pure. */
export function judgeAssetKey(
  stack: Pick<Stack, 'Parameters' | 'Outputs'>,
  configured: readonly string[],
  requirement: Pick<BootstrapRequirement, 'toolkitStackName'>,
  caller: CallerContext,
): DoctorLine {
  const subject = `${requirement.toolkitStackName} asset bucket`;
  const value = stack.Parameters?.find((p) => p.ParameterKey === ASSET_KEY_PARAMETER)?.ParameterValue;
  const otherRegion = configured.filter((arn) => arn.split(':')[3] !== caller.region);
  const regionWarning =
    otherRegion.length > 0
      ? line(
          'warn',
          subject,
          `${SETTING} names ${otherRegion.join(', ')}, not in ${caller.region}: S3 encrypts a bucket only with a key of its own region, so these grant nothing here`,
          `list the key of ${caller.region} that the asset bucket uses`,
        )
      : undefined;
  if (value === undefined || value === AWS_MANAGED_KEY) {
    return (
      regionWarning ??
      line(
        'pass',
        subject,
        value === undefined
          ? `the bootstrap stack has no ${ASSET_KEY_PARAMETER} parameter: no customer-managed key to allow`
          : 'encrypted with the AWS managed key aws/s3, which every principal of the account may use through S3: the hosts need no key permission',
      )
    );
  }
  if (value === '') {
    const arn = stack.Outputs?.find((o) => o.OutputKey === ASSET_KEY_OUTPUT)?.OutputValue;
    return (
      regionWarning ??
      line(
        'pass',
        subject,
        `encrypted with the key cdk bootstrap created${arn ? ` (${arn})` : ''}, whose key policy lets every principal of the account use it through S3: the hosts need no IAM statement`,
      )
    );
  }
  const wanted = keyIdOf(value);
  if (wanted === undefined) {
    return line(
      'warn',
      subject,
      `encrypted with the customer-managed key behind ${value}; an alias cannot be matched against ${SETTING}`,
      `find its ARN (aws kms describe-key --key-id ${value} --region ${caller.region}) and list it in ${SETTING} if it is not there`,
    );
  }
  const named = configured.find((arn) => keyIdOf(arn) === wanted);
  if (named === undefined) {
    const arn = value.startsWith('arn:')
      ? value
      : `arn:${caller.partition}:kms:${caller.region}:${caller.account}:key/${value}`;
    return line(
      'fail',
      subject,
      `encrypted with the customer-managed key ${value} (cdk bootstrap --bootstrap-kms-key-id), which ${SETTING} does not name: the hosts could not decrypt their bootstrap download, and every launch would time out on its WaitCondition`,
      `add ${arn} to ${SETTING} in the lab configuration (the hosts then get kms:Decrypt on it through S3); its key policy must let IAM policies of account ${caller.account} grant its use`,
    );
  }
  return (
    regionWarning ??
    line(
      'pass',
      subject,
      `encrypted with the customer-managed key ${named}, which ${SETTING} names: the hosts get kms:Decrypt on it through S3`,
    )
  );
}

/** Reads the bootstrap stack's parameters and outputs, then judges them. Reads only. */
export async function checkAssetKey(
  clients: DoctorClients,
  configured: readonly string[],
  requirement: Pick<BootstrapRequirement, 'toolkitStackName'>,
  caller: CallerContext,
): Promise<DoctorLine> {
  const subject = `${requirement.toolkitStackName} asset bucket`;
  try {
    const described = await clients.cloudFormation.send(
      new DescribeStacksCommand({ StackName: requirement.toolkitStackName }),
    );
    const stack = described.Stacks?.[0];
    if (stack) return judgeAssetKey(stack, configured, requirement, caller);
  } catch (error) {
    const missing =
      awsErrorName(error) === 'ValidationError' && /does not exist/.test(awsErrorMessage(error));
    if (!missing) return notChecked('asset-key', subject, 'cloudformation:DescribeStacks', error);
  }
  return line(
    'warn',
    subject,
    `not checked: no stack ${requirement.toolkitStackName} to read its asset key from (see the bootstrap line)`,
    'run lab doctor again once the account is bootstrapped',
  );
}
