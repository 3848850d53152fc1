import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import type { EC2Client } from '@aws-sdk/client-ec2';
import type { S3Client } from '@aws-sdk/client-s3';
import type { SSMClient } from '@aws-sdk/client-ssm';
import {
  AwsCliError,
  type AwsErrorHelpers,
  type AwsErrorKind,
  awsErrorHelpers,
  type CallContext,
} from '../aws-cli/errors.ts';

/** The AWS clients the study commands use; tests pass mocked ones. */
export interface ControlClients {
  readonly cloudFormation: CloudFormationClient;
  readonly ec2: EC2Client;
  readonly ssm: SSMClient;
  readonly s3: S3Client;
}

/** Why `lab run`, `lab status`, `lab results` or `lab logs` stopped, beyond the kinds every AWS command has. */
export type ControlErrorKind =
  | AwsErrorKind
  /** The stack has no InstanceId or results bucket output. */
  | 'not-deployed'
  /** The instance is not running (pending, stopped, terminated, gone). */
  | 'instance-not-running'
  /** SendCommand: InvalidInstanceId, the SSM agent has not registered. */
  | 'agent-not-registered'
  /** The bootstrap has not signalled SUCCESS. */
  | 'not-ready'
  /** The script on the host exited non-zero, or Run Command gave up on it. */
  | 'command-failed'
  /** The command did not end within the wait. */
  | 'command-timeout'
  /** No status.json: the study has not started. */
  | 'no-status'
  /** status.json is not what the runner writes. */
  | 'bad-status'
  /** Nothing under the stack's prefix in the results bucket. */
  | 'no-results'
  /** `lab logs`: the log file is not there (yet). */
  | 'no-log'
  /** `lab logs`: the pod, Deployment or Job is not there. */
  | 'no-pod';

export type ControlError = AwsCliError<ControlErrorKind>;

export function controlError(kind: ControlErrorKind, message: string, cause?: unknown): ControlError {
  return new AwsCliError<ControlErrorKind>(kind, message, cause === undefined ? undefined : { cause });
}

/** Where the study commands document the permissions they need. */
export const STUDY_CONTROL_DOC = 'docs/study-control.md';

/** Everything one study command needs: clients, where it works, how it reports, how it waits. */
export interface ControlContext extends CallContext {
  /** As typed: `lab run`. */
  readonly command: string;
  /** The network-lab cell addressed with `--cell`; absent for the LLM-gateway lab's GPU host. */
  readonly cell?: string;
  readonly clients: ControlClients;
  readonly errors: AwsErrorHelpers;
  /** One line of output. */
  readonly write: (line: string) => void;
  readonly sleep: (ms: number) => Promise<void>;
  /** Interval between GetCommandInvocation polls. */
  readonly pollMs: number;
  readonly now: () => Date;
}

export interface ControlContextOptions {
  readonly command: string;
  readonly cell?: string;
  readonly stackName: string;
  readonly region: string;
  readonly clients: ControlClients;
  readonly write: (line: string) => void;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly pollMs?: number;
  readonly now?: () => Date;
}

export function controlContext(options: ControlContextOptions): ControlContext {
  return {
    command: options.command,
    ...(options.cell === undefined ? {} : { cell: options.cell }),
    stackName: options.stackName,
    region: options.region,
    clients: options.clients,
    write: options.write,
    sleep: options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
    pollMs: options.pollMs ?? 2000,
    now: options.now ?? (() => new Date()),
    errors: awsErrorHelpers({
      command: options.command,
      permissionsDoc: STUDY_CONTROL_DOC,
      stackNotFoundHint:
        "Deploy it first (npx cdk deploy), or pass the region it was deployed to; a destroyed stack's results stay in its retained results bucket.",
    }),
  };
}
