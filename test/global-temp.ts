import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Vitest global setup: the whole run gets one temporary folder of its own, as TMPDIR for the test
 * workers and every child process they start, and it is removed when the run ends. It catches
 * what tests cannot remove themselves: the `cdk.out` folders aws-cdk-lib's App makes when given
 * no outdir, the asset folders lib/aws/gpu-host.ts stages at synthesis, tsx's transform cache in
 * child processes, Chromium's profile. Tests still remove their own folders (test/temp.ts).
 */
export default function setup(): () => void {
  const previous = process.env.TMPDIR;
  const dir = mkdtempSync(join(tmpdir(), 'lab-vitest-'));
  process.env.TMPDIR = dir;
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    rmSync(dir, { recursive: true, force: true });
  };
}
