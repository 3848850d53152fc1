import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { vi } from 'vitest';
import { runLab } from '../../lib/cli/program.ts';
import { captureOutput } from './capture.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface LabRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the real `lab` entry point in a child process, as a user would: bin/lab.ts execs
 * bin/launch.mjs, which starts the lab from its cached bundle (about 9x faster than through tsx;
 * the tsx fallback has its own test in config-command.test.ts). Each command family keeps at least
 * one test through here, proving the entry point: the exit code, what reaches the terminal.
 */
export function runLabCli(args: readonly string[], env: NodeJS.ProcessEnv = {}): LabRun {
  const result = spawnSync(process.execPath, ['bin/launch.mjs', ...args], {
    cwd: root,
    env: { ...process.env, LAB_CONFIG: '', ...env },
    encoding: 'utf8',
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/**
 * `lab <args>` in this process, through the program bin/lab.ts runs (`runLab`, the same commander
 * wiring, options and error handling), with what it writes captured: the same code, exit code and
 * output as runLabCli without a process start and a bundle load (0.3 to 0.5 s of CPU each on a
 * small VM). `env` is the environment the command reads (LAB_CONFIG), restored afterwards.
 * A subcommand's usage error (an unknown option, a bad option value) comes back as its exit code
 * too (runLab sets exitOverride on every command).
 */
export async function runLabHere(args: readonly string[], env: Record<string, string> = {}): Promise<LabRun> {
  // Relative paths (examples/...) resolve against the working directory, as with runLabCli's cwd.
  if (resolve(process.cwd()) !== resolve(root)) {
    throw new Error(`runLabHere: run the tests from ${root}, not ${process.cwd()}`);
  }
  vi.stubEnv('LAB_CONFIG', '');
  for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
  try {
    const { value: code, stdout, stderr } = await captureOutput(() => runLab(args));
    return { code, stdout, stderr };
  } finally {
    vi.unstubAllEnvs();
  }
}
