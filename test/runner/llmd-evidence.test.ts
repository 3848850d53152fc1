import { afterEach, describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import type { RunRecord } from '../../lib/study/results.ts';
import type { FakeEppScorer } from './fake-epp.ts';
import { runIn, startLab, stopLabs } from './rehearsal-kit.ts';

/**
 * After an llm-d prefix run over /v1/completions the runner reads the EPP pod's log since the run's
 * load started: its precise scorer's "Got pod scores" lines (docs/facts.md §3.7) show whether a
 * look-up ever found blocks on a pod.
 */

afterEach(stopLabs);

const config = parseLabConfig({ study: { optionalArms: ['llmd-precise'] } });
const RUNS = ['arm-llmd-precise-completions-prefix', 'arm-llmd-precise-prefix'];

async function llmdRuns(eppScorer?: FakeEppScorer): Promise<Map<string, RunRecord>> {
  const lab = await startLab({ config, runs: RUNS, cluster: { hitRate: () => 0.7, eppScorer } });
  const study = await runIn(lab);
  return new Map(study.runs.map((run) => [run.id, run]));
}

describe('rehearsal: llm-d’s precise scorer really matched', () => {
  it('matched: the EPP the chart deploys (--v 4) logs look-ups that found blocks; the run is valid', async () => {
    const runs = await llmdRuns();
    const run = runs.get('arm-llmd-precise-completions-prefix') as RunRecord;
    expect(run.valid, run.invalidReasons.join()).toBe(true);
    expect(run.warnings).toBeUndefined();
    // 1,024 prompts and the client's test request, 70% of them hits, split over two replicas.
    expect(run.scorerEvidence).toMatchObject({ verdict: 'matched', lookups: 1025 });
    expect(run.scorerEvidence?.lookupsWithBlocks).toBeGreaterThan(700);
    expect(Object.keys(run.scorerEvidence?.podsWithBlocks ?? {})).toEqual(['10.42.0.20', '10.42.0.21']);
    // Chat runs are prompt-blind controls (docs/facts.md §3.4): their scores are not judged.
    expect(runs.get('arm-llmd-precise-prefix')?.scorerEvidence).toBeUndefined();
  });

  it('not matched: look-ups that never found a block make the run invalid', async () => {
    const runs = await llmdRuns({ hashesMatch: false });
    const run = runs.get('arm-llmd-precise-completions-prefix') as RunRecord;
    expect(run.valid).toBe(false);
    expect(run.scorerEvidence?.verdict).toBe('never-matched');
    expect(run.invalidReasons).toEqual([
      "llm-d's precise scorer never matched a prefix: 1025 look-up(s), none found a block on any pod: the scorer's block hashes never equalled the replicas' (block size, hash seed, hash algorithm or the KV-event topic's model name differ)",
    ]);
    expect(runs.get('arm-llmd-precise-prefix')?.valid).toBe(true);
  });

  it('not observable: an EPP below --v 4 logs no scores; the run stays valid with a warning', async () => {
    const runs = await llmdRuns({ verbosity: 1 });
    const run = runs.get('arm-llmd-precise-completions-prefix') as RunRecord;
    expect(run.valid, run.invalidReasons.join()).toBe(true);
    expect(run.scorerEvidence?.verdict).toBe('not-observable');
    expect(run.warnings).toEqual([`llm-d's precise scorer: ${run.scorerEvidence?.message}`]);
    expect(run.warnings?.[0]).toMatch(/--v 4/);
  });
});
