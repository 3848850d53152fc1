import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StudyStatus } from '../../lib/runner/status.ts';
import { findRun, studyPlan } from '../../lib/study/plan.ts';
import type { RunRecord, StudyRecord } from '../../lib/study/results.ts';
import { tempDir } from '../temp.ts';
import {
  byId,
  config,
  plan,
  readJson,
  rehearsal,
  replicas,
  unstaged,
  useRehearsalServers,
} from './rehearsal-setup.ts';

/** Rehearsals of runners that stop and resume: interrupted studies, leftover Jobs, faults the runner survives, study-level stops. */

useRehearsalServers();

describe('rehearsal: an interrupted study resumes without repeating valid runs', () => {
  it('restarts at run 7', async () => {
    const first = rehearsal({ throwAtRun: plan.runs[6].id });
    await expect(first.run()).rejects.toThrow(/interrupted at arm-router-round-robin-prefix/);
    const status = readJson<StudyStatus>(join(first.dir, 'status.json'));
    expect(status).toMatchObject({ state: 'failed', recordedRuns: 6, validRuns: 6 });
    expect(status.error).toMatch(/interrupted/);
    expect(status.current?.id).toBe('arm-router-round-robin-prefix');
    const before = readJson<StudyRecord>(join(first.study(), 'study.json'));
    expect(before.runs.map((run) => run.id)).toEqual(plan.runs.slice(0, 6).map((run) => run.id));
    expect(first.cluster.created).toHaveLength(7); // six runs, the partition with two clients

    const second = rehearsal({ dir: first.dir });
    const study = await second.run();
    const expectedJobs = plan.runs
      .slice(6)
      .flatMap((run) => run.benchmarks.map((spec) => `bench-${spec.id}`));
    expect(second.cluster.created.map((j) => j.metadata.name)).toEqual(expectedJobs);
    expect(study.runs).toHaveLength(27);
    expect(study.runs.every((run) => run.valid)).toBe(true);
    expect(study.runs.slice(0, 6)).toEqual(before.runs);
    expect(study.metadata.startedAt).toBe(before.metadata.startedAt);
    expect(second.lines).toContain('run 1/27 bound-p128: valid record exists, skipped');
    expect(second.study()).toBe(first.study());
    expect(second.lines.some((l) => l.startsWith(`resuming study ${before.metadata.studyId}`))).toBe(true);
  });

  it('starts a study of its own for a different configuration, leaving the earlier one untouched', async () => {
    // The earlier study is unfinished (its runner stopped at its second run): only its
    // configuration keeps the new runner from resuming it.
    const first = rehearsal({ throwAtRun: plan.runs[1].id, plan: { runs: plan.runs.slice(0, 2) } });
    await expect(first.run()).rejects.toThrow(/interrupted/);
    const earlier = first.study();
    const snapshot = readFileSync(join(earlier, 'study.json'), 'utf8');
    // Fewer prompts than the default, not more: its predictions (a simulation per arm, made when
    // the study starts) cost a third of the default's instead of about twice.
    const other = { ...config, workload: { ...config.workload, prompts: 512 } };
    const second = rehearsal({
      dir: first.dir,
      config: other,
      plan: { runs: studyPlan(other).runs.slice(0, 1) },
    });
    second.clock.ms += 3_600_000;
    const study = await second.run();
    expect(second.study()).not.toBe(earlier);
    expect(study.metadata.config.workload.prompts).toBe(512);
    expect(readFileSync(join(earlier, 'study.json'), 'utf8')).toBe(snapshot);
    expect(
      second.lines.some((l) =>
        l.includes('none of the 1 earlier studies is an unfinished study of this configuration'),
      ),
    ).toBe(true);
  });

  it('starts a fresh study of the same configuration when lab run --new asked for one', async () => {
    const first = rehearsal({ throwAtRun: plan.runs[1].id, plan: { runs: plan.runs.slice(0, 2) } });
    await expect(first.run()).rejects.toThrow(/interrupted/);
    const earlier = first.study();
    writeFileSync(join(first.dir, 'new-study.request'), '');
    const second = rehearsal({ dir: first.dir, plan: { runs: plan.runs.slice(0, 2) } });
    second.clock.ms += 60_000;
    const study = await second.run();
    expect(second.study()).not.toBe(earlier);
    expect(study.runs.map((run) => run.valid)).toEqual([true, true]);
    expect(existsSync(join(first.dir, 'new-study.request'))).toBe(false);
    expect(readJson<StudyRecord>(join(earlier, 'study.json')).runs).toHaveLength(1);
  });
});

