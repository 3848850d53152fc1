import { spawnSync } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The system's Python (/usr/bin/python3, what the lab host runs), else the interpreter `python3`
 * on the PATH runs, resolved once per process: the `python3` of the bootstrap sandbox
 * (test/aws/bootstrap/sandbox.ts) and of the runner's host-script tests. A version manager's
 * `python3` is often a shim (pyenv's is a bash script that starts several more processes before
 * Python): about 1 s of CPU per call against 0.2 s for the interpreter itself, and asking the shim
 * which interpreter it runs cost that once per worker; the interpreter it picks may also load more
 * at start (site-packages .pth files) than the system's, which started in half its CPU here. A
 * bootstrap run calls python3 about a dozen times; the scripts use the standard library only.
 */
let resolved: string | undefined | null = null;

function python3(): string | undefined {
  if (resolved === null) {
    const system = ['/usr/bin/python3', '/bin/python3'].find((file) => existsSync(file));
    const found = system
      ? undefined
      : spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' });
    resolved =
      system ?? (found?.status === 0 && found.stdout.trim() !== '' ? found.stdout.trim() : undefined);
  }
  return resolved;
}

/** Links that interpreter as `python3` into `bin`, a folder the script's PATH puts first (nothing when none is found). */
export function linkPython3(bin: string): void {
  const python = python3();
  if (python) symlinkSync(python, join(bin, 'python3'));
}
