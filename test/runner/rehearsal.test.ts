import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { preflightStatusChecks } from '../../charts/study-runner.ts';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import { FileResultStore } from '../../lib/runner/file-store.ts';
import { HttpEndpointPickers, HttpFrontEnds } from '../../lib/runner/http-front-ends.ts';
import { HttpReplicas } from '../../lib/runner/http-replicas.ts';
import { type RunnerOptions, runStudy } from '../../lib/runner/run-study.ts';
import type { StudyStatus } from '../../lib/runner/status.ts';
import { type BenchmarkSpec, findRun, type StudyPlan, studyPlan } from '../../lib/study/plan.ts';
import type { RunRecord, StudyRecord } from '../../lib/study/results.ts';
import { IDENTICAL_PREFIXES_REASON } from '../../lib/study/validity.ts';
import { tempDir } from '../temp.ts';
import {
  type ClientBehaviour,
  FakeClock,
  FakeCluster,
  FakeEndpointPickers,
  FakeFrontEnds,
  FakeReplica,
} from './fakes.ts';

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
  'epp-completions': 0.79,
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
let frontEnds: FakeFrontEnds;
let pickers: FakeEndpointPickers;
let tokenFile: string;

beforeAll(async () => {
  replicas = [new FakeReplica('qwen3-0'), new FakeReplica('qwen3-1')];
  for (const r of replicas) await r.start();
  frontEnds = new FakeFrontEnds(replicas);
  await frontEnds.start();
  pickers = new FakeEndpointPickers();
  await pickers.start();
  tokenFile = join(tempDir('lab-sa-'), 'token');
  writeFileSync(tokenFile, `${pickers.token}\n`);
});