describe('rehearsal: a resumed run clears its leftover Job first', () => {
  it('deletes the interrupted run’s Job and waits until it and its pods are gone before the first reset', async () => {
    const runs = plan.runs.slice(4, 6);
    // Unstaged: the killed runner had created the run's own client, not a staged one.
    const first = rehearsal({
      config: unstaged,
      plan: { runs },
      leaveJobAtRun: 'arm-kube-proxy-prefix',
      jobDeleteSeconds: 30,
    });
    await expect(first.run()).rejects.toThrow(
      /runner killed after creating job\/bench-arm-kube-proxy-prefix/,
    );
    expect(await first.cluster.getJob('bench-arm-kube-proxy-prefix')).toEqual({ active: 1 });

    const second = rehearsal({ config: unstaged, plan: { runs }, dir: first.dir, resume: first });
    const events = second.cluster.events;
    const resumedAt = events.length;
    for (const replica of replicas) replica.onReset = () => events.push(`reset ${replica.pod}`);
    const study = await second.run();
    const after = events.slice(resumedAt);
    // Every benchmark Job of the namespace goes first (the finished ones of the partition run too).
    const firstReset = after.findIndex((e) => e.startsWith('reset '));
    expect(after.indexOf('delete job/bench-arm-kube-proxy-prefix'), after.join('\n')).toBeGreaterThan(-1);
    expect(after.indexOf('gone job/bench-arm-kube-proxy-prefix'), after.join('\n')).toBeGreaterThan(0);
    expect(after.indexOf('gone job/bench-arm-kube-proxy-prefix')).toBeLessThan(firstReset);
    expect(after.slice(firstReset, firstReset + 2)).toEqual(['reset qwen3-0', 'reset qwen3-1']);
    expect(after).toContain('create job/bench-arm-kube-proxy-prefix');
    expect(study.runs.map((run) => run.valid)).toEqual([true, true]);
  });
});

/** Every file under a folder, relative path to content. */
function tree(root: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const relative = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(relative);
      else files.set(relative, readFileSync(join(root, relative), 'utf8'));
    }
  };
  walk('');
  return files;
}

