import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configReference, referenceBlock, withReference } from '../../lib/config/reference.ts';

describe('configuration reference', () => {
  it('in docs/configuration.md matches the schema (run npm run docs:config after changing the schema)', () => {
    const page = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    expect(page).toContain(referenceBlock());
  });

  it('lists every setting with its default and what is allowed', () => {
    const table = configReference();
    expect(table).toContain('| `vllm.blockSize` | `16` | 1, 8, 16, 32, 64, 128 |');
    expect(table).toContain('| `instance.maxLifetimeHours` | `8` | number > 0, <= 72 |');
    expect(table).toContain(
      '| `router.variants[].policy` |  | round_robin, random, cache_aware, power_of_two, consistent_hash |',
    );
    expect(table).toContain(
      '| `study.optionalArms` | `[]` | list of epp-prefix3, ai-gateway, llmd-precise |',
    );
  });

  it('replaces only the block between the markers', () => {
    const before = `intro\n${referenceBlock().replace('| setting', '| stale')}\noutro`;
    expect(withReference(before)).toBe(`intro\n${referenceBlock()}\noutro`);
    expect(() => withReference('no markers')).toThrow('README has no config reference markers');
  });
});
