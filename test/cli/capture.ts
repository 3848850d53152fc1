import type { Command } from 'commander';
import { vi } from 'vitest';

export interface Captured<T> {
  readonly value: T;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `action` with what it writes to standard output and error captured instead of printed. */
export async function captureOutput<T>(action: () => Promise<T>): Promise<Captured<T>> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    stdout += String(chunk);
    return true;
  });
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
    stderr += String(chunk);
    return true;
  });
  try {
    const value = await action();
    return { value, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

/**
 * `lab --config <configFile> <argv> --kubeconfig <kubeconfig>` through `program` (commands already
 * registered, exitOverride set): its exit code and what it wrote. An error that is not a command's
 * exit is thrown, not turned into a code.
 */
export function runOnCluster(
  program: Command,
  configFile: string,
  kubeconfig: string,
  argv: readonly string[],
): Promise<Captured<number>> {
  return captureOutput(async () => {
    try {
      await program.parseAsync(['--config', configFile, ...argv, '--kubeconfig', kubeconfig], {
        from: 'user',
      });
      return 0;
    } catch (error) {
      if (error instanceof Error && 'exitCode' in error) return (error as { exitCode: number }).exitCode;
      throw error;
    }
  });
}
