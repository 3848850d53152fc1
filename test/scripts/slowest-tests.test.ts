import { describe, expect, it } from 'vitest';
import {
  fileWeights,
  formatSlowest,
  slowestFiles,
  type VitestJsonReport,
} from '../../scripts/slowest-tests.ts';
import { longestFirst, median } from '../sequencer.ts';

const passed = { status: 'passed' };
const report: VitestJsonReport = {
  testResults: Array.from({ length: 12 }, (_, i) => ({
    name: `/repo/test/file-${String(i).padStart(2, '0')}.test.ts`,
    startTime: 1_000,
    endTime: 1_000 + (i + 1) * 500,
    status: 'passed',
    assertionResults: i === 11 ? [passed, { status: 'failed' }] : [passed],
  })),
};

describe('scripts/slowest-tests.ts', () => {
  it('lists the ten slowest files, slowest first, relative to the repository', () => {
    const slowest = slowestFiles(report, '/repo');
    expect(slowest).toHaveLength(10);
    expect(slowest[0]).toEqual({ file: 'test/file-11.test.ts', seconds: 6, tests: 2, failed: 1 });
    expect(slowest.map((f) => f.seconds)).toEqual([6, 5.5, 5, 4.5, 4, 3.5, 3, 2.5, 2, 1.5]);
  });

  it('prints one line per file and the share of the time they take', () => {
    const text = formatSlowest(slowestFiles(report, '/repo', 2), report);
    expect(text.split('\n')).toEqual([
      'The 2 slowest of 12 test files (29% of 39.0 s of file time):',
      '    6.0 s  test/file-11.test.ts  2 test(s), 1 failed',
      '    5.5 s  test/file-10.test.ts  1 test(s)',
      '',
    ]);
  });
});

describe('test/file-weights.json and the order of the files', () => {
  it('weighs every file of a report in seconds, by path', () => {
    const weights = fileWeights(report, '/repo');
    expect(Object.keys(weights)).toHaveLength(12);
    expect(weights['test/file-00.test.ts']).toBe(0.5);
    expect(weights['test/file-11.test.ts']).toBe(6);
  });

  it('runs the heaviest files first; an unweighed file counts the median', () => {
    const files = ['a', 'b', 'c', 'd', 'e'].map((name) => ({ moduleId: `/repo/test/${name}.test.ts` }));
    const weights: Record<string, number> = { a: 1, b: 30, c: 2, d: 30 };
    const order = longestFirst(files, (f) => weights[f.moduleId.at(-9) ?? ''], median([1, 2, 30, 30]));
    // e counts 16 s: after the two 30 s files (tied, by path), before the 2 s and 1 s ones.
    expect(order.map((f) => f.moduleId.at(-9))).toEqual(['b', 'd', 'e', 'c', 'a']);
  });
});
