import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { defaultLabConfig } from '../../lib/config/load.ts';
import { FileResultStore } from '../../lib/runner/file-store.ts';
import { HttpReplicas } from '../../lib/runner/http-replicas.ts';
import { type RunnerOptions, runStudy } from '../../lib/runner/run-study.ts';
import type { StudyStatus } from '../../lib/runner/status.ts';
import { type BenchmarkSpec, findRun, type StudyPlan, studyPlan } from '../../lib/study/plan.ts';
import type { RunRecord, StudyRecord } from '../../lib/study/results.ts';
import { IDENTICAL_PREFIXES_REASON } from '../../lib/study/validity.ts';
import { tempDir } from '../temp.ts';
import { type ClientBehaviour, FakeClock, FakeCluster, FakeReplica } from './fakes.ts';

const config = defaultLabConfig();
const plan = studyPlan(config);

/** Hit rates the fake replicas serve: the calibration numbers of lab-spec 4.1 and made-up arms. */
const BOUND_RATES: Record<number, number> = { 128: 0.444, 64: 0.776, 16: 0.909, 8: 0.923 };
const ARM_RATES: Record<string, number> = {
  'kube-proxy': 0.45,
  'router-round-robin': 0.44,
  'router-cache-aware': 0.58,
  'router-cache-aware-tuned': 0.71,
  'router-round-robin-completions': 0.43,
  'router-cache-aware-completions': 0.62,
  'router-cache-aware-tuned-completions': 0.74,
  epp: 0.76,
};

function hitRate(spec: BenchmarkSpec): number {
  if (spec.dataset === 'sharegpt') return 0.05;
  if (spec.target.kind === 'arm') return ARM_RATES[spec.target.arm];
  if (spec.id.startsWith('partition')) return 0.81;
  return BOUND_RATES[spec.prefix?.prefixes ?? 0];
}

interface Rehearsal {
  readonly dir: string;
  readonly clock: FakeClock;
  readonly cluster: FakeCluster;
  readonly lines: string[];
  readonly run: () => Promise<StudyRecord>;
}

let replicas: FakeReplica[];

beforeAll(async () => {
  replicas = [new FakeReplica('qwen3-0'), new FakeReplica('qwen3-1')];
  for (const r of replicas) await r.start();
});

afterAll(async () => {
  for (const r of replicas) await r.stop();
});

function rehearsal(
  setup: {
    dir?: string;
    plan?: StudyPlan;
    behaviour?: Record<string, ClientBehaviour>;
    hitRate?: (spec: BenchmarkSpec) => number;
    throwAtRun?: string;
    jobDeleteSeconds?: number;
    options?: RunnerOptions;
  } = {},
): Rehearsal {
  for (const r of replicas) {
    r.devMode = true;
    r.blankScrapes = 0;
    r.onReset = undefined;
  }
  const dir = setup.dir ?? tempDir('lab-results-');
  const clock = new FakeClock();
  const usedPlan = setup.plan ?? plan;
  const cluster = new FakeCluster({
    config,
    plan: usedPlan,
    replicas,
    resultsDir: dir,
    clock,
    hitRate: setup.hitRate ?? hitRate,
    behaviour: setup.behaviour,
    throwAtRun: setup.throwAtRun,
    jobDeleteSeconds: setup.jobDeleteSeconds,
  });
  const lines: string[] = [];
  const run = () =>
    runStudy(
      {
        cluster,
        replicas: new HttpReplicas(5_000),
        store: new FileResultStore(dir),
        clock,
        jobManifest: (spec) => benchmarkJob(config, spec),
        log: (line) => lines.push(line),
      },
      config,
      usedPlan,
      { replicaUrls: () => replicas.map((r) => r.url), ...setup.options },
    );
  return { dir, clock, cluster, lines, run };
}

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

const byId = (study: StudyRecord) => new Map(study.runs.map((r) => [r.id, r]));
const durationMs = (r: RunRecord) => Date.parse(r.finishedAt) - Date.parse(r.startedAt);

