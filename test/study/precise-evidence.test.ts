import { describe, expect, it } from 'vitest';
import {
  collectPreciseScorerEvidence,
  preciseScorerEvidence,
  preciseScorerReasons,
  preciseScorerWarnings,
} from '../../lib/study/precise-evidence.ts';

/** The line as llm-d-inference-scheduler v0.3.2 logs it with `--zap-encoder json` (docs/facts.md §3.7). */
const json = (scores: Record<string, number> | null) =>
  JSON.stringify({
    level: 'LEVEL(-4)',
    ts: '2025-10-14T09:03:00.123Z',
    caller: 'scorer/precise_prefix_cache.go:129',
    logger: 'precise-prefix-cache-scorer/precise-prefix-cache-scorer',
    msg: 'Got pod scores',
    'x-request-id': 'f3a1',
    scores,
  });

describe('llm-d precise scorer evidence', () => {
  it('a look-up that found blocks for a pod is evidence; look-ups and admissions alone are not', () => {
    const log = [
      '{"level":"info","msg":"kvcache_index lookups"}',
      json({}),
      json({ '10.42.0.7': 128 }),
      json({ '10.42.0.7': 64, '10.42.0.8': 128 }),
    ].join('\n');
    const evidence = preciseScorerEvidence(log);
    expect(evidence.verdict).toBe('matched');
    expect(evidence).toMatchObject({
      lookups: 3,
      lookupsWithBlocks: 2,
      podsWithBlocks: { '10.42.0.7': 2, '10.42.0.8': 1 },
    });
    expect(preciseScorerReasons(evidence)).toEqual([]);
    expect(preciseScorerWarnings(evidence)).toEqual([]);
  });

  it('look-ups that never found a block (or a prompt shorter than a block: null) make the run invalid', () => {
    const evidence = preciseScorerEvidence([json({}), json(null)].join('\n'));
    expect(evidence.verdict).toBe('never-matched');
    expect(evidence.message).toMatch(/^2 look-up\(s\), none found a block/);
    expect(preciseScorerReasons(evidence)).toEqual([
      `llm-d's precise scorer never matched a prefix: ${evidence.message}`,
    ]);
  });

  it('no scores line at all (EPP below --v 4): not observable, a warning, never a match', () => {
    const evidence = preciseScorerEvidence(
      '{"msg":"Starting"}\n{"msg":"Failed to get pod scores","error":"tokenizer"}\n',
    );
    expect(evidence.verdict).toBe('not-observable');
    expect(preciseScorerReasons(evidence)).toEqual([]);
    expect(preciseScorerWarnings(evidence)[0]).toMatch(/--v 4/);
  });

  it('reads the console encoding too, and is collected through a narrow log reader', async () => {
    const line =
      '2025-10-01T10:00:00Z\tLEVEL(-4)\tprecise-prefix-cache-scorer\tscorer/precise_prefix_cache.go:129\tGot pod scores\t{"x-request-id": "f3a1", "scores": {"10.42.0.8": 96}}';
    const evidence = await collectPreciseScorerEvidence(
      { readEppLog: async () => `${line}\n${line.replace('96', '0')}` },
      '2025-10-01T09:59:00Z',
    );
    expect(evidence.verdict).toBe('matched');
    expect(evidence.lookups).toBe(2);
    expect(evidence.podsWithBlocks).toEqual({ '10.42.0.8': 1 });
  });
});
