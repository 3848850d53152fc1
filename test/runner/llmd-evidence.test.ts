import { afterEach, describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import type { RunRecord } from '../../lib/study/results.ts';
import { formatChecklist, type ProofCheck, smokeChecklist } from '../../lib/study/smoke-checklist.ts';
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

/** The smoke checklist's scorer proof of each run (lib/study/smoke-checklist.ts), judged from the records. */
function scorerChecks(runs: Map<string, RunRecord>): Map<string, ProofCheck | undefined> {
  const plan = studyPlan(config).runs.filter((run) => RUNS.includes(run.id));
  const checklist = smokeChecklist(config, plan, runs, '20251014-090000-00000000', new Date(0));
  return new Map(checklist.entries.map((e) => [e.runId, e.checks.find((c) => c.proof === 'scorer')]));
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
    // The smoke checklist's proof passes with the look-ups; the chat run has none to judge.
    const checks = scorerChecks(runs);
    expect(checks.get(RUNS[0])).toMatchObject({
      status: 'pass',
      evidence: expect.stringMatching(
        /^\d+ of 1025 look-ups found blocks \(10\.42\.0\.20 \d+, 10\.42\.0\.21 \d+\)$/,
      ),
    });
    expect(checks.get(RUNS[1])?.status).toBe('not-applicable');
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
    // The checklist fails the scorer proof alone, with the fix.
    const check = scorerChecks(runs).get(RUNS[0]);
    expect(check).toMatchObject({ status: 'fail', evidence: run.invalidReasons[0] });
    expect(check?.fix).toMatch(/block size, hash seed, hash algorithm/);
    const plan = studyPlan(config).runs.filter((r) => RUNS.includes(r.id));
    const entry = smokeChecklist(config, plan, runs, '20251014-090000-00000000', new Date(0)).entries.find(
      (e) => e.runId === RUNS[0],
    );
    expect(entry?.checks.filter((c) => c.status === 'fail').map((c) => c.proof)).toEqual(['scorer']);
  });

  it('not observable: an EPP below --v 4 logs no scores; the run stays valid with a warning', async () => {
    const runs = await llmdRuns({ verbosity: 1 });
    const run = runs.get('arm-llmd-precise-completions-prefix') as RunRecord;
    expect(run.valid, run.invalidReasons.join()).toBe(true);
    expect(run.scorerEvidence?.verdict).toBe('not-observable');
    expect(run.warnings).toEqual([`llm-d's precise scorer: ${run.scorerEvidence?.message}`]);
    expect(run.warnings?.[0]).toMatch(/--v 4/);
    // A warning-level entry with its fix: not a pass, not a failure.
    const check = scorerChecks(runs).get(RUNS[0]);
    expect(check).toMatchObject({
      status: 'warn',
      evidence: `not observable: ${run.scorerEvidence?.message}`,
    });
    expect(check?.fix).toMatch(/--v 4/);
    const plan = studyPlan(config).runs.filter((r) => RUNS.includes(r.id));
    const checklist = smokeChecklist(config, plan, runs, '20251014-090000-00000000', new Date(0));
    expect(checklist.passed).toBe(true);
    expect(formatChecklist(checklist)).toContain(
      `${RUNS[0].replace('arm-', '').replace('-completions-prefix', '-completions')} (${RUNS[0]}): ok, 1 warning`,
    );
  });
});
