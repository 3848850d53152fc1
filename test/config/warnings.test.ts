import { describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import { configWarnings } from '../../lib/config/warnings.ts';

const warningsFor = (overrides: object) => configWarnings(parseLabConfig(overrides));

describe('configWarnings (docs/facts.md §4.1)', () => {
  it('has nothing to say about the published design: 128 x 2,048 overflows one replica, a 2-way split fits', () => {
    expect(warningsFor({})).toEqual([]);
  });

  it("warns when the working set fits in one replica's cache (the manual lab's first try, 8 x 512)", () => {
    expect(warningsFor({ workload: { prefixes: 8, prefixLen: 512 } })).toEqual([
      "workload: the working set (8 prefixes x 512 tokens = 4,096 tokens) fits in one replica's cache (163,472 KV cache tokens per replica): every prefix stays cached everywhere, so any routing gives the same hit rate and the study cannot tell routers apart. Raise workload.prefixes or workload.prefixLen.",
    ]);
  });

  it('warns when even a perfect partition would not fit', () => {
    const warnings = warningsFor({ workload: { prefixes: 256, prompts: 2048, prefixLen: 2048 } });
    expect(warnings).toEqual([
      'workload: even a perfect partition over 2 replicas does not fit (256 prefixes x 2048 tokens = 524,288 tokens; 163,472 KV cache tokens per replica): every policy must evict, so the study cannot show what routing could gain. Lower workload.prefixes or workload.prefixLen, or add replicas.',
    ]);
  });

  it('judges the partition by the largest share when prefixes do not divide evenly', () => {
    // 3 replicas: 27 + 27 + 26 prefixes of 6,000 tokens; the largest share (162,000) still fits.
    const fits = {
      vllm: { replicas: 3 },
      workload: {
        prefixes: 80,
        prefixLen: 6000,
        suffixLen: 64,
        outputLen: 64,
        prompts: 640,
        partitionSeeds: [1, 2, 3],
      },
    };
    expect(warningsFor(fits)).toEqual([]);
    // 28 + 27 + 27 prefixes: the largest share (168,000 tokens) overflows.
    const tooBig = {
      ...fits,
      workload: { ...fits.workload, prefixes: 82, prompts: 656 },
      study: { boundSweepPrefixes: [8] },
    };
    expect(warningsFor(tooBig)[0]).toContain('even a perfect partition over 3 replicas does not fit');
  });

  it('warns that one replica leaves nothing to route', () => {
    expect(warningsFor({ vllm: { replicas: 1 }, workload: { partitionSeeds: [42] } })).toEqual([
      'vllm.replicas is 1: there is nothing to route between; the arms will all measure the same replica.',
    ]);
  });
});