describe('rehearsal: the whole default study against a fake cluster and loopback replicas', () => {
  let r: Rehearsal;
  let study: StudyRecord;

  beforeAll(async () => {
    r = rehearsal();
    mkdirSync(join(r.dir, 'host'));
    writeFileSync(
      join(r.dir, 'host', 'gpu-uuids.json'),
      JSON.stringify({ 'qwen3-0': 'GPU-1a2b', 'qwen3-1': 'GPU-3c4d' }),
    );
    writeFileSync(
      join(r.dir, 'host', 'host.json'),
      JSON.stringify({ instanceType: 'g6.12xlarge', availabilityZone: 'us-west-2b' }),
    );
    study = await r.run();
  });

  it('records every run of the plan, in order, each valid', () => {
    expect(plan.runs).toHaveLength(25);
    expect(study.runs.map((run) => run.id)).toEqual(plan.runs.map((run) => run.id));
    for (const run of study.runs) {
      expect(run.invalidReasons, run.id).toEqual([]);
      expect(run.valid, run.id).toBe(true);
      expect(run.reset, run.id).toBe('endpoint');
    }
  });

  it('writes study.json, one file per run and a finished status', () => {
    expect(readJson<StudyRecord>(join(r.dir, 'study.json'))).toEqual(study);
    for (const run of study.runs) expect(readJson(join(r.dir, 'runs', `${run.id}.json`))).toEqual(run);
    const status = readJson<StudyStatus>(join(r.dir, 'status.json'));
    expect(status).toMatchObject({
      state: 'finished',
      totalRuns: 25,
      recordedRuns: 25,
      validRuns: 25,
      invalidRuns: 0,
    });
    expect(status.current).toBeUndefined();
    expect(readFileSync(join(r.dir, 'runner.log'), 'utf8')).toMatch(/study finished: 25 of 25 runs valid\n$/);
    expect(readFileSync(join(r.dir, 'partition-r1', 'partition-r1.log'), 'utf8')).toMatch(
      /bench-partition-r1/,
    );
  });

  it('creates each client Job exactly as benchmarkJob builds it, the partition clients together', () => {
    const expected = plan.runs.flatMap((run) => run.benchmarks.map((spec) => benchmarkJob(config, spec)));
    expect(r.cluster.created).toEqual(expected);
    expect(r.cluster.created.map((j) => j.metadata.name)).toContain('bench-partition-r1');
  });

  it('per-replica requests add up to the prompts plus one warm-up per client', () => {
    for (const run of study.runs) {
      const served = run.replicas.reduce((sum, rep) => sum + rep.requests, 0);
      expect(served, run.id).toBe(findRun(plan, run.id).expectedRequests);
    }
    const split = (id: string) =>
      byId(study)
        .get(id)
        ?.replicas.map((rep) => rep.requests);
    expect(split('bound-p128')).toEqual([1025, 0]);
    expect(split('partition')).toEqual([513, 513]);
    expect(split('arm-epp-prefix')).toEqual([513, 512]);
  });

  it('measures the hit rates the replicas served', () => {
    const rates = byId(study);
    for (const [prefixes, rate] of Object.entries(BOUND_RATES)) {
      expect(rates.get(`bound-p${prefixes}`)?.summary?.hitRate).toBeCloseTo(rate, 6);
    }
    expect(rates.get('partition')?.summary?.hitRate).toBeCloseTo(0.81, 6);
    for (const [arm, rate] of Object.entries(ARM_RATES)) {
      expect(rates.get(`arm-${arm}-prefix`)?.summary?.hitRate, arm).toBeCloseTo(rate, 6);
      expect(rates.get(`arm-${arm}-prefix`)?.replicas[1].hitRate, arm).toBeCloseTo(rate, 6);
      expect(rates.get(`arm-${arm}-sharegpt`)?.summary?.hitRate, arm).toBeCloseTo(0.05, 6);
    }
    expect(rates.get('sweep-c4-router-cache-aware')?.summary?.hitRate).toBeCloseTo(0.58, 6);
    expect(rates.get('bound-p128')?.replicas[1].hitRate).toBeNull();
    expect(rates.get('bound-p128')?.upperBound).toBeCloseTo(0.82, 3);
  });

  it('carries the client numbers into each run summary', () => {
    const summary = byId(study).get('partition')?.summary;
    expect(summary).toMatchObject({
      completed: 1024,
      failed: 0,
      p99TtftMs: 812.5,
    });
    // Two clients of equal duration: all tokens over the longest duration.
    expect(summary?.totalTokenThroughput).toBeCloseTo(2 * 12_929, 6);
  });

  it('reset every cache through the endpoint and restarted each front end that keeps a prefix index', () => {
    expect(replicas.every((rep) => rep.resets >= plan.runs.length)).toBe(true);
    expect(r.cluster.restarted).toHaveLength(plan.runs.filter((run) => run.reset.restartFrontEndOf).length);
    expect(r.cluster.restarted.filter((name) => name === 'qwen3-epp')).toHaveLength(2);
    // cache-aware over chat and completions (one Deployment), plus its two concurrency-sweep runs.
    expect(r.cluster.restarted.filter((name) => name === 'vllm-router-cache-aware')).toHaveLength(6);
  });

  it('records the study metadata once', () => {
    const m = study.metadata;
    expect(m.config).toEqual(config);
    expect(m.versions).toMatchObject({
      vllm: 'vllm/vllm-openai:v0.11.0',
      vllmRouter: '0.1.15',
      gaie: 'v1.0.1',
    });
    expect(m.gpuUuids).toEqual({ 'qwen3-0': 'GPU-1a2b', 'qwen3-1': 'GPU-3c4d' });
    expect(m.kvCacheTokens).toBe(163_472);
    expect(m.k3sVersion).toBe('v1.33.4+k3s1');
    expect(m.instanceType).toBe('g6.12xlarge');
    expect(m.availabilityZone).toBe('us-west-2b');
    expect(m.notes).toEqual(['host/nvidia-smi-topo.txt not found: nvidia-smi topo -m not recorded']);
    expect(m.startedAt).toBe('2025-10-14T09:00:00.000Z');
    expect(Date.parse(m.finishedAt ?? '')).toBeGreaterThan(Date.parse(m.startedAt));
  });

  it('logs progress with the elapsed time and a study ETA from the mean run duration', () => {
    expect(r.lines).toContain('run 1/25 bound-p128: waiting for job (elapsed 0s, study ETA unknown)');
    // Each run takes 2 minutes of fake time (the fake Job's duration); a router arm's restart
    // adds 20 s. At run 7 six runs are done: this one and 18 more to go.
    const line = r.lines.find((l) => l.startsWith('run 7/25 arm-kube-proxy-sharegpt: waiting for job'));
    expect(line).toMatch(
      /^run 7\/25 arm-kube-proxy-sharegpt: waiting for job \(elapsed 0s, study ETA \d+m\)$/,
    );
    expect(
      r.lines.some((l) =>
        /^run 8\/25 arm-router-round-robin-prefix: waiting for job \(elapsed 1m20s, study ETA \d+m\)$/.test(
          l,
        ),
      ),
    ).toBe(true);
    const eta = Number(/ETA (\d+)m/.exec(line ?? '')?.[1]);
    const mean = study.runs.slice(0, 6).reduce((sum, run) => sum + durationMs(run), 0) / 6;
    expect(eta).toBe(Math.round((19 * mean) / 60_000));
  });
});

