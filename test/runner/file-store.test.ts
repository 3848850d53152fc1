import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileResultStore, inFolder, writeAtomic } from '../../lib/runner/file-store.ts';
import { tempDir } from '../temp.ts';

const STUDY = '20251014-090000-e8fe0790';

describe('the results folder makes a folder only when a write finds it missing', () => {
  it('writes through a temporary file into a folder that does not exist yet, and leaves no temporary file', async () => {
    const root = tempDir('lab-store-');
    const path = join(root, 'studies', STUDY, 'runs', 'bound-p128.json');
    await writeAtomic(path, '{"a":1}\n');
    await writeAtomic(path, '{"a":2}\n');
    expect(readFileSync(path, 'utf8')).toBe('{"a":2}\n');
    expect(readdirSync(join(root, 'studies', STUDY, 'runs'))).toEqual(['bound-p128.json']);
  });

  it('appends to runner.log and writes status.json again after their folders were removed', async () => {
    const root = tempDir('lab-store-');
    const store = new FileResultStore(root);
    await store.study(STUDY).appendLog('one');
    rmSync(join(root, 'studies'), { recursive: true });
    await store.study(STUDY).appendLog('two');
    expect(readFileSync(join(root, 'studies', STUDY, 'runner.log'), 'utf8')).toBe('two\n');
    await store.writeStatus({ state: 'running' } as never);
    rmSync(root, { recursive: true });
    await store.writeStatus({ state: 'finished' } as never);
    expect(JSON.parse(readFileSync(join(root, 'status.json'), 'utf8'))).toEqual({ state: 'finished' });
  });

  it('passes on an error other than a missing folder, without making anything', async () => {
    const root = tempDir('lab-store-');
    const blocker = join(root, 'studies');
    writeFileSync(blocker, 'a file where the folder should be');
    await expect(writeAtomic(join(blocker, STUDY, 'study.json'), '{}')).rejects.toThrow(/ENOTDIR/);
    let calls = 0;
    const refused = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' });
    expect(() =>
      inFolder(join(root, 'x', 'y.json'), () => {
        calls++;
        throw refused;
      }),
    ).toThrow(refused);
    expect(calls).toBe(1);
    expect(existsSync(join(root, 'x'))).toBe(false);
  });
});
