import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { preflightStatusChecks } from '../../charts/study-runner.ts';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import { type RunnerOptions, runStudy } from '../../lib/runner/run-study.ts';
import type { StudyStatus } from '../../lib/runner/status.ts';
import { aimAtGate } from '../../lib/study/benchmark.ts';
import { type BenchmarkSpec, findRun, type StudyPlan, studyPlan } from '../../lib/study/plan.ts';
import type { RunRecord, StudyRecord } from '../../lib/study/results.ts';
import { armById, frontEnd } from '../../lib/study/topology.ts';
import { IDENTICAL_PREFIXES_REASON } from '../../lib/study/validity.ts';
import { tempDir } from '../temp.ts';
import {
  type ClientBehaviour,
  FakeClock,
  FakeCluster,
  type FakeClusterOptions,
  FakeEndpointPickers,
  FakeFrontEnds,
  FakeReplica,
  rehearsalDeps,
} from './fakes.ts';
import { ARM_RATES, BOUND_RATES, calibratedHitRate } from './rehearsal-kit.ts';

const config = defaultLabConfig();
const plan = studyPlan(config);
const unstaged = parseLabConfig({ runner: { stageNextRun: false } });

const hitRate = calibratedHitRate;

interface Rehearsal {
  readonly dir: string;
  readonly clock: FakeClock;
  readonly cluster: FakeCluster;
  readonly lines: string[];
  readonly run: () => Promise<StudyRecord>;
  /** The folder of the study the runner worked on (`studies/<id>`), named by status.json. */
  readonly study: () => string;
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
    outageAtRun?: FakeClusterOptions['outageAtRun'];
    pollErrorsAfterCreate?: number;
    pollStatus?: number;
    unschedulableAtRun?: string;
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
    r.outage = undefined;
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
      outageAtRun: setup.outageAtRun,
      pollErrorsAfterCreate: setup.pollErrorsAfterCreate,
      pollStatus: setup.pollStatus,
      unschedulableAtRun: setup.unschedulableAtRun,
    });
  const lines: string[] = [];
  const run = () =>
    runStudy(rehearsalDeps(usedConfig, { cluster, clock, dir, tokenFile, lines }), usedConfig, usedPlan, {
      replicaUrls: () => replicas.map((r) => r.url),
      frontEndUrl: (arm) => `${frontEnds.url}/${arm.id}`,
      eppMetricsUrl: (arm) => `${pickers.url}/${arm.id}`,
      statusChecks: preflightStatusChecks(usedConfig),
      ...setup.options,
    });
  const study = () => {
    const { studyId } = readJson<StudyStatus>(join(dir, 'status.json'));
    if (!studyId) throw new Error(`status.json in ${dir} names no study`);
    return join(dir, 'studies', studyId);
  };
  return { dir, clock, cluster, lines, run, study };
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
      // A bound run owns one replica and resets only its cache.
      expect(
        run.resets?.map((x) => `${x.pod} ${x.verifiedBy}`),
        run.id,
      ).toEqual((findRun(plan, run.id).reset.replicas ?? [0, 1]).map((i) => `qwen3-${i} log-confirmed`));
    }
    // The bound sweep ran one run per replica at once, and the records say which overlapped
    // (bound-p16 starts when bound-p128 ends, possibly while bound-p64 still runs).
    const overlaps = new Map(study.runs.map((run) => [run.id, run.overlappedWith ?? []]));
    expect(overlaps.get('bound-p128')).toContain('bound-p64');
    expect(overlaps.get('bound-p64')).toContain('bound-p128');
    expect(overlaps.get('bound-p16')).toContain('bound-p8');
    expect(overlaps.get('bound-p8')).toContain('bound-p16');
    expect(overlaps.get('bound-p128')).not.toContain('bound-p16');
    for (const run of study.runs.slice(4)) expect(run.overlappedWith, run.id).toBeUndefined();
    expect(byId(study).get('bound-p64')?.startedAt).toBe(byId(study).get('bound-p128')?.startedAt);
    // The completions arm of the EPP proved it saw prompts; its chat arm is a prompt-blind control.
    expect(byId(study).get('arm-epp-completions-prefix')?.promptEvidence?.status).toBe('seen');
    expect(byId(study).get('arm-epp-prefix')?.promptEvidence).toBeUndefined();
  });

  it('writes study.json, one file per run and a finished status', () => {
    expect(readJson<StudyRecord>(join(r.study(), 'study.json'))).toEqual(study);
    for (const run of study.runs) expect(readJson(join(r.study(), 'runs', `${run.id}.json`))).toEqual(run);
    const status = readJson<StudyStatus>(join(r.dir, 'status.json'));
    expect(status).toMatchObject({
      state: 'finished',
      totalRuns: 27,
      recordedRuns: 27,
      validRuns: 27,
      invalidRuns: 0,
    });
    expect(status.current).toBeUndefined();
    expect(status.studyId).toMatch(/^20251014-090000-[0-9a-f]{8}$/);
    expect(status.invalidRunIds).toEqual([]);
    expect(r.study()).toBe(join(r.dir, 'studies', status.studyId as string));
    expect(study.metadata.studyId).toBe(status.studyId);
    // The study folder keeps the client's JSON; the Job's output folder was only its scratch.
    expect(existsSync(join(r.study(), 'bound-p128', 'bound-p128.json'))).toBe(true);
    expect(existsSync(join(r.dir, 'bound-p128', 'bound-p128.json'))).toBe(false);
    expect(existsSync(join(r.dir, 'study.json'))).toBe(false);
    expect(readFileSync(join(r.study(), 'runner.log'), 'utf8')).toMatch(
      /study finished: 27 of 27 runs valid\n$/,
    );
    expect(readFileSync(join(r.study(), 'partition-r1', 'partition-r1.log'), 'utf8')).toMatch(
      /bench-partition-r1/,
    );
  });

  it('creates each client Job exactly as benchmarkJob builds it, the partition clients together', () => {
    // A staged run's client was created aimed at its gate (lib/study/staging.ts).
    const expected = plan.runs.flatMap((run) =>
      run.benchmarks.map((spec) => {
        const job = benchmarkJob(config, spec);
        if (!byId(study).get(run.id)?.staging) return job;
        const fe = frontEnd(config, armById(config, run.arm as string), 0);
        return aimAtGate(job, {
          baseUrl: `http://gate-${spec.id}.${config.namespace}.svc.cluster.local:${fe.port}`,
          // The worst case of the run before (stagedWaitLimitMs): 3 attempts of 182 minutes each
          // (readiness 2 x 10, two replicas' idle waits and confirmations 2 x 6, a pod restart 30, a
          // rollout 15, an API outage 15, the Job 60, its deletion 15, an outage 15), then this
          // run's 92 minutes before its gates open.
          readyCheckTimeoutSeconds: (3 * 182 + 92) * 60,
        });
      }),
    );
    expect(study.runs.filter((run) => run.staging).length).toBe(22);
    // The two runs of a bound-sweep wave create their Jobs in either order.
    const byName = (a: { metadata: { name: string } }, b: { metadata: { name: string } }) =>
      a.metadata.name.localeCompare(b.metadata.name);
    expect(r.cluster.created.slice(0, 2).sort(byName)).toEqual(expected.slice(0, 2).sort(byName));
    expect(r.cluster.created.slice(2, 4).sort(byName)).toEqual(expected.slice(2, 4).sort(byName));
    expect(r.cluster.created.slice(4)).toEqual(expected.slice(4));
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
    expect(split('bound-p128')).toEqual([1025]);
    expect(
      byId(study)
        .get('bound-p64')
        ?.replicas.map((rep) => [rep.pod, rep.requests]),
    ).toEqual([['qwen3-1', 1025]]);
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
    expect(rates.get('bound-p128')?.replicas.map((rep) => rep.pod)).toEqual(['qwen3-0']);
    expect(rates.get('bound-p8')?.replicas.map((rep) => rep.pod)).toEqual(['qwen3-1']);
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
    replicas.forEach((rep, i) => {
      const own = plan.runs.filter((run) => !run.reset.replicas || run.reset.replicas.includes(i));
      expect(rep.resets).toBeGreaterThanOrEqual(own.length);
    });
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
    // Each run takes 2 minutes of fake time (the fake Job's duration). The router arm's restart
    // happened during the run before (staging), so its Job starts at once; at run 7 six runs are
    // done: this one and 20 more to go.
    const line = r.lines.find((l) => l.startsWith('run 7/27 arm-router-round-robin-prefix: waiting for job'));
    expect(line).toMatch(
      /^run 7\/27 arm-router-round-robin-prefix: waiting for job \(elapsed 0s, study ETA \d+m\)$/,
    );
    expect(
      r.lines.some((l) =>
        /^run 7\/27 arm-router-round-robin-prefix: waiting for the front end restarted early \(elapsed 0s, study ETA \d+m\)$/.test(
          l,
        ),
      ),
    ).toBe(true);
    expect(
      r.lines.some((l) =>
        /^run 8\/27 arm-router-cache-aware-prefix: waiting for job \(elapsed 1m00s, study ETA \d+m\)$/.test(
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
  it('stops the study after the bound sweep with the reason and what to change, before any later run', async () => {
    const r = rehearsal({
      hitRate: (spec) =>
        spec.prefix?.prefixes === 128 && spec.target.kind === 'replica' ? 0.93 : hitRate(spec),
    });
    await expect(r.run()).rejects.toThrow(
      /identical prefixes.*14 prefix run\(s\) left would all be invalid\. To change: use a benchmark client/,
    );
    const study = readJson<StudyRecord>(join(r.study(), 'study.json'));
    expect(study.runs.map((run) => run.id)).toEqual(['bound-p128', 'bound-p64', 'bound-p16', 'bound-p8']);
    for (const run of study.runs) {
      expect(run.valid, run.id).toBe(false);
      expect(run.invalidReasons, run.id).toEqual([
        `${IDENTICAL_PREFIXES_REASON}: bound-p128 hit 93.0%, not at least 5 points below bound-p8 (92.3%)`,
      ]);
    }
    expect(study.metadata.stopped?.reason).toMatch(/^the dataset generator produced identical prefixes/);
    expect(study.metadata.stopped?.change).toContain('benchmark.image is vllm/vllm-openai:v0.11.0');
    expect(study.metadata.finishedAt).toBeUndefined();
    // No Job after the sweep: the rest would have cost about an hour of GPU time for nothing.
    // (The runs of a wave create their Jobs in either order.)
    expect(r.cluster.created.map((j) => j.metadata.name).sort()).toEqual([
      'bench-bound-p128',
      'bench-bound-p16',
      'bench-bound-p64',
      'bench-bound-p8',
    ]);
    // bound-p128 was recorded valid first, then marked invalid once bound-p8 was measured.
    const file = readJson<RunRecord>(join(r.study(), 'runs', 'bound-p128.json'));
    expect(file.valid).toBe(false);
    const status = readJson<StudyStatus>(join(r.dir, 'status.json'));
    expect(status).toMatchObject({ state: 'failed', invalidRuns: 4 });
    expect(status.invalidRunIds).toEqual(['bound-p128', 'bound-p64', 'bound-p16', 'bound-p8']);
    expect(status.error).toMatch(/To change: use a benchmark client/);
  });
});

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
    const first = rehearsal({ plan: { runs: plan.runs.slice(0, 1) } });
    await first.run();
    const earlier = first.study();
    const snapshot = readFileSync(join(earlier, 'study.json'), 'utf8');
    const other = { ...config, workload: { ...config.workload, prompts: 2048 } };
    const second = rehearsal({
      dir: first.dir,
      config: other,
      plan: { runs: studyPlan(other).runs.slice(0, 1) },
    });
    second.clock.ms += 3_600_000;
    const study = await second.run();
    expect(second.study()).not.toBe(earlier);
    expect(study.metadata.config.workload.prompts).toBe(2048);
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

  it('deletes a Job whose pod no node can take after 5 minutes, not the Job timeout, and says why', async () => {
    const r = rehearsal({
      plan: { runs: ['partition', 'arm-kube-proxy-prefix'].map((id) => findRun(plan, id)) },
      unschedulableAtRun: 'partition',
    });
    const study = byId(await r.run());
    const stuck = study.get('partition') as RunRecord;
    expect(stuck.clients.map((c) => c.job)).toEqual(['unschedulable', 'unschedulable']);
    expect(stuck.valid).toBe(false);
    expect(stuck.invalidReasons).toContain(
      "client partition-r0: Job never started: no node could take its pod (PodScheduled False, Unschedulable); the scheduler's message is in the client's log",
    );
    // Noticed within the pod polls after 5 minutes, far from the 60-minute Job timeout.
    expect(durationMs(stuck)).toBeGreaterThanOrEqual(5 * 60_000);
    expect(durationMs(stuck)).toBeLessThan(6 * 60_000);
    expect(readFileSync(join(r.study(), 'partition-r0', 'partition-r0.log'), 'utf8')).toMatch(
      /^pod bench-partition-r0-x7k2p of job\/bench-partition-r0 was Unschedulable for 5m\d\ds: 0\/1 nodes are available: 1 Insufficient memory\./,
    );
    expect(await r.cluster.getJob('bench-partition-r0')).toBeUndefined();
    // The study goes on.
    expect(study.get('arm-kube-proxy-prefix')?.valid).toBe(true);
  });

  it('waits until a timed-out Job and its pods are gone before the next run resets the caches', async () => {
    // The partition run uses both replicas, so it runs after bound-p128, not beside it.
    const r = rehearsal({
      plan: { runs: [findRun(plan, 'bound-p128'), findRun(plan, 'partition')] },
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
    expect(events.indexOf('create job/bench-partition-r0')).toBeGreaterThan(nextReset);
    // The timed-out run lasted until its Job was gone: the timeout plus the 30 s deletion.
    expect(durationMs(study.runs[0])).toBe(10 * 60_000 + 30_000);
    // Its client log was saved before its pod went away.
    expect(readFileSync(join(r.study(), 'bound-p128', 'bound-p128.log'), 'utf8')).toContain(
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
    expect(existsSync(join(r.study(), 'runs', 'partition.json'))).toBe(true);
  });
});

describe('rehearsal: resets are verified, not assumed', () => {
  // The partition run uses both replicas (a bound run owns one).
  const one = { runs: [findRun(plan, 'partition')] };

  it('records how every reset of the default study was verified: by the log line after the call', async () => {
    const r = rehearsal({ plan: { runs: plan.runs.slice(4, 6) } });
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
  it('sends one tiny request through each arm before the study’s first run and its first reset', async () => {
    const runs = ['arm-kube-proxy-prefix', 'arm-kube-proxy-sharegpt', 'arm-epp-completions-prefix'].map(
      (id) => findRun(plan, id),
    );
    const r = rehearsal({ plan: { runs } });
    const events: string[] = [];
    frontEnds.onRequest = (arm) => events.push(`preflight ${arm}`);
    for (const replica of replicas) replica.onReset = () => events.push(`reset ${replica.pod}`);
    const study = await r.run();
    // All before the first run: a preflight request never lands in a front end restarted early.
    expect(events).toEqual([
      'preflight kube-proxy',
      'preflight epp-completions',
      'reset qwen3-0',
      'reset qwen3-1',
      'reset qwen3-0',
      'reset qwen3-1',
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
    // Once per arm, its 503 tried three times (it may pass): the second run of the arm sends nothing.
    expect(frontEnds.requests.filter((q) => q.arm === 'epp-completions')).toHaveLength(3);
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

// ---- Issue 11: faults the runner survives ------------------------------------------------------

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
