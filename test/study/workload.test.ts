import { describe, expect, it } from 'vitest';
import {
  cachePressure,
  evenSplit,
  lookedUpTokens,
  repeatsPerPrefix,
  upperBound,
  workingSetTokens,
} from '../../lib/study/workload.ts';

const published = { prefixLen: 2048, suffixLen: 128, chatTemplateTokens: 10, prefixes: 128, prompts: 1024 };

describe('workload arithmetic (docs/facts.md §4.1)', () => {
  it('computes the working set and the looked-up tokens of the published design', () => {
    expect(workingSetTokens(published)).toBe(262_144);
    expect(lookedUpTokens(published)).toBe(2186);
    expect(repeatsPerPrefix(published)).toBe(8);
  });

  it('gives the published bound: 7/8 x 2048/2186 = 82.0%', () => {
    expect(upperBound(published)).toBeCloseTo((7 / 8) * (2048 / 2186), 12);
    expect(upperBound(published) * 100).toBeCloseTo(82.0, 1);
  });

  it('follows the formula across the upper-bound sweep at 1,024 prompts', () => {
    const bound = (prefixes: number) => upperBound({ ...published, prefixes }) * 100;
    expect(bound(64)).toBeCloseTo((15 / 16) * (2048 / 2186) * 100, 10);
    expect(bound(16)).toBeCloseTo((63 / 64) * (2048 / 2186) * 100, 10);
    expect(bound(8)).toBeCloseTo((127 / 128) * (2048 / 2186) * 100, 10);
    // Fewer prefixes repeat more often, so the bound only grows.
    expect(bound(128)).toBeLessThan(bound(64));
    expect(bound(16)).toBeLessThan(bound(8));
  });

  it('is zero when no prefix repeats', () => {
    expect(upperBound({ ...published, prefixes: 1024 })).toBe(0);
  });

  it('tells when routing can matter', () => {
    expect(cachePressure(published, 2, 163_472)).toEqual({
      workingSetTokens: 262_144,
      kvCacheTokensPerReplica: 163_472,
      fitsOneReplica: false,
      partitionFits: true,
      routingCanMatter: true,
    });
    // The manual lab's first try: everything fits everywhere.
    expect(cachePressure({ prefixes: 8, prefixLen: 512 }, 2, 163_472)).toMatchObject({
      fitsOneReplica: true,
      routingCanMatter: false,
    });
    expect(cachePressure({ prefixes: 256, prefixLen: 2048 }, 2, 163_472)).toMatchObject({
      partitionFits: false,
      routingCanMatter: false,
    });
    expect(cachePressure(published, 1, 163_472).routingCanMatter).toBe(false);
  });

  it('splits evenly, larger shares first', () => {
    expect(evenSplit(128, 2)).toEqual([64, 64]);
    expect(evenSplit(128, 3)).toEqual([43, 43, 42]);
    expect(evenSplit(32, 3)).toEqual([11, 11, 10]);
    expect(evenSplit(5, 5)).toEqual([1, 1, 1, 1, 1]);
  });
});