describe('rehearsal: broken runs are marked invalid with the right reason', () => {
  let study: Map<string, RunRecord>;

  beforeAll(async () => {
    const r = rehearsal({
      behaviour: {
        'arm-kube-proxy-prefix': { noResultFile: true },
        'arm-epp-prefix': { completed: 1000 },
        'arm-router-round-robin-prefix': { metricsVanish: true },
      },
    });
    study = byId(await r.run());
  });

  it('a missing result file', () => {
    expect(study.get('arm-kube-proxy-prefix')).toMatchObject({
      valid: false,
      invalidReasons: ['client arm-kube-proxy-prefix: result file arm-kube-proxy-prefix.json is missing'],
    });
    expect(study.get('arm-kube-proxy-prefix')?.summary).toBeUndefined();
  });

  it('completed below the prompt count (and the replicas did not serve the rest)', () => {
    const run = study.get('arm-epp-prefix');
    expect(run?.valid).toBe(false);
    expect(run?.invalidReasons).toEqual([
      'client arm-epp-prefix: completed 1000 of 1024 prompts (24 failed)',
      'replicas served 1001 requests (qwen3-0 501, qwen3-1 500), expected 1025 (prompts plus one warm-up per client)',
    ]);
    expect(run?.summary?.failed).toBe(24);
  });

  it('metrics absent', () => {
    const run = study.get('arm-router-round-robin-prefix');
    expect(run?.valid).toBe(false);
    expect(run?.invalidReasons).toEqual(
      ['qwen3-0', 'qwen3-1'].map(
        (pod) =>
          `replica ${pod}: /metrics has no vllm: series after the run (vLLM started with --disable-log-stats, or the scrape hit the wrong port)`,
      ),
    );
    expect(run?.replicas.map((rep) => rep.vllmSeries)).toEqual([0, 0]);
  });

  it('every other run stays valid', () => {
    const broken = new Set(['arm-kube-proxy-prefix', 'arm-epp-prefix', 'arm-router-round-robin-prefix']);
    for (const run of study.values()) expect(run.valid, run.id).toBe(!broken.has(run.id));
  });
});

