import { describe, expect, it } from 'vitest';
import { StudyLog } from '../../lib/runner/study-log.ts';
import { FakeClock } from './fakes.ts';

describe('StudyLog', () => {
  it('prints every line at once and keeps lines said before the study folder for its log, first and stamped when said', async () => {
    const clock = new FakeClock();
    const printed: string[] = [];
    const file: string[] = [];
    const log = new StudyLog(clock, (line) => printed.push(line));

    await log.say('not a study to resume: x');
    await clock.sleep(1_000);
    await log.say('second');
    expect(printed).toEqual(['not a study to resume: x', 'second']);
    expect(log.message).toBe('second');

    log.attach({ appendLog: async (line) => void file.push(line) });
    expect(file).toEqual([]);
    await clock.sleep(1_000);
    await log.say('starting study');
    expect(file).toEqual([
      '2025-10-14T09:00:00.000Z not a study to resume: x',
      '2025-10-14T09:00:01.000Z second',
      '2025-10-14T09:00:02.000Z starting study',
    ]);
    await log.say('run 1/2');
    expect(file).toHaveLength(4);
    expect(file[3]).toBe('2025-10-14T09:00:02.000Z run 1/2');
    expect(log.message).toBe('run 1/2');
  });
});
