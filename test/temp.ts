import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

/**
 * A fresh folder in the system's temporary folder, removed after the test file's last test (by
 * test/setup-temp.ts, which vitest runs before every file).
 */
export function tempDir(prefix = 'lab-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/**
 * Removes every folder `tempDir` made since the last call. Not a module-level `afterAll`: with
 * `isolate: false` (vitest.config.ts) a worker evaluates this module once, for its first file, so
 * a hook registered here would clean up after that file only; the setup file is evaluated anew
 * for every file (vitest invalidates setup files before importing them: docs/facts.md §7).
 */
export function removeTempDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}
