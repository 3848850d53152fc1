import { describe, expect, it } from 'vitest';
import { studyEtaMs, studyStatus } from '../../lib/runner/status.ts';

const base = {
  startedAt: new Date('2026-11-30T12:00:00Z'),
  now: new Date('2026-11-30T12:10:00Z'),
  runIds: ['a', 'b', 'c', 'd'],
  message: 'run 3/4 c: waiting for job',
};

describe('status.json', () => {
  it('counts records, lists the invalid ones in plan order and shows the run in progress with the ETA', () => {
    const status = studyStatus({
      ...base,
      state: 'running',
      studyId: 's1',
      studyStartedAt: '2026-11-30T11:00:00Z',
      records: new Map([
        ['b', { valid: false }],
        ['a', { valid: true }],
      ]),
      active: {
        index: 3,
        run: { id: 'c' },
        phase: 'waiting for job',
        startedAt: new Date('2026-11-30T12:08:00Z'),
      },
      elapsedMs: 120_400,
      etaMs: 300_000,
    });
    expect(status).toEqual({
      state: 'running',
      studyId: 's1',
      studyStartedAt: '2026-11-30T11:00:00Z',
      startedAt: '2026-11-30T12:00:00.000Z',
      updatedAt: '2026-11-30T12:10:00.000Z',
      totalRuns: 4,
      recordedRuns: 2,
      validRuns: 1,
      invalidRuns: 1,
      invalidRunIds: ['b'],
      current: {
        index: 3,
        id: 'c',
        phase: 'waiting for job',
        startedAt: '2026-11-30T12:08:00.000Z',
        elapsedSeconds: 120,
      },
      etaSeconds: 300,
      message: base.message,
    });
  });

  it('drops the run in progress and the ETA once the study is over, and keeps the error', () => {
    const status = studyStatus({
      ...base,
      state: 'failed',
      records: new Map(),
      active: { index: 1, run: { id: 'a' }, phase: 'resetting', startedAt: base.startedAt },
      elapsedMs: 0,
      etaMs: 60_000,
      error: 'the model server never became ready',
    });
    expect(status.current).toEqual({
      index: 1,
      id: 'a',
      phase: 'resetting',
      startedAt: '2026-11-30T12:00:00.000Z',
      elapsedSeconds: 0,
    });
    expect(status.etaSeconds).toBeUndefined();
    expect(status.error).toBe('the model server never became ready');
    expect(
      studyStatus({ ...base, state: 'finished', records: new Map(), elapsedMs: 0, etaMs: 0 }).current,
    ).toBeUndefined();
  });

  it('estimates the time left from the mean finished run', () => {
    expect(studyEtaMs([], 0, 3)).toBeUndefined();
    expect(studyEtaMs([60_000, 120_000], 30_000, 2)).toBe(60_000 + 180_000);
    expect(studyEtaMs([60_000], 90_000, 0)).toBe(0);
  });
});
