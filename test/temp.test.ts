import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { tempDir } from './temp.ts';

const root = fileURLToPath(new URL('..', import.meta.url));

// The fixture files also check that test/install/rig.ts's fake cluster stops after each test that
// started one (stops-its-rig.ts): a failed check there fails the run's exit status.
test("tempDir's folders are removed, and rig()'s fake clusters stopped, after every file of a worker, not only its first", () => {
  const record = join(tempDir(), 'made.txt');
  const run = spawnSync(
    process.execPath,
    ['node_modules/vitest/vitest.mjs', 'run', '--config', 'test/temp-cleanup/vitest.config.ts'],
    { cwd: root, env: { ...process.env, LAB_TEMP_RECORD: record }, encoding: 'utf8' },
  );
  expect(run.status, run.stdout + run.stderr).toBe(0);
  const made = readFileSync(record, 'utf8').trim().split('\n');
  expect(made).toHaveLength(2);
  expect(made.filter((dir) => existsSync(dir))).toEqual([]);
});
