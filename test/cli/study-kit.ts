import { captureOutput } from './capture.ts';
import 'aws-sdk-client-mock-vitest/extend';
import { Command } from 'commander';
import { afterEach, beforeEach, vi } from 'vitest';
import { sdkControlClients } from '../../lib/cli/aws-clients.ts';
import { registerStudyCommands } from '../../lib/cli/study-commands.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { runnerJob } from '../../lib/control/host-scripts.ts';
import { mockDeployedLab, STACK } from './deployed-lab.ts';
import { NOW } from './study-host.ts';

/**
 * What the study commands' tests share (lab run, status, results, logs on a deployed lab mocked
 * with aws-sdk-client-mock): the host's answers through SSM and a `lab` that waits no real time.
 */

export { COMMAND_ID, hostAnswers, NOW, STATUS, statusBlock } from './study-host.ts';

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
