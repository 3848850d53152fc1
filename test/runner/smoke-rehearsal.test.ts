import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import {
  clientResultPath,
  GPU_TOPOLOGY_FILE,
  GPU_UUIDS_FILE,
  HOST_FILE,
  NEW_STUDY_REQUEST_FILE,
  REDO_INVALID_REQUEST_FILE,
  SMOKE_CHECKLIST_TEXT_FILE,
  SMOKE_REQUEST_FILE,
  studyDir,
} from '../../lib/runner/layout.ts';
import type { StudyStatus } from '../../lib/runner/status.ts';
import { StudyStopError } from '../../lib/runner/study-stop.ts';
import { findRun, studyPlan } from '../../lib/study/plan.ts';
import type { StudyRecord } from '../../lib/study/results.ts';
import { smokePlan } from '../../lib/study/smoke.ts';
import type { SmokeChecklist } from '../../lib/study/smoke-checklist.ts';
import { estimateSmoke, SMOKE_TARGET_MINUTES } from '../../lib/study/smoke-estimate.ts';
import { sourceBlockOnPage } from '../../scripts/examples.ts';
import { filesUnder, layoutProblems } from '../docs/file-layout.ts';
import { stopLabs } from './rehearsal-kit.ts';
import {
  BROKEN_ARM as BROKEN,
  checklistExcerpt,
  FULL_RUNS,
  rehearseBrokenSmoke,
  smokeLab,
  startSmokeOrFull as start,
} from './smoke-example.ts';

/**
 * The smoke study rehearsed (docs/first-run.md): the real runner against the fake cluster, with the
 * default lab and one arm broken on purpose, an EPP that never sees a prompt (its prefix indexer
 * stays at 0). The checklist names that arm's failing proof with its evidence and fix and passes
 * every other arm; the full study stops on the same break before its first long run. The lab and
 * the break are test/runner/smoke-example.ts's, whose checklist docs/first-run.md shows.
 */

afterEach(stopLabs);

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

function failedProofs(checklist: SmokeChecklist): string[] {
  return checklist.entries.flatMap((e) =>
    e.checks.filter((c) => c.status === 'fail').map((c) => `${e.subject}: ${c.proof}`),
  );
}

