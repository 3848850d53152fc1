import { describe, expect, it } from 'vitest';
import { studyClockLines } from '../../lib/control/study-clock.ts';
import type { StudyStatus } from '../../lib/runner/status.ts';

const now = new Date('2025-10-14T10:30:00.000Z');
const status: StudyStatus = {
  state: 'running',
  startedAt: '2025-10-14T09:00:00.000Z',
  updatedAt: '2025-10-14T10:29:55.000Z',
  totalRuns: 27,
  recordedRuns: 9,
  validRuns: 7,
  invalidRuns: 2,
  message: '',
};

describe('studyClockLines', () => {
  it('says nothing that status.json and the host do not tell', () => {
    expect(studyClockLines(status, { pricePerHourUsd: 4.6, maxLifetimeHours: 8 }, now)).toEqual([]);
  });

  it('names the study, its invalid runs, the cost so far and the shutdown time', () => {
    const lines = studyClockLines(
      { ...status, studyId: '20251014-090000-3f2a9c1e', invalidRunIds: ['bound-p64', 'partition'] },
      { pricePerHourUsd: 4.6, maxLifetimeHours: 8, launchedAt: new Date('2025-10-14T08:30:00.000Z') },
      now,
    );
    expect(lines).toEqual([
      'study:     20251014-090000-3f2a9c1e (results in studies/20251014-090000-3f2a9c1e/)',
      'invalid:   bound-p64, partition',
      'cost:      about 9.20 USD so far (instance up 2h00m00s at 4.6 USD/h)',
      'shutdown:  2025-10-14T16:30:00.000Z at the latest (instance.maxLifetimeHours 8), in 6h00m00s',
    ]);
  });

  it('says the shutdown is due once the lifetime is over', () => {
    const [, shutdown] = studyClockLines(
      status,
      { pricePerHourUsd: 1, maxLifetimeHours: 1, launchedAt: new Date('2025-10-14T08:00:00.000Z') },
      now,
    );
    expect(shutdown).toBe(
      'shutdown:  2025-10-14T09:00:00.000Z at the latest (instance.maxLifetimeHours 1), due now',
    );
  });
});
