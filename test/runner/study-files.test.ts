import { describe, expect, it } from 'vitest';
import {
  chooseLatestUnfinished,
  chooseStudyFolder,
  mergeRunRecords,
  readStudyRecords,
  StudyWrites,
} from '../../lib/runner/study-files.ts';

interface Run {
  readonly id: string;
  readonly finishedAt: string;
  readonly from: string;
}
const run = (id: string, finishedAt: string, from: string): Run => ({ id, finishedAt, from });

describe('chooseLatestUnfinished', () => {
  const rule = {
    newId: 'new-id',
    resumeWhy: (latest: { id: string }) => `resume ${latest.id}`,
    noneWhy: 'none resumable',
  };

  it('starts a new study on lab run --new without looking at the stored ones', () => {
    const choice = chooseLatestUnfinished({
      ...rule,
      fresh: true,
      resumable: () => {
        throw new Error('a broken folder must not stop --new');
      },
    });
    expect(choice).toEqual({ kind: 'new', id: 'new-id', why: 'lab run --new asked for a fresh study' });
  });

  it('resumes the latest resumable study by start time, else starts a new one', () => {
    const resumable = [
      { id: 'a', startedAt: '2025-10-14T09:00:00.000Z' },
      { id: 'b', startedAt: '2025-10-15T09:00:00.000Z' },
      { id: 'c', startedAt: '2025-10-13T09:00:00.000Z' },
    ];
    expect(chooseLatestUnfinished({ ...rule, fresh: false, resumable: () => resumable })).toEqual({
      kind: 'resume',
      id: 'b',
      why: 'resume b',
    });
    expect(chooseLatestUnfinished({ ...rule, fresh: false, resumable: () => [] })).toEqual({
      kind: 'new',
      id: 'new-id',
      why: 'none resumable',
    });
  });
});

describe('mergeRunRecords', () => {
  it("keeps the plan's runs, a run file replacing study.json's record only when it ended later", () => {
    const merged = mergeRunRecords(
      ['r1', 'r2', 'r3', 'r4'],
      [
        run('r2', '2025-10-14T10:00:00Z', 'study'),
        run('r1', '2025-10-14T10:00:00Z', 'study'),
        run('gone', '2025-10-14T10:00:00Z', 'study'),
      ],
      [
        run('r1', '2025-10-14T11:00:00Z', 'file'),
        run('r2', '2025-10-14T09:00:00Z', 'file'),
        run('r3', '2025-10-14T12:00:00Z', 'file'),
        run('other', '2025-10-14T12:00:00Z', 'file'),
      ],
    );
    // study.json's order first, then the runs only a file holds.
    expect([...merged.keys()]).toEqual(['r2', 'r1', 'r3']);
    expect(merged.get('r1')?.from).toBe('file');
    expect(merged.get('r2')?.from).toBe('study');
    expect(merged.get('r3')?.from).toBe('file');
  });
});

describe('study folder', () => {
  it('takes the --new request, says the unreadable studies and opens the chosen folder', async () => {
    const said: string[] = [];
    const opened: string[] = [];
    let freshSeen: boolean | undefined;
    const { choice, files } = await chooseStudyFolder(
      {
        takeNewStudyRequest: async () => true,
        listStudies: async () => ({ studies: ['s1'], unreadable: ['studies/x: no study.json'] }),
        study: (id) => {
          opened.push(id);
          return { id };
        },
      },
      (stored, fresh) => {
        freshSeen = fresh;
        expect(stored).toEqual(['s1']);
        return { kind: 'new', id: '20251014-090000-abcdef12', why: 'fresh' };
      },
      async (line) => void said.push(line),
    );
    expect(freshSeen).toBe(true);
    expect(choice.id).toBe('20251014-090000-abcdef12');
    expect(files).toEqual({ id: '20251014-090000-abcdef12' });
    expect(opened).toEqual(['20251014-090000-abcdef12']);
    expect(said).toEqual(['not a study to resume: studies/x: no study.json']);
  });

  it("reads a resumed study's records with its run files, and nothing for a new study", async () => {
    const said: string[] = [];
    const say = async (line: string) => void said.push(line);
    const folder = {
      readStudy: async () => ({ runs: [run('r1', '2025-10-14T10:00:00Z', 'study')] }),
      readRuns: async () => ({
        runs: [run('r1', '2025-10-14T11:00:00Z', 'file')],
        unreadable: ['runs/r2.json: not JSON'],
      }),
    };
    const resumed = await readStudyRecords(folder, { kind: 'resume', id: 'x', why: '' }, ['r1', 'r2'], say);
    expect(resumed.existing?.runs).toHaveLength(1);
    expect(resumed.records.get('r1')?.from).toBe('file');
    expect(said).toEqual(['run record not read: runs/r2.json: not JSON']);

    const untouched = {
      readStudy: async () => expect.unreachable('a new study reads no study.json'),
      readRuns: async () => expect.unreachable('a new study reads no run files'),
    };
    const fresh = await readStudyRecords(untouched, { kind: 'new', id: 'y', why: '' }, ['r1'], say);
    expect(fresh.existing).toBeUndefined();
    expect(fresh.records.size).toBe(0);
  });
});

describe('StudyWrites', () => {
  it('runs one write at a time, in call order, and a failed write does not stop the next', async () => {
    const writes = new StudyWrites();
    const events: string[] = [];
    let release: () => void = () => {};
    const first = writes.write(async () => {
      events.push('first starts');
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      events.push('first ends');
      throw new Error('disk full');
    });
    const second = writes.write(async () => {
      events.push('second starts');
      return 2;
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(events).toEqual(['first starts']);
    release();
    await expect(first).rejects.toThrow('disk full');
    await expect(second).resolves.toBe(2);
    expect(events).toEqual(['first starts', 'first ends', 'second starts']);
  });
});
