import {
  GetCommandInvocationCommand,
  type GetCommandInvocationCommandOutput,
  SendCommandCommand,
} from '@aws-sdk/client-ssm';
import { awsErrorMessage, awsErrorName } from '../aws-cli/errors.ts';
import { type ControlContext, controlError } from './context.ts';

/** The SSM document that runs shell lines on Linux; one `commands` entry per line. */
export const RUN_SHELL_DOCUMENT = 'AWS-RunShellScript';

/** How long SSM may wait to deliver the command to the agent (its minimum is 30 s). */
export const DELIVERY_TIMEOUT_SECONDS = 60;

export interface HostCommand {
  /** Shown in the SSM console's command history. */
  readonly comment: string;
  readonly lines: readonly string[];
  /** The script's own limit on the host (`executionTimeout`); the laptop waits a little longer. */
  readonly timeoutSeconds: number;
}

export interface HostCommandResult {
  readonly commandId: string;
  /** `Success` or `Failed`. */
  readonly status: string;
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

const FINAL = new Set(['Success', 'Failed', 'Cancelled', 'TimedOut']);

/**
 * Runs a script on the instance with SSM Run Command and waits for it: SendCommand, then
 * GetCommandInvocation every `ctx.pollMs` until the invocation ends or `timeoutSeconds` plus the
 * delivery time have passed. Success and Failed (a non-zero exit) are returned; the caller decides
 * what an exit code means. SSM keeps at most 24,000 characters of each stream.
 */
export async function runOnHost(
  ctx: ControlContext,
  instanceId: string,
  command: HostCommand,
): Promise<HostCommandResult> {
  let commandId: string;
  try {
    const sent = await ctx.clients.ssm.send(
      new SendCommandCommand({
        DocumentName: RUN_SHELL_DOCUMENT,
        InstanceIds: [instanceId],
        Comment: command.comment.slice(0, 100),
        TimeoutSeconds: DELIVERY_TIMEOUT_SECONDS,
        Parameters: {
          commands: [...command.lines],
          executionTimeout: [String(command.timeoutSeconds)],
        },
      }),
    );
    commandId = sent.Command?.CommandId ?? '';
  } catch (error) {
    if (awsErrorName(error) === 'InvalidInstanceId') {
      throw controlError(
        'agent-not-registered',
        `Instance ${instanceId} is not managed by SSM yet: the SSM agent has not registered yet; wait a minute and retry (a new instance takes a minute or two; if it persists, the instance role lacks AmazonSSMManagedInstanceCore or the host has no route to the SSM endpoints). AWS said: ${awsErrorMessage(error)}`,
        error,
      );
    }
    throw ctx.errors.explainAwsError(error, 'ssm:SendCommand', ctx);
  }
  if (!commandId) throw controlError('command-failed', 'ssm:SendCommand returned no command id');

  const limitMs = (command.timeoutSeconds + DELIVERY_TIMEOUT_SECONDS) * 1000;
  let waitedMs = 0;
  let last: GetCommandInvocationCommandOutput | undefined;
  for (;;) {
    // The invocation exists only a moment after SendCommand returns.
    await ctx.sleep(ctx.pollMs);
    waitedMs += ctx.pollMs;
    try {
      last = await ctx.clients.ssm.send(
        new GetCommandInvocationCommand({ CommandId: commandId, InstanceId: instanceId }),
      );
    } catch (error) {
      if (awsErrorName(error) !== 'InvocationDoesNotExist') {
        throw ctx.errors.explainAwsError(error, 'ssm:GetCommandInvocation', ctx);
      }
    }
    const status = last?.Status ?? 'Pending';
    if (FINAL.has(status)) break;
    if (waitedMs >= limitMs) {
      throw controlError(
        'command-timeout',
        `The command on instance ${instanceId} is still ${status} after ${Math.round(waitedMs / 1000)} s. Look at it later with: aws ssm get-command-invocation --region ${ctx.region} --command-id ${commandId} --instance-id ${instanceId}`,
      );
    }
  }
  const result: HostCommandResult = {
    commandId,
    status: last?.Status ?? 'Unknown',
    exitCode: last?.ResponseCode ?? -1,
    stdout: last?.StandardOutputContent ?? '',
    stderr: last?.StandardErrorContent ?? '',
  };
  if (result.status === 'Cancelled' || result.status === 'TimedOut') {
    const detail = last?.StatusDetails ? ` (${last.StatusDetails})` : '';
    const undelivered = last?.StatusDetails === 'DeliveryTimedOut';
    throw controlError(
      undelivered ? 'agent-not-registered' : 'command-failed',
      undelivered
        ? `The command never reached instance ${instanceId}${detail}: its SSM agent is not connected. Wait a minute and retry.`
        : `The command on instance ${instanceId} ended ${result.status}${detail}.${stderrTail(result.stderr)}`,
    );
  }
  return result;
}

function stderrTail(stderr: string): string {
  const text = stderr.trim();
  return text ? `\nIts stderr:\n${text}` : '';
}

/** The error for a script that exited non-zero: its exit code and stderr, as the host printed them. */
export function commandFailed(what: string, instanceId: string, result: HostCommandResult) {
  return controlError(
    'command-failed',
    `${what} failed on instance ${instanceId} with exit code ${result.exitCode} (SSM command ${result.commandId}).${stderrTail(result.stderr)}`,
  );
}
