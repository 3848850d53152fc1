import { describe, expect, it } from 'vitest';
import { collectPreciseScorerEvidence, preciseScorerEvidence } from '../../lib/study/precise-evidence.ts';

const json = (scores: Record<string, number>) =>
  JSON.stringify({
    level: 'Level(-4)',
    logger: 'precise-prefix-cache-scorer',
    msg: 'Got pod scores',
    scores_count: Object.keys(scores).length,
    scores,
    target_model: 'qwen3',
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
  });

  it('look-ups that never found a block: the hashes never matched', () => {
    const evidence = preciseScorerEvidence([json({}), json({})].join('\n'));
    expect(evidence.verdict).toBe('never-matched');
    expect(evidence.message).toMatch(/^2 look-up\(s\), none found a block/);
  });

  it('no scores line at all (EPP below -v=4): not observable, never matched by default', () => {
    expect(preciseScorerEvidence('{"msg":"Starting"}\n').verdict).toBe('not-observable');
  });

  it('reads the console encoding too, and is collected through a narrow log reader', async () => {
    const line =
      '2025-10-01T10:00:00Z DEBUG precise-prefix-cache-scorer Got pod scores {"scores_count": 1, "scores": {"10.42.0.8:8000": 96}}';
    const evidence = await collectPreciseScorerEvidence(
      { readEppLog: async () => line },
      '2025-10-01T09:59:00Z',
    );
    expect(evidence.verdict).toBe('matched');
    expect(evidence.podsWithBlocks).toEqual({ '10.42.0.8:8000': 1 });
  });
});
