import { GetCommandInvocationCommand, InvocationDoesNotExist, SendCommandCommand } from '@aws-sdk/client-ssm';
import { captureOutput } from './capture.ts';
import 'aws-sdk-client-mock-vitest/extend';
import { Command } from 'commander';
import { afterEach, beforeEach, vi } from 'vitest';
import { sdkControlClients } from '../../lib/cli/aws-clients.ts';
import { registerStudyCommands } from '../../lib/cli/study-commands.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { runnerJob } from '../../lib/control/host-scripts.ts';
import { INSTANCE, mockDeployedLab, STACK, ssm } from './deployed-lab.ts';

/**
 * What the study commands' tests share (lab run, status, results, logs on a deployed lab mocked
 * with aws-sdk-client-mock): the host's answers through SSM and a `lab` that waits no real time.
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

export interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * `lab <args>` on a program with the study commands whose clock reads `now`, waiting no real time
 * between polls.
 */
export function labAt(now: Date): (...args: string[]) => Promise<Run> {
  return async (...args) => {
    const program = new Command('lab').option('-c, --config <file>').exitOverride();
    registerStudyCommands(program, {
      createClients: (region) => sdkControlClients(region ?? 'us-west-2'),
      sleep: async () => {},
      now: () => now,
    });
    const {
      value: code,
      stdout,
      stderr,
    } = await captureOutput(async () => {
      try {
        await program.parseAsync(args, { from: 'user' });
        return 0;
      } catch (error) {
        const exitCode = (error as { exitCode?: number }).exitCode;
        if (typeof exitCode !== 'number') throw error;
        return exitCode;
      }
    });
    return { code, stdout, stderr };
  };
}

/** `lab <args>` at the kit's NOW. */
export const lab = labAt(NOW);

/** Each test starts on the mocked deployed lab, with no LAB_CONFIG from the environment. */
export function useDeployedLab(): void {
  beforeEach(() => {
    mockDeployedLab();
    vi.stubEnv('LAB_CONFIG', '');
  });
  afterEach(() => vi.unstubAllEnvs());
}

export const job = runnerJob(parseLabConfig({}));

/** A GetObject body as the SDK's stream mixin offers it. */
export function body(text: string) {
  const bytes = new TextEncoder().encode(text);
  return {
    transformToString: async () => text,
    transformToByteArray: async () => bytes,
  } as never;
}

export function object(path: string, size: number, modified = '2025-10-14T10:00:00.000Z') {
  return { Key: `${STACK}/${path}`, Size: size, LastModified: new Date(modified), ETag: `"${path}-${size}"` };
}
