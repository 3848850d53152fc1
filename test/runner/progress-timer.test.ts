import { describe, expect, it } from 'vitest';
import { ProgressTimer } from '../../lib/runner/status.ts';

describe('ProgressTimer', () => {
  it('makes a line due every period after the last one, a phase line restarting the wait', () => {
    const timer = new ProgressTimer(60_000);
    expect(timer.due(60_000)).toBe(true);
    expect(timer.due(100_000)).toBe(false);
    expect(timer.due(120_000)).toBe(true);
    timer.logged(150_000);
    expect(timer.due(180_000)).toBe(false);
    expect(timer.due(209_999)).toBe(false);
    expect(timer.due(210_000)).toBe(true);
  });
});