describe('rehearsal: faults the runner survives', () => {
  it('a 3-minute replica outage in the middle of a run costs no run: the run is tried again once the replica serves', async () => {
    const outageRun = 'arm-router-round-robin-prefix';
    const r = rehearsal({ outageAtRun: { run: outageRun, replica: 1, afterSeconds: 30, seconds: 180 } });
    const study = await r.run();
    expect(study.runs).toHaveLength(27);
    for (const run of study.runs) expect(run.valid, `${run.id}: ${run.invalidReasons.join('; ')}`).toBe(true);
    const hit = byId(study).get(outageRun) as RunRecord;
    expect(hit.attempt).toBe(2);
    expect(hit.attempts).toHaveLength(1);
    const [first] = hit.attempts ?? [];
    expect(first.valid).toBe(false);
    expect(first.retriedBecause).toBe('a replica restarted during the run');
    expect(first.invalidReasons).toContain(
      'replica qwen3-1: restarted during the run (its pod has a new uid): its cache and counters started again mid-run',
    );
    expect(
      first.invalidReasons.some((x) =>
        x.startsWith('replica qwen3-1: /metrics could not be read after the run'),
      ),
    ).toBe(true);
    // The scrape was retried with backoff, each retry logged, before the runner gave up on it.
    expect(r.lines.some((l) => /^retry 1\/4 of GET http:\/\/127\.0\.0\.1:\d+\/metrics in 1s: /.test(l))).toBe(
      true,
    );
    // The second attempt waited for the replica instead of failing at once, and reset from scratch.
    expect(r.lines.some((l) => /waiting up to 10m00s for qwen3-1 to serve \/v1\/models/.test(l))).toBe(true);
    expect(Date.parse(hit.startedAt)).toBeGreaterThanOrEqual(Date.parse(first.finishedAt));
    expect(hit.resets?.map((x) => x.verifiedBy)).toEqual(['log-confirmed', 'log-confirmed']);
    // Both attempts' client files are kept.
    expect(existsSync(join(r.study(), 'attempts', outageRun, '1', outageRun, `${outageRun}.json`))).toBe(
      true,
    );
    expect(existsSync(join(r.study(), outageRun, `${outageRun}.json`))).toBe(true);
  });

  it('an HTTP 500 from the API server on a Job poll is retried and the study finishes', async () => {
    const runs = ['bound-p128', 'partition', 'arm-kube-proxy-prefix'].map((id) => findRun(plan, id));
    const r = rehearsal({ plan: { runs }, pollErrorsAfterCreate: 2 });
    const study = await r.run();
    expect(study.runs.map((run) => run.valid)).toEqual([true, true, true]);
    expect(r.cluster.pollErrorsAnswered).toBe(6);
    expect(r.lines).toContain(
      'retry 1 of get job/bench-bound-p128 in 1s (failing for 0s, waiting up to 15m00s): GET /apis/batch/v1/namespaces/vllm/jobs/bench-bound-p128: HTTP 500: etcdserver: request timed out',
    );
    expect(r.lines).toContain(
      'retry 2 of get job/bench-bound-p128 in 2s (failing for 1s, waiting up to 15m00s): GET /apis/batch/v1/namespaces/vllm/jobs/bench-bound-p128: HTTP 500: etcdserver: request timed out',
    );
    expect(readJson<StudyStatus>(join(r.dir, 'status.json')).state).toBe('finished');
  });

  it('does not retry a request the API server refused on its merits (403)', async () => {
    const r = rehearsal({ plan: { runs: plan.runs.slice(0, 1) }, pollStatus: 403 });
    await expect(r.run()).rejects.toThrow(/HTTP 403: jobs.batch is forbidden/);
    expect(r.lines.some((l) => l.startsWith('retry '))).toBe(false);
  });

  it('a runner on a new host with an empty disk restores the half-done study from S3 and resumes at the right run, overwriting nothing', async () => {
    const oldHost = rehearsal({ throwAtRun: plan.runs[9].id });
    await expect(oldHost.run()).rejects.toThrow(/interrupted/);
    const oldStudy = oldHost.study();
    // What the host's sync uploaded to s3://<bucket>/<stack>/ (aws s3 sync of the results folder).
    const s3 = tempDir('lab-s3-');
    cpSync(oldHost.dir, s3, { recursive: true });
    const uploaded = tree(s3);

    // The new host: an empty results folder into which the bootstrap restores studies/ from S3.
    const newDir = tempDir('lab-results-');
    cpSync(join(s3, 'studies'), join(newDir, 'studies'), { recursive: true });
    const newHost = rehearsal({ dir: newDir });
    newHost.clock.ms += 2 * 3_600_000;
    const study = await newHost.run();

    // Resumed the same study at run 10: only runs 10-27 made Jobs.
    expect(newHost.study().replace(newDir, '')).toBe(oldStudy.replace(oldHost.dir, ''));
    expect(newHost.cluster.created.map((j) => j.metadata.name)).toEqual(
      plan.runs.slice(9).flatMap((run) => run.benchmarks.map((spec) => `bench-${spec.id}`)),
    );
    expect(study.runs).toHaveLength(27);
    expect(study.runs.every((run) => run.valid)).toBe(true);
    expect(newHost.lines.some((l) => l.includes('9 of 27 runs have a valid record'))).toBe(true);

    // Nothing uploaded by the old host is overwritten by what the new host would upload.
    const after = tree(newDir);
    for (const [path, content] of uploaded) {
      if (!path.startsWith('studies/')) continue;
      if (path.endsWith('/study.json') || path.endsWith('/runner.log')) continue;
      expect(after.get(path), path).toBe(content);
    }
    const studyPath = [...uploaded.keys()].find((p) => p.endsWith('/study.json')) as string;
    const oldRecord = JSON.parse(uploaded.get(studyPath) as string) as StudyRecord;
    expect(study.runs.slice(0, 9)).toEqual(oldRecord.runs);
    expect(study.metadata.startedAt).toBe(oldRecord.metadata.startedAt);
    const logPath = studyPath.replace('study.json', 'runner.log');
    expect(after.get(logPath)?.startsWith(uploaded.get(logPath) as string)).toBe(true);
  });

  it('resumes from run files synced after study.json (the sync runs every 5 minutes)', async () => {
    const oldHost = rehearsal({ throwAtRun: plan.runs[4].id, plan: { runs: plan.runs.slice(0, 6) } });
    await expect(oldHost.run()).rejects.toThrow(/interrupted/);
    // The S3 copy of study.json is from before run 4 was recorded; runs/bound-p8.json is newer.
    const studyFile = join(oldHost.study(), 'study.json');
    const record = readJson<StudyRecord>(studyFile);
    writeFileSync(studyFile, JSON.stringify({ ...record, runs: record.runs.slice(0, 3) }));
    const resumed = rehearsal({ dir: oldHost.dir, plan: { runs: plan.runs.slice(0, 6) } });
    const study = await resumed.run();
    expect(resumed.cluster.created.map((j) => j.metadata.name)).toEqual([
      'bench-partition-r0',
      'bench-partition-r1',
      'bench-arm-kube-proxy-prefix',
    ]);
    expect(study.runs.map((run) => run.id)).toEqual(plan.runs.slice(0, 6).map((run) => run.id));
  });

  it('keeps an invalid attempt when a resumed study runs it again', async () => {
    const runs = plan.runs.slice(0, 4);
    const first = rehearsal({
      plan: { runs },
      behaviour: { 'bound-p64': { completed: 1000 } },
      throwAtRun: 'bound-p8',
    });
    await expect(first.run()).rejects.toThrow(/interrupted/);
    const invalid = readJson<RunRecord>(join(first.study(), 'runs', 'bound-p64.json'));
    expect(invalid.valid).toBe(false);

    const second = rehearsal({ dir: first.dir, plan: { runs } });
    const study = await second.run();
    const run = byId(study).get('bound-p64') as RunRecord;
    expect(run.valid).toBe(true);
    expect(run.attempt).toBe(2);
    expect(run.attempts).toEqual([
      { ...invalid, retriedBecause: 'the study was resumed and this run had no valid record' },
    ]);
    expect(readJson<RunRecord>(join(second.study(), 'runs', 'bound-p64.json')).attempts).toHaveLength(1);
    // The first attempt's client files moved aside; the second attempt's are in place.
    const kept = join(second.study(), 'attempts', 'bound-p64', '1', 'bound-p64');
    expect(readJson<{ completed: number }>(join(kept, 'bound-p64.json')).completed).toBe(1000);
    expect(existsSync(join(kept, 'bound-p64.log'))).toBe(true);
    expect(
      readJson<{ completed: number }>(join(second.study(), 'bound-p64', 'bound-p64.json')).completed,
    ).toBe(1024);
  });
});