describe('the smoke study of the default lab, one arm broken on purpose', () => {
  it('lists the broken arm’s failing proof with its evidence and fix, and passes every other arm', async () => {
    const { lab, smoke, done, minutes } = await rehearseBrokenSmoke();

    expect(done.kind).toBe('smoke');
    const checklist = (done as { outcome: { checklist: SmokeChecklist } }).outcome.checklist;
    expect(checklist.passed).toBe(false);
    // Every run of the smoke plan has its line: the replicas directly, each arm, the ShareGPT run.
    expect(checklist.entries.map((e) => e.runId)).toEqual(smoke.runs.map((r) => r.id));
    expect(failedProofs(checklist)).toEqual([`${BROKEN}: prompt`]);
    const broken = checklist.entries.find((e) => e.subject === BROKEN);
    const prompt = broken?.checks.find((c) => c.proof === 'prompt');
    expect(prompt?.evidence).toContain('inference_extension_prefix_indexer_size is 0 after the run');
    expect(prompt?.fix).toContain('prefix-cache-scorer');
    // The broken arm's other proofs still ran and passed: one proof hides no other.
    for (const proof of ['ready', 'preflight', 'reset', 'staging', 'metrics', 'result', 'ignore-eos'])
      expect(broken?.checks.find((c) => c.proof === proof)?.status, proof).toBe('pass');
    // Chat arms and arms without a prompt index are not judged on it; nothing is invented.
    const chat = checklist.entries.find((e) => e.subject === 'router-cache-aware');
    expect(chat?.checks.find((c) => c.proof === 'prompt')?.status).toBe('not-applicable');
    // Every arm after the first went through a staged client and its gate.
    for (const entry of checklist.entries.slice(1))
      expect(entry.checks.find((c) => c.proof === 'staging')?.status, entry.runId).toBe('pass');

    // Written in the study folder and in status.json, where lab status prints it.
    const text = readFileSync(join(lab.dir, studyDir(checklist.studyId), SMOKE_CHECKLIST_TEXT_FILE), 'utf8');
    expect(text).toContain(`${BROKEN} (smoke-arm-${BROKEN}-prefix): 1 failed`);
    expect(text).toMatch(
      /FAIL\s+front end saw the prompts: front end did not see the prompts \(GAIE EPP v1\.0\.1\): inference_extension_prefix_indexer_size is 0/,
    );
    expect(text).toMatch(/fix: the Endpoint Picker indexed nothing/);
    const status = readJson<StudyStatus>(join(lab.dir, 'status.json'));
    expect(status.profile).toBe('smoke');
    expect(status.checklist?.passed).toBe(false);
    // The smoke study took minutes, not the study's hours; the request was taken.
    expect(minutes).toBeLessThan(30);
    expect(existsSync(join(lab.dir, SMOKE_REQUEST_FILE))).toBe(false);

    // docs/first-run.md shows this checklist (scripts/example-sources.ts: smoke-checklist).
    expect(
      sourceBlockOnPage('docs/first-run.md', 'smoke-checklist'),
      'docs/first-run.md: the smoke checklist example is stale; run npm run docs:examples',
    ).toBe(checklistExcerpt(lab, checklist));

    // docs/runner.md's tree of the results folder is what this runner wrote. The request files are
    // taken, a Job's scratch output is moved into the study and host/ is the bootstrap's: those
    // the tree must show under layout.ts's names.
    const notWritten = [
      NEW_STUDY_REQUEST_FILE,
      REDO_INVALID_REQUEST_FILE,
      SMOKE_REQUEST_FILE,
      clientResultPath('<benchmark-id>', '<benchmark-id>.json'),
      GPU_UUIDS_FILE,
      GPU_TOPOLOGY_FILE,
      HOST_FILE,
    ];
    expect(layoutProblems('docs/runner.md', 'results', filesUnder(lab.dir), notWritten)).toEqual([]);
  }, 120_000);

  it('stops the full study on the same break before its first long run, recorded with the checklist', async () => {
    const { lab, smoke } = await smokeLab();
    lab.pickers.indexerSize[BROKEN] = 0;
    const error = await start(lab, smoke).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StudyStopError);

    const status = readJson<StudyStatus>(join(lab.dir, 'status.json'));
    expect(status.state).toBe('failed');
    expect(status.profile).toBeUndefined();
    expect(failedProofs(status.checklist as SmokeChecklist)).toEqual([`${BROKEN}: prompt`]);
    const study = readJson<StudyRecord>(join(lab.dir, studyDir(status.studyId as string), 'study.json'));
    // No run of the full study started: the stop came from the checks.
    expect(study.runs).toEqual([]);
    expect(lab.cluster.created.map((j) => j.metadata.name).every((n) => n.startsWith('bench-smoke-'))).toBe(
      true,
    );
    expect(study.metadata.checks).toMatchObject({ passed: false });
    expect(study.metadata.checks?.failures).toHaveLength(1);
    expect(study.metadata.stopped?.reason).toContain(
      `${BROKEN}: front end saw the prompts: front end did not see the prompts (GAIE EPP v1.0.1): inference_extension_prefix_indexer_size is 0 after the run`,
    );
    expect(study.metadata.stopped?.change).toContain('lab run resumes this study');
    expect(study.metadata.checks?.smokeStudyId).not.toBe(status.studyId);

    // Fixed, `lab run` resumes the same study: it checks every arm again, then runs.
    lab.pickers.indexerSize[BROKEN] = 4096;
    const again = await start(lab, smoke);
    expect(again.kind).toBe('full');
    const resumed = (again as { study: StudyRecord }).study;
    expect(resumed.metadata.studyId).toBe(status.studyId);
    expect(resumed.metadata.checks).toMatchObject({ passed: true, failures: [] });
    expect(resumed.metadata.checks?.smokeStudyId).not.toBe(study.metadata.checks?.smokeStudyId);
    expect(resumed.runs.every((r) => r.valid)).toBe(true);
  }, 180_000);

  it('lets the full study begin once every arm passes, keeping the smoke study apart', async () => {
    const { lab, smoke } = await smokeLab();
    const done = await start(lab, smoke);
    expect(done.kind).toBe('full');
    const study = (done as { study: StudyRecord }).study;
    expect(study.metadata.checks).toMatchObject({ passed: true, failures: [] });
    expect(study.runs.map((r) => [r.id, r.valid])).toEqual(FULL_RUNS.map((id) => [id, true]));
    // The smoke study is its own folder and is never chosen as the study to resume or report.
    expect(study.metadata.checks?.smokeStudyId).not.toBe(study.metadata.studyId);
    const smokeStudy = readJson<StudyRecord>(
      join(lab.dir, studyDir(study.metadata.checks?.smokeStudyId as string), 'study.json'),
    );
    expect(smokeStudy.metadata.profile).toBe('smoke');
    expect(smokeStudy.metadata.predictions).toBeUndefined();
  }, 120_000);
});

