import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { runFolderBase } from './global-temp.ts';
import { tempDir } from './temp.ts';

test("the run's folder: a TMPDIR the user set wins", () => {
  expect(runFolderBase({ TMPDIR: '/somewhere/else' }, tempDir())).toBe('/somewhere/else');
});

test("the run's folder: a memory folder with room that runs programs is taken", () => {
  const memory = tempDir();
  expect(runFolderBase({}, memory)).toBe(memory);
});

test("the run's folder: no memory folder, or not a folder, falls back to the system's temp folder", () => {
  expect(runFolderBase({}, join(tempDir(), 'missing'))).toBe(tmpdir());
  const file = join(tempDir(), 'a-file');
  writeFileSync(file, '');
  expect(runFolderBase({}, file)).toBe(tmpdir());
});
