import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Memory the run may need in its folder at once (sandboxes, cdk.out, Chromium's profile). */
const MEMORY_FOLDER_FREE_BYTES = 2 * 1024 ** 3;

/**
 * Where the run's folder goes. Tests make and remove many small files (a shell-sandbox run writes
 * its fake programs, logs and S3 objects); on a disk that discards freed blocks (ext4 `discard`,
 * common on cloud VMs) each removal costs about 1 ms of CPU, so /dev/shm (memory) is preferred
 * when it has room and runs programs (a `noexec` mount would break the sandboxes' fakes). A
 * TMPDIR set by the user wins.
 */
export function runFolderBase(env: NodeJS.ProcessEnv = process.env, memory = '/dev/shm'): string {
  if (env.TMPDIR) return env.TMPDIR;
  try {
    const { bavail, bsize } = statfsSync(memory);
    if (bavail * bsize < MEMORY_FOLDER_FREE_BYTES) return tmpdir();
    const probe = mkdtempSync(join(memory, 'lab-vitest-probe-'));
    try {
      const program = join(probe, 'probe');
      writeFileSync(program, '#!/bin/sh\nexit 0\n');
      chmodSync(program, 0o755);
      return spawnSync(program).status === 0 ? memory : tmpdir();
    } finally {
      rmSync(probe, { recursive: true, force: true });
    }
  } catch {
    return tmpdir();
  }
}

/**
 * Vitest global setup: the whole run gets one temporary folder of its own, as TMPDIR for the test
 * workers and every child process they start, and it is removed when the run ends. It catches
 * what tests cannot remove themselves: the `cdk.out` folders aws-cdk-lib's App makes when given
 * no outdir, the asset folders lib/aws/gpu-host.ts stages at synthesis, tsx's transform cache in
 * child processes, Chromium's profile. Tests still remove their own folders (test/temp.ts).
 */
export default function setup(): () => void {
  const previous = process.env.TMPDIR;
  const dir = mkdtempSync(join(runFolderBase(), 'lab-vitest-'));
  process.env.TMPDIR = dir;
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    rmSync(dir, { recursive: true, force: true });
  };
}