describe('study.profile: smoke', () => {
  it('runs the smoke study on the first start and the full study on the next (lab run)', async () => {
    const config = parseLabConfig({ study: { profile: 'smoke' } });
    const { lab, smoke } = await smokeLab(config);
    const first = await start(lab, smoke);
    expect(first.kind).toBe('smoke');
    expect((first as { outcome: { checklist: SmokeChecklist } }).outcome.checklist.passed).toBe(true);
    const second = await start(lab, smoke);
    expect(second.kind).toBe('full');
  }, 180_000);

  it('is checked: a profile that does not exist is named with the allowed values', () => {
    expect(() => parseLabConfig({ study: { profile: 'quick' } } as never)).toThrow(
      /study\.profile = "quick": allowed: full, smoke/,
    );
  });
});

describe('the smoke plan', () => {
  it('is the full study’s own runs with a tiny load: every arm once, a handful of requests each', () => {
    const config = defaultLabConfig();
    const plan = smokePlan(config);
    const full = studyPlan(config);
    const arms = new Set(full.runs.flatMap((r) => (r.arm ? [r.arm] : [])));
    expect(new Set(plan.runs.flatMap((r) => (r.arm ? [r.arm] : [])))).toEqual(arms);
    for (const run of plan.runs) {
      expect(run.id.startsWith('smoke-')).toBe(true);
      expect(run.benchmarks.reduce((n, b) => n + b.prompts, 0)).toBeLessThanOrEqual(8);
      // The same path as the full study's run of that arm: target, API, reset and front-end restart.
      const twin = findRun(full, run.id.slice('smoke-'.length));
      expect(run.reset).toEqual(twin.reset);
      expect(run.benchmarks.map((b) => [b.target, b.api])).toEqual(
        twin.benchmarks.map((b) => [b.target, b.api]),
      );
    }
  });

  it('takes at most 10 minutes after the bootstrap for the default lab, as lab plan estimates it', () => {
    const config = defaultLabConfig();
    const smoke = estimateSmoke(config, config.instance.pricePerHourUsd);
    expect(smoke.runs.map((r) => r.id)).toEqual(smokePlan(config).runs.map((r) => r.id));
    expect(smoke.totalSeconds).toBeLessThanOrEqual(SMOKE_TARGET_MINUTES * 60);
    expect(smoke.totalSeconds).toBeGreaterThan(60);
    expect(smoke.costUsd).toBeCloseTo((smoke.totalSeconds / 3600) * config.instance.pricePerHourUsd, 6);
  });
});