describe('rehearsal: identical prefixes', () => {
  it('marks every prefix run invalid when 128 prefixes hit as often as 8, and keeps the ShareGPT controls', async () => {
    const r = rehearsal({
      hitRate: (spec) =>
        spec.prefix?.prefixes === 128 && spec.target.kind === 'replica' ? 0.93 : hitRate(spec),
    });
    const study = await r.run();
    for (const run of study.runs) {
      if (run.dataset === 'sharegpt') {
        expect(run.valid, run.id).toBe(true);
      } else {
        expect(run.valid, run.id).toBe(false);
        expect(run.invalidReasons, run.id).toEqual([
          `${IDENTICAL_PREFIXES_REASON}: bound-p128 hit 93.0%, not at least 5 points below bound-p8 (92.3%)`,
        ]);
      }
    }
    // bound-p128 was recorded valid first, then marked invalid once bound-p8 was measured.
    const file = readJson<RunRecord>(join(r.dir, 'runs', 'bound-p128.json'));
    expect(file.valid).toBe(false);
    expect(readJson<StudyStatus>(join(r.dir, 'status.json')).invalidRuns).toBe(17);
  });
});

describe('rehearsal: an interrupted study resumes without repeating valid runs', () => {
  it('restarts at run 7', async () => {
    const first = rehearsal({ throwAtRun: plan.runs[6].id });
    await expect(first.run()).rejects.toThrow(/interrupted at arm-kube-proxy-sharegpt/);
    const status = readJson<StudyStatus>(join(first.dir, 'status.json'));
    expect(status).toMatchObject({ state: 'failed', recordedRuns: 6, validRuns: 6 });
    expect(status.error).toMatch(/interrupted/);
    expect(status.current?.id).toBe('arm-kube-proxy-sharegpt');
    const before = readJson<StudyRecord>(join(first.dir, 'study.json'));
    expect(before.runs.map((run) => run.id)).toEqual(plan.runs.slice(0, 6).map((run) => run.id));
    expect(first.cluster.created).toHaveLength(7); // six runs, the partition with two clients

    const second = rehearsal({ dir: first.dir });
    const study = await second.run();
    const expectedJobs = plan.runs
      .slice(6)
      .flatMap((run) => run.benchmarks.map((spec) => `bench-${spec.id}`));
    expect(second.cluster.created.map((j) => j.metadata.name)).toEqual(expectedJobs);
    expect(study.runs).toHaveLength(25);
    expect(study.runs.every((run) => run.valid)).toBe(true);
    expect(study.runs.slice(0, 6)).toEqual(before.runs);
    expect(study.metadata.startedAt).toBe(before.metadata.startedAt);
    expect(second.lines).toContain('run 1/25 bound-p128: valid record exists, skipped');
  });

  it('refuses a results folder of a different configuration', async () => {
    const first = rehearsal({ plan: { runs: plan.runs.slice(0, 1) } });
    await first.run();
    const other = { ...config, workload: { ...config.workload, prompts: 2048 } };
    const store = new FileResultStore(first.dir);
    const clock = new FakeClock();
    await expect(
      runStudy(
        {
          cluster: first.cluster,
          replicas: new HttpReplicas(),
          store,
          clock,
          jobManifest: (spec) => benchmarkJob(other, spec),
          log: () => {},
        },
        other,
        studyPlan(other),
        { replicaUrls: () => replicas.map((rep) => rep.url) },
      ),
    ).rejects.toThrow(/results folder holds a study of a different configuration/);
  });
});

