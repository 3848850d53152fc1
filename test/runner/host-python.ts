import { spawnSync } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The interpreter `python3` on the PATH runs, resolved once per process. A version manager's
 * `python3` is often a shim (pyenv's is a bash script that starts several more processes before
 * Python): about 1 s of CPU per call against 0.2 s for the interpreter itself. The host scripts
 * the runner tests run (lab-terminate-when-done.sh reads status.json with python3) get the same
 * Python without the dispatch, as the bootstrap sandbox does (test/aws/bootstrap/sandbox.ts).
 */
let resolved: string | undefined | null = null;

function python3(): string | undefined {
  if (resolved === null) {
    const found = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' });
    resolved = found.status === 0 && found.stdout.trim() !== '' ? found.stdout.trim() : undefined;
  }
  return resolved;
}

/** Links that interpreter as `python3` into `bin`, a folder the script's PATH puts first (nothing when none is found). */
export function linkPython3(bin: string): void {
  const python = python3();
  if (python) symlinkSync(python, join(bin, 'python3'));
}