describe('rehearsal: study-level stops', () => {
  it('stops when the model server never becomes ready before a run, with the reason and what to change', async () => {
    const r = rehearsal({
      plan: { runs: plan.runs.slice(0, 3) },
      outageAtRun: { run: 'bound-p128', replica: 0, afterSeconds: 130, seconds: 3 * 3_600 },
    });
    await expect(r.run()).rejects.toThrow(
      /the model server never became ready: qwen3-0 did not serve \/v1\/models within 10m00s .*To change: find why in kubectl -n vllm describe pod qwen3-0/,
    );
    // The outage began during bound-p16 (on qwen3-0 after the first wave); its retry waited 10
    // minutes for qwen3-0, then the study stopped.
    const study = readJson<StudyRecord>(join(r.study(), 'study.json'));
    expect(study.runs.map((run) => [run.id, run.valid])).toEqual([
      ['bound-p128', true],
      ['bound-p64', true],
      ['bound-p16', false],
    ]);
    expect(study.runs[2].invalidReasons).toContain(
      'replica qwen3-0: restarted during the run (its pod has a new uid): its cache and counters started again mid-run',
    );
    expect(study.metadata.stopped?.reason).toMatch(/^the model server never became ready/);
    expect(r.cluster.created.map((j) => j.metadata.name).sort()).toEqual([
      'bench-bound-p128',
      'bench-bound-p16',
      'bench-bound-p64',
    ]);
    expect(readJson<StudyStatus>(join(r.dir, 'status.json')).state).toBe('failed');
  });

  it('stops when no replica exposes vLLM metrics before a run', async () => {
    const r = rehearsal({ plan: { runs: plan.runs.slice(0, 3) }, options: { idleTimeoutMs: 10_000 } });
    for (const replica of replicas) replica.blankScrapes = 1_000;
    await expect(r.run()).rejects.toThrow(
      /no replica exposes vLLM metrics: \/metrics of qwen3-0 has no vllm: series\. To change: start vLLM without --disable-log-stats/,
    );
    expect(r.cluster.created).toHaveLength(0);
    expect(readJson<StudyRecord>(join(r.study(), 'study.json')).metadata.stopped?.change).toMatch(
      /--disable-log-stats/,
    );
  });
});