describe('rehearsal: Jobs that fail or hang', () => {
  it('detects a failed Job at once, not after the timeout', async () => {
    const r = rehearsal({
      plan: { runs: plan.runs.slice(0, 6) },
      behaviour: { 'arm-kube-proxy-prefix': { failAfterSeconds: 30 } },
      options: { jobTimeoutMs: 60 * 60_000 },
    });
    const study = byId(await r.run());
    const run = study.get('arm-kube-proxy-prefix');
    expect(run?.clients[0].job).toBe('failed');
    expect(run?.invalidReasons).toContain('client arm-kube-proxy-prefix: Job failed (status.failed > 0)');
    expect(run?.invalidReasons).toContain(
      'client arm-kube-proxy-prefix: result file arm-kube-proxy-prefix.json is missing',
    );
    // Failed 30 s after it started; seen at the next 5 s poll.
    expect(durationMs(run as RunRecord)).toBe(30_000);
    expect(r.lines).toContain('job/bench-arm-kube-proxy-prefix failed (status.failed)');
  });

  it('deletes a Job that outlives the timeout and records it as timed out', async () => {
    const r = rehearsal({
      plan: { runs: plan.runs.slice(0, 1) },
      behaviour: { 'bound-p128': { hangs: true } },
      options: { jobTimeoutMs: 10 * 60_000 },
    });
    const [run] = (await r.run()).runs;
    expect(run.clients[0].job).toBe('timed-out');
    expect(run.valid).toBe(false);
    expect(run.invalidReasons).toContain(
      'client bound-p128: Job did not finish before the timeout (neither status.succeeded nor status.failed)',
    );
    expect(durationMs(run)).toBe(10 * 60_000);
    expect(await r.cluster.getJob('bench-bound-p128')).toBeUndefined();
  });

  it('waits until a timed-out Job and its pods are gone before the next run resets the caches', async () => {
    const r = rehearsal({
      plan: { runs: plan.runs.slice(0, 2) },
      behaviour: { 'bound-p128': { hangs: true } },
      options: { jobTimeoutMs: 10 * 60_000 },
      jobDeleteSeconds: 30,
    });
    for (const replica of replicas) replica.onReset = () => r.cluster.events.push(`reset ${replica.pod}`);
    const study = await r.run();
    const events = r.cluster.events;
    const deleted = events.indexOf('delete job/bench-bound-p128');
    const gone = events.indexOf('gone job/bench-bound-p128');
    const nextReset = events.findIndex((e, i) => i > deleted && e.startsWith('reset '));
    expect(deleted, events.join('\n')).toBeGreaterThan(-1);
    expect(gone, events.join('\n')).toBeGreaterThan(deleted);
    expect(nextReset, events.join('\n')).toBeGreaterThan(gone);
    expect(events.indexOf('create job/bench-bound-p64')).toBeGreaterThan(nextReset);
    // The timed-out run lasted until its Job was gone: the timeout plus the 30 s deletion.
    expect(durationMs(study.runs[0])).toBe(10 * 60_000 + 30_000);
    // Its client log was saved before its pod went away.
    expect(readFileSync(join(r.dir, 'bound-p128', 'bound-p128.log'), 'utf8')).toContain(
      '(log of bench-bound-p128-x7k2p)',
    );
  });
});

describe('rehearsal: reset without dev mode', () => {
  it('falls back to deleting the replica pods and waiting for /v1/models', async () => {
    const r = rehearsal({ plan: { runs: [findRun(plan, 'partition'), findRun(plan, 'arm-epp-prefix')] } });
    replicas[1].devMode = false;
    const study = await r.run();
    expect(r.cluster.deletedPods).toEqual(['qwen3-1', 'qwen3-1']);
    for (const run of study.runs) {
      expect(run.reset).toBe('pod-restart');
      expect(run.valid, run.invalidReasons.join()).toBe(true);
    }
    // The new pod took 90 s to become ready; the run waited for it.
    expect(durationMs(study.runs[0])).toBeGreaterThanOrEqual(90_000);
    expect(r.lines.some((l) => l.includes('qwen3-1: /reset_prefix_cache answered 404'))).toBe(true);
    expect(existsSync(join(r.dir, 'runs', 'partition.json'))).toBe(true);
  });
});