afterAll(async () => {
  for (const r of replicas) await r.stop();
  await frontEnds.stop();
  await pickers.stop();
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
    config?: LabConfig;
    statuses?: Record<string, Record<string, unknown>>;
    leaveJobAtRun?: string;
    /** Continue on the cluster and clock of an earlier rehearsal (a runner restarted in the same cluster). */
    resume?: Rehearsal;
  } = {},
): Rehearsal {
  for (const r of replicas) {
    r.devMode = true;
    r.blankScrapes = 0;
    r.busyScrapes = 0;
    r.resetBehaviour = 'succeeds';
    r.neverReadyAfterRestart = false;
    r.onReset = undefined;
  }
  frontEnds.failing.clear();
  frontEnds.onRequest = undefined;
  frontEnds.blackHoles.clear();
  frontEnds.requests.length = 0;
  pickers.indexerSize = {};
  pickers.llmdWithoutMetrics = false;
  pickers.scraped.length = 0;
  const usedConfig = setup.config ?? config;
  const dir = setup.dir ?? tempDir('lab-results-');
  const clock = setup.resume?.clock ?? new FakeClock();
  const usedPlan = setup.plan ?? plan;
  const cluster =
    setup.resume?.cluster ??
    new FakeCluster({
      config: usedConfig,
      plan: usedPlan,
      statuses: setup.statuses,
      replicas,
      resultsDir: dir,
      clock,
      hitRate: setup.hitRate ?? hitRate,
      behaviour: setup.behaviour,
      throwAtRun: setup.throwAtRun,
      jobDeleteSeconds: setup.jobDeleteSeconds,
      leaveJobAtRun: setup.leaveJobAtRun,
    });
  const lines: string[] = [];
  const run = () =>
    runStudy(
      {
        cluster,
        replicas: new HttpReplicas(5_000),
        frontEnds: new HttpFrontEnds(5_000),
        endpointPickers: new HttpEndpointPickers(tokenFile, 5_000),
        store: new FileResultStore(dir),
        clock,
        jobManifest: (spec) => benchmarkJob(usedConfig, spec),
        log: (line) => lines.push(line),
      },
      usedConfig,
      usedPlan,
      {
        replicaUrls: () => replicas.map((r) => r.url),
        frontEndUrl: (arm) => `${frontEnds.url}/${arm.id}`,
        eppMetricsUrl: (arm) => `${pickers.url}/${arm.id}`,
        statusChecks: preflightStatusChecks(usedConfig),
        ...setup.options,
      },
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
    expect(plan.runs).toHaveLength(27);
    expect(study.runs.map((run) => run.id)).toEqual(plan.runs.map((run) => run.id));
    for (const run of study.runs) {
      expect(run.invalidReasons, run.id).toEqual([]);
      expect(run.valid, run.id).toBe(true);
      expect(run.reset, run.id).toBe('endpoint');
      expect(
        run.resets?.map((x) => x.verifiedBy),
        run.id,
      ).toEqual(['log-confirmed', 'log-confirmed']);
    }
    // The completions arm of the EPP proved it saw prompts; its chat arm is a prompt-blind control.
    expect(byId(study).get('arm-epp-completions-prefix')?.promptEvidence?.status).toBe('seen');
    expect(byId(study).get('arm-epp-prefix')?.promptEvidence).toBeUndefined();
  });

  it('writes study.json, one file per run and a finished status', () => {
    expect(readJson<StudyRecord>(join(r.dir, 'study.json'))).toEqual(study);
    for (const run of study.runs) expect(readJson(join(r.dir, 'runs', `${run.id}.json`))).toEqual(run);
    const status = readJson<StudyStatus>(join(r.dir, 'status.json'));
    expect(status).toMatchObject({
      state: 'finished',
      totalRuns: 27,
      recordedRuns: 27,
      validRuns: 27,
      invalidRuns: 0,
    });
    expect(status.current).toBeUndefined();
    expect(readFileSync(join(r.dir, 'runner.log'), 'utf8')).toMatch(/study finished: 27 of 27 runs valid\n$/);
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
    // epp over chat and over completions: one EPP Deployment restarted before each of their four runs.
    expect(r.cluster.restarted.filter((name) => name === 'qwen3-epp')).toHaveLength(4);
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
    expect(r.lines).toContain('run 1/27 bound-p128: waiting for job (elapsed 0s, study ETA unknown)');
    // Each run takes 2 minutes of fake time (the fake Job's duration); a router arm's restart
    // adds 20 s. At run 7 six runs are done: this one and 20 more to go.
    const line = r.lines.find((l) => l.startsWith('run 7/27 arm-kube-proxy-sharegpt: waiting for job'));
    expect(line).toMatch(
      /^run 7\/27 arm-kube-proxy-sharegpt: waiting for job \(elapsed 0s, study ETA \d+m\)$/,
    );
    expect(
      r.lines.some((l) =>
        /^run 8\/27 arm-router-round-robin-prefix: waiting for job \(elapsed 1m20s, study ETA \d+m\)$/.test(
          l,
        ),
      ),
    ).toBe(true);
    const eta = Number(/ETA (\d+)m/.exec(line ?? '')?.[1]);
    const mean = study.runs.slice(0, 6).reduce((sum, run) => sum + durationMs(run), 0) / 6;
    expect(eta).toBe(Math.round((21 * mean) / 60_000));
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
    expect(readJson<StudyStatus>(join(r.dir, 'status.json')).invalidRuns).toBe(18);
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
    expect(study.runs).toHaveLength(27);
    expect(study.runs.every((run) => run.valid)).toBe(true);
    expect(study.runs.slice(0, 6)).toEqual(before.runs);
    expect(study.metadata.startedAt).toBe(before.metadata.startedAt);
    expect(second.lines).toContain('run 1/27 bound-p128: valid record exists, skipped');
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
          frontEnds: new HttpFrontEnds(),
          endpointPickers: new HttpEndpointPickers(tokenFile),
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

describe('rehearsal: resets are verified, not assumed', () => {
  const one = { runs: [findRun(plan, 'bound-p128')] };

  it('records how every reset of the default study was verified: by the log line after the call', async () => {
    const r = rehearsal({ plan: { runs: plan.runs.slice(0, 2) } });
    const study = await r.run();
    for (const run of study.runs) {
      expect(run.resets?.map((x) => x.verifiedBy)).toEqual(['log-confirmed', 'log-confirmed']);
      expect(run.resets?.[0].detail).toBe(
        'POST /reset_prefix_cache answered 200 and the log logged "Successfully reset prefix cache" after it',
      );
    }
    expect(r.cluster.deletedPods).toEqual([]);
  });

  it('restarts a replica that stays busy, and the run is valid', async () => {
    const r = rehearsal({ plan: one, options: { idleTimeoutMs: 2 * 60_000 } });
    replicas[1].busyScrapes = 10_000;
    const resetCalls = replicas[1].resets;
    const [run] = (await r.run()).runs;
    expect(r.cluster.deletedPods).toEqual(['qwen3-1']);
    // A busy replica is not sent a reset it would refuse: it is replaced.
    expect(replicas[1].resets).toBe(resetCalls);
    expect(run.valid, run.invalidReasons.join()).toBe(true);
    expect(run.reset).toBe('pod-restart');
    expect(run.resets?.[1]).toEqual({
      replica: 1,
      pod: 'qwen3-1',
      verifiedBy: 'pod-restart',
      detail:
        'still busy after 2m00s (3 running, 0 waiting); the pod was replaced (new uid), Ready and serving /v1/models',
    });
    expect(run.resets?.[0].verifiedBy).toBe('log-confirmed');
  });

  it('restarts a replica whose log says the reset was refused, and the run is valid', async () => {
    const r = rehearsal({ plan: one });
    replicas[0].resetBehaviour = 'refused';
    const [run] = (await r.run()).runs;
    expect(r.cluster.deletedPods).toEqual(['qwen3-0']);
    expect(run.valid, run.invalidReasons.join()).toBe(true);
    expect(run.resets?.[0]).toMatchObject({ verifiedBy: 'pod-restart' });
    expect(run.resets?.[0].detail).toMatch(
      /^vLLM refused the reset: ".*Failed to reset prefix cache because some blocks \(34\) are not freed yet"; the pod was replaced/,
    );
    expect(r.lines).toContain(
      'qwen3-0: vLLM refused the reset: "(EngineCore_DP0 pid=212) WARNING 10-14 09:02:00 [block_pool.py:321] Failed to reset prefix cache because some blocks (34) are not freed yet"; deleting the pod to reset its cache',
    );
  });

  it('restarts a replica whose log confirms nothing within the window', async () => {
    const r = rehearsal({ plan: one });
    replicas[1].resetBehaviour = 'silent';
    const [run] = (await r.run()).runs;
    expect(r.cluster.deletedPods).toEqual(['qwen3-1']);
    expect(run.valid, run.invalidReasons.join()).toBe(true);
    expect(run.resets?.[1].detail).toMatch(
      /^POST \/reset_prefix_cache answered 200, but within 30s the log showed neither "Successfully reset prefix cache" nor a refusal; the pod was replaced/,
    );
  });

  it('marks the run invalid, without starting it, when nothing can verify the reset', async () => {
    const r = rehearsal({ plan: one, options: { podRestartTimeoutMs: 10 * 60_000 } });
    replicas[1].resetBehaviour = 'silent';
    replicas[1].neverReadyAfterRestart = true;
    const [run] = (await r.run()).runs;
    expect(run.valid).toBe(false);
    expect(run.resets?.[1].verifiedBy).toBe('unverified');
    expect(run.invalidReasons).toEqual([
      'not started: replica qwen3-1: prefix cache reset not verified: POST /reset_prefix_cache answered 200, but within 30s the log showed neither "Successfully reset prefix cache" nor a refusal; restarting the pod failed: pod restart did not bring qwen3-1 back to serving /v1/models within 10m00s',
    ]);
    expect(r.cluster.created).toEqual([]);
  });
});

describe('rehearsal: a resumed run clears its leftover Job first', () => {
  it('deletes the interrupted run’s Job and waits until it and its pods are gone before the first reset', async () => {
    const runs = plan.runs.slice(0, 2);
    const first = rehearsal({ plan: { runs }, leaveJobAtRun: 'bound-p64', jobDeleteSeconds: 30 });
    await expect(first.run()).rejects.toThrow(/runner killed after creating job\/bench-bound-p64/);
    expect(await first.cluster.getJob('bench-bound-p64')).toEqual({ active: 1 });

    const second = rehearsal({ plan: { runs }, dir: first.dir, resume: first });
    const events = second.cluster.events;
    const resumedAt = events.length;
    for (const replica of replicas) replica.onReset = () => events.push(`reset ${replica.pod}`);
    const study = await second.run();
    const after = events.slice(resumedAt);
    expect(after.slice(0, 4), after.join('\n')).toEqual([
      'delete job/bench-bound-p64',
      'gone job/bench-bound-p64',
      'reset qwen3-0',
      'reset qwen3-1',
    ]);
    expect(after).toContain('create job/bench-bound-p64');
    expect(study.runs.map((run) => run.valid)).toEqual([true, true]);
  });
});

describe('rehearsal: the EPP proves it saw the prompts', () => {
  const runs = ['arm-epp-prefix', 'arm-epp-completions-prefix', 'arm-epp-completions-sharegpt'].map((id) =>
    findRun(plan, id),
  );

  it('records the prefix indexer size of a completions prefix run, read with the bearer token', async () => {
    const r = rehearsal({ plan: { runs } });
    const study = byId(await r.run());
    expect(study.get('arm-epp-completions-prefix')?.promptEvidence).toEqual({
      status: 'seen',
      component: 'GAIE EPP v1.0.1',
      metrics: { inference_extension_prefix_indexer_size: 4096 },
      detail: 'inference_extension_prefix_indexer_size is 4096 after the run',
    });
    // Chat runs are prompt-blind controls and ShareGPT runs are not about prefixes: no evidence asked.
    expect(study.get('arm-epp-prefix')?.promptEvidence).toBeUndefined();
    expect(study.get('arm-epp-completions-sharegpt')?.promptEvidence).toBeUndefined();
    expect(pickers.scraped).toEqual(['epp-completions']);
    for (const run of study.values()) expect(run.valid, run.invalidReasons.join()).toBe(true);
  });

  it('makes the run invalid, naming the metric, when the indexer is empty', async () => {
    const r = rehearsal({ plan: { runs } });
    pickers.indexerSize = { 'epp-completions': 0 };
    const study = byId(await r.run());
    const run = study.get('arm-epp-completions-prefix');
    expect(run?.valid).toBe(false);
    expect(run?.invalidReasons).toEqual([
      'front end did not see the prompts (GAIE EPP v1.0.1): inference_extension_prefix_indexer_size is 0 after the run: the EPP indexed no prompt, so its prefix-cache-scorer scored every pod 0',
    ]);
    expect(study.get('arm-epp-prefix')?.valid).toBe(true);
    expect(study.get('arm-epp-completions-sharegpt')?.valid).toBe(true);
  });

  it('for llm-d reads the KV-block index counters, and records the evidence as unavailable when they are not exported', async () => {
    const llmd = parseLabConfig({ study: { optionalArms: ['llmd-precise'] } });
    const llmdRun = findRun(studyPlan(llmd), 'arm-llmd-precise-completions-prefix');
    const seen = rehearsal({ config: llmd, plan: { runs: [llmdRun] }, hitRate: () => 0.7 });
    const [run] = (await seen.run()).runs;
    expect(run.valid, run.invalidReasons.join()).toBe(true);
    expect(run.promptEvidence).toMatchObject({
      status: 'seen',
      component: 'llm-d inference scheduler v0.3.2',
      metrics: { kvcache_index_lookup_requests_total: 1025, kvcache_index_admissions_total: 18432 },
    });

    const blind = rehearsal({ config: llmd, plan: { runs: [llmdRun] }, hitRate: () => 0.7 });
    pickers.llmdWithoutMetrics = true;
    const [unavailable] = (await blind.run()).runs;
    expect(unavailable.valid).toBe(true);
    expect(unavailable.promptEvidence?.status).toBe('unavailable');
    expect(unavailable.promptEvidence?.detail).toMatch(/enableMetrics: true/);
  });
});

describe('rehearsal: a preflight per front end', () => {
  it('sends one tiny request through each arm before its first run and before that run’s reset', async () => {
    const runs = ['arm-kube-proxy-prefix', 'arm-kube-proxy-sharegpt', 'arm-epp-completions-prefix'].map(
      (id) => findRun(plan, id),
    );
    const r = rehearsal({ plan: { runs } });
    const events: string[] = [];
    frontEnds.onRequest = (arm) => events.push(`preflight ${arm}`);
    for (const replica of replicas) replica.onReset = () => events.push(`reset ${replica.pod}`);
    const study = await r.run();
    expect(events).toEqual([
      'preflight kube-proxy',
      'reset qwen3-0',
      'reset qwen3-1',
      'reset qwen3-0',
      'reset qwen3-1',
      'preflight epp-completions',
      'reset qwen3-0',
      'reset qwen3-1',
    ]);
    expect(frontEnds.requests.map(({ arm, path, body }) => ({ arm, path, body }))).toEqual([
      {
        arm: 'kube-proxy',
        path: '/v1/chat/completions',
        body: { model: 'qwen3', messages: [{ role: 'user', content: 'Say OK.' }], max_tokens: 1 },
      },
      {
        arm: 'epp-completions',
        path: '/v1/completions',
        body: { model: 'qwen3', prompt: 'Say OK.', max_tokens: 1 },
      },
    ]);
    expect(study.runs[0].preflight?.ok).toBe(true);
    expect(study.runs[0].preflight?.detail).toMatch(
      new RegExp(
        `^POST ${frontEnds.url}/kube-proxy/v1/chat/completions answered 200 and qwen3-[01] counted it$`,
      ),
    );
    expect(study.runs[1].preflight).toBeUndefined();
    for (const run of study.runs) expect(run.valid, run.invalidReasons.join()).toBe(true);
  });

  it('marks every run of an arm whose preflight fails invalid, without running them', async () => {
    const runs = ['arm-kube-proxy-prefix', 'arm-epp-completions-prefix', 'arm-epp-completions-sharegpt'].map(
      (id) => findRun(plan, id),
    );
    const r = rehearsal({ plan: { runs } });
    frontEnds.failing.add('epp-completions');
    const study = byId(await r.run());
    const reason = `not started: preflight failed: POST ${frontEnds.url}/epp-completions/v1/completions answered HTTP 503: no healthy upstream`;
    for (const id of ['arm-epp-completions-prefix', 'arm-epp-completions-sharegpt']) {
      expect(study.get(id)?.valid, id).toBe(false);
      expect(study.get(id)?.invalidReasons, id).toEqual([reason]);
    }
    expect(study.get('arm-kube-proxy-prefix')?.valid).toBe(true);
    expect(r.cluster.created.map((j) => j.metadata.name)).toEqual(['bench-arm-kube-proxy-prefix']);
    // Once per arm: the second run of the failed arm sends nothing.
    expect(frontEnds.requests.filter((q) => q.arm === 'epp-completions')).toHaveLength(1);
    expect(r.cluster.restarted).toEqual([]);
  });

  it('fails a preflight whose request is answered but reaches no replica', async () => {
    const r = rehearsal({ plan: { runs: [findRun(plan, 'arm-epp-prefix')] } });
    frontEnds.blackHoles.add('epp');
    const [run] = (await r.run()).runs;
    expect(run.invalidReasons).toEqual([
      `not started: preflight failed: POST ${frontEnds.url}/epp/v1/chat/completions answered 200, but no replica of qwen3 counted a finished request within 30s`,
    ]);
  });

  describe('the AI Gateway arm also needs its route Accepted and ResolvedRefs and its Gateway Programmed', () => {
    const aiGateway = parseLabConfig({ study: { optionalArms: ['ai-gateway'] } });
    const run = findRun(studyPlan(aiGateway), 'arm-ai-gateway-completions-prefix');
    const routeStatus = (resolved: string) => ({
      parents: [
        {
          parentRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'ai-gateway' },
          controllerName: 'gateway.envoyproxy.io/gatewayclass-controller',
          conditions: [
            { type: 'Accepted', status: 'True', reason: 'Accepted', message: 'Route is accepted' },
            resolved === 'True'
              ? {
                  type: 'ResolvedRefs',
                  status: 'True',
                  reason: 'ResolvedRefs',
                  message: 'Resolved all the Object references for the Route',
                }
              : {
                  type: 'ResolvedRefs',
                  status: 'False',
                  reason: 'InvalidKind',
                  message: 'Kind InferencePool is not supported',
                },
          ],
        },
      ],
    });
    const programmed = { conditions: [{ type: 'Programmed', status: 'True', reason: 'Programmed' }] };

    it('runs, with prompt evidence from its EPP, when the conditions are True', async () => {
      const r = rehearsal({
        config: aiGateway,
        plan: { runs: [run] },
        hitRate: () => 0.7,
        statuses: { 'httproutes/ai-gateway': routeStatus('True'), 'gateways/ai-gateway': programmed },
      });
      const [record] = (await r.run()).runs;
      expect(record.valid, record.invalidReasons.join()).toBe(true);
      expect(record.preflight?.ok).toBe(true);
      expect(record.promptEvidence?.status).toBe('seen');
      expect(r.cluster.events.slice(0, 2)).toEqual([
        'status httproutes/ai-gateway',
        'status gateways/ai-gateway',
      ]);
    });

    it('is not started when ResolvedRefs is False (the manual lab’s InvalidKind)', async () => {
      const r = rehearsal({
        config: aiGateway,
        plan: { runs: [run] },
        statuses: { 'httproutes/ai-gateway': routeStatus('False') },
      });
      const [record] = (await r.run()).runs;
      expect(record.invalidReasons).toEqual([
        'not started: preflight failed: HTTPRoute vllm/ai-gateway on Gateway ai-gateway: ResolvedRefs is False (InvalidKind: Kind InferencePool is not supported); Gateway vllm/ai-gateway does not exist',
      ]);
      expect(frontEnds.requests).toEqual([]);
      expect(r.cluster.created).toEqual([]);
    });
  });
});
