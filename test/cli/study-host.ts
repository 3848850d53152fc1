import { GetCommandInvocationCommand, InvocationDoesNotExist, SendCommandCommand } from '@aws-sdk/client-ssm';
import { INSTANCE, ssm } from './deployed-lab.ts';

/**
 * The deployed lab's host as the study commands' tests and docs/study-control.md's `lab status`
 * example see it (test/cli/status-example.ts): its answers through SSM and its status.json. No
 * vitest here, so a script can use it too.
 */

export const COMMAND_ID = '0b1c2d3e-aaaa-bbbb-cccc-1234567890ab';
export const NOW = new Date('2025-10-14T09:14:40.000Z');

export const STATUS = {
  state: 'running',
  startedAt: '2025-10-14T09:00:00.000Z',
  updatedAt: '2025-10-14T09:14:20.000Z',
  totalRuns: 27,
  recordedRuns: 7,
  validRuns: 6,
  invalidRuns: 1,
  current: {
    index: 8,
    id: 'arm-router-round-robin-prefix',
    phase: 'waiting for job',
    startedAt: '2025-10-14T09:14:00.000Z',
    elapsedSeconds: 20,
  },
  etaSeconds: 2160,
  message: 'run 8/27 arm-router-round-robin-prefix: waiting for job (elapsed 20s, study ETA 36m)',
};

export function hostAnswers(
  stdout: string,
  options: { status?: string; code?: number; stderr?: string } = {},
) {
  ssm.on(SendCommandCommand).resolves({ Command: { CommandId: COMMAND_ID } });
  ssm
    .on(GetCommandInvocationCommand, { CommandId: COMMAND_ID, InstanceId: INSTANCE })
    .rejectsOnce(new InvocationDoesNotExist({ $metadata: {}, message: '' }))
    .resolvesOnce({ Status: 'InProgress' })
    .resolves({
      Status: (options.status ?? 'Success') as 'Success',
      ResponseCode: options.code ?? 0,
      StandardOutputContent: stdout,
      StandardErrorContent: options.stderr ?? '',
    });
}

export const statusBlock = (status: object) => `--- status.json\n${JSON.stringify(status, null, 2)}\n`;
