import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { studyFileOf } from '../../lib/report/write.ts';
import { tempDir } from '../temp.ts';

function study(dir: string, id: string, profile?: 'smoke'): void {
  mkdirSync(join(dir, 'studies', id), { recursive: true });
  const metadata = { studyId: id, startedAt: '2025-10-14T09:00:00.000Z', ...(profile ? { profile } : {}) };
  writeFileSync(
    join(dir, 'studies', id, 'study.json'),
    JSON.stringify({ schemaVersion: 1, metadata, runs: [] }),
  );
}

describe('studyFileOf', () => {
  it('passes over smoke studies: the full study checked after its smoke checks is the one reported', () => {
    const dir = tempDir('lab-study-file-');
    study(dir, '20251014-090000-aaaaaaaa');
    // The full study's checks start a second later, so their smoke study sorts last.
    study(dir, '20251014-090001-bbbbbbbb', 'smoke');
    expect(studyFileOf(dir)).toBe(join(dir, 'studies', '20251014-090000-aaaaaaaa', 'study.json'));
  });

  it('reports the smoke study when it is the only one', () => {
    const dir = tempDir('lab-study-file-');
    study(dir, '20251014-090001-bbbbbbbb', 'smoke');
    expect(studyFileOf(dir)).toBe(join(dir, 'studies', '20251014-090001-bbbbbbbb', 'study.json'));
  });
});
