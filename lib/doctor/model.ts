import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import type { EC2Client } from '@aws-sdk/client-ec2';
import type { IAMClient } from '@aws-sdk/client-iam';
import type { ServiceQuotasClient } from '@aws-sdk/client-service-quotas';
import type { SSMClient } from '@aws-sdk/client-ssm';
import type { STSClient } from '@aws-sdk/client-sts';

/**
 * The shapes of `lab doctor`: what each check reports, the clients it is given and what it knows
 * about the caller. Plain types; the checks and the command import them.
 */

/** The AWS clients `lab doctor` reads with; injected so tests can swap them. Nothing here writes. */
export interface DoctorClients {
  readonly sts: STSClient;
  readonly cloudFormation: CloudFormationClient;
  readonly ssm: SSMClient;
  readonly ec2: EC2Client;
  readonly serviceQuotas: ServiceQuotasClient;
  readonly iam: IAMClient;
}

/** pass: nothing to do; warn: deploy can go ahead, but read this; fail: cdk deploy would fail. */
export type DoctorStatus = 'pass' | 'warn' | 'fail';

/** The checks, in the order they run and print. */
export const DOCTOR_CHECKS = [
  'credentials',
  'bootstrap',
  'asset-key',
  'instance-types',
  'ami',
  'quota',
  'live-hosts',
  'permissions',
] as const;
export type DoctorCheck = (typeof DOCTOR_CHECKS)[number];

/** One line of the report. */
export interface DoctorLine {
  readonly check: DoctorCheck;
  readonly status: DoctorStatus;
  /** What was checked: `g6.12xlarge (server)`, `CDKToolkit`. */
  readonly subject: string;
  /** What was found. */
  readonly message: string;
  /** What to do about a warning or a failure. */
  readonly fix?: string;
}

/** Who the credentials are and where the lab would be deployed. */
export interface CallerContext {
  readonly account: string;
  readonly region: string;
  /** The caller's ARN as STS reports it (an assumed-role session, a user, root). */
  readonly arn: string;
  /** The AWS partition (`aws`, `aws-cn`, `aws-us-gov`), from the caller's ARN. */
  readonly partition: string;
}

/** A doctor line's constructor for one check. */
export function lineOf(check: DoctorCheck) {
  return (status: DoctorStatus, subject: string, message: string, fix?: string): DoctorLine => ({
    check,
    status,
    subject,
    message,
    ...(fix === undefined ? {} : { fix }),
  });
}

/** Says a slow step has started (the command writes it to stderr). */
export type Progress = (step: string) => void;
