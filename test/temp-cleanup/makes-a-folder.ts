import { appendFileSync, existsSync } from 'node:fs';
import { expect, test } from 'vitest';
import { tempDir } from '../temp.ts';

/** A test file's body for test/temp.test.ts: makes a folder and records its path. */
export function makesAFolder(): void {
  test('makes a folder', () => {
    const dir = tempDir('lab-temp-cleanup-');
    expect(existsSync(dir)).toBe(true);
    appendFileSync(process.env.LAB_TEMP_RECORD ?? '', `${dir}\n`);
  });
}
