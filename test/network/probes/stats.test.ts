import { describe, expect, it } from 'vitest';
import { gapsBetween, msDistribution, quantileOfSorted, roundMs } from '../../../lib/network/probes/stats.ts';

describe('probe statistics', () => {
  it('interpolates quantiles between the closest ranks (type 7)', () => {
    const sorted = [10, 20, 30, 40];
    expect(quantileOfSorted(sorted, 0)).toBe(10);
    expect(quantileOfSorted(sorted, 0.5)).toBe(25);
    expect(quantileOfSorted(sorted, 0.9)).toBeCloseTo(37);
    expect(quantileOfSorted(sorted, 1)).toBe(40);
    expect(quantileOfSorted([7], 0.99)).toBe(7);
  });

  it('refuses an empty list and a quantile outside [0, 1]', () => {
    expect(() => quantileOfSorted([], 0.5)).toThrow('quantile of an empty list');
    expect(() => quantileOfSorted([1], 1.5)).toThrow('quantile must be within [0, 1], got 1.5');
  });

  it('summarizes durations in ms, unsorted input, rounded to the microsecond', () => {
    const values = Array.from({ length: 100 }, (_, i) => 100 - i); // 100 .. 1
    expect(msDistribution(values)).toEqual({
      count: 100,
      minMs: 1,
      meanMs: 50.5,
      p50Ms: 50.5,
      p90Ms: 90.1,
      p99Ms: 99.01,
      maxMs: 100,
    });
    expect(msDistribution([])).toBeNull();
    expect(roundMs(1.23456789)).toBe(1.235);
  });

  it('gives n - 1 gaps for n times', () => {
    expect(gapsBetween([0, 20, 41, 60])).toEqual([20, 21, 19]);
    expect(gapsBetween([5])).toEqual([]);
  });
});
