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
