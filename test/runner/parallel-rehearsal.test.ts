import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import { runStudy } from '../../lib/runner/run-study.ts';
import { pairSuffix } from '../../lib/study/pairs.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import type { StudyRecord } from '../../lib/study/results.ts';
import { tempDir } from '../temp.ts';
import { FakeCluster, FakeEndpointPickers, FakeFrontEnds, FakeReplica, rehearsalDeps } from './fakes.ts';
import { SharedFakeClock } from './network/fake-shared-clock.ts';
import { REHEARSAL_JOB_POLL_MS } from './rehearsal-kit.ts';

/**
 * The rehearsal of `study.parallelism: 2`: the real runner against the fake cluster with four
 * loopback replicas, two per pair (`qwen3-0`, `qwen3-1` and `qwen3-b-0`, `qwen3-b-1`). Every
 * run must be valid, which it can only be when each run's requests land on its own pair's
 * replicas (the runner checks the request counts of the replicas it scraped).
 */

const config = parseLabConfig({ study: { parallelism: 2 } });
const plan = studyPlan(config);

let replicas: FakeReplica[];
let frontEnds: FakeFrontEnds;
let pickers: FakeEndpointPickers;
let cluster: FakeCluster;
let study: StudyRecord;
let lines: string[];
let dir: string;

beforeAll(async () => {
  replicas = ['qwen3-0', 'qwen3-1', 'qwen3-b-0', 'qwen3-b-1'].map((pod) => new FakeReplica(pod));
  for (const r of replicas) await r.start();
  frontEnds = new FakeFrontEnds(replicas);
  // A front end on pair 1 (path `<arm>-b`) sends to pair 1's replicas only.
  frontEnds.replicasOf = (arm) => (arm.endsWith('-b') ? replicas.slice(2) : replicas.slice(0, 2));
  await frontEnds.start();
  pickers = new FakeEndpointPickers();
  await pickers.start();
  dir = tempDir('lab-parallel-');
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, pickers.token);
  // One time line for the two pairs' runs, which wait at once.
  const clock = new SharedFakeClock();
  cluster = new FakeCluster({
    config,
    plan,
    replicas,
    resultsDir: dir,
    clock,
    // Lab-spec 4.1's calibration rates for the bound sweep (distinct prefixes), made-up others.
    hitRate: (spec) =>
      spec.dataset === 'sharegpt'
        ? 0.05
        : spec.target.kind === 'arm'
          ? 0.6
          : ({ 128: 0.444, 64: 0.776, 16: 0.909, 8: 0.923 }[spec.prefix?.prefixes ?? 0] ?? 0.81),
  });
  lines = [];
  study = await runStudy(rehearsalDeps(config, { cluster, clock, dir, tokenFile, lines }), config, plan, {
    replicaUrls: (_servers, pair) => replicas.slice(pair * 2, pair * 2 + 2).map((r) => r.url),
    frontEndUrl: (arm, pair) => `${frontEnds.url}/${arm.id}${pairSuffix(pair)}`,
    eppMetricsUrl: (arm) => `${pickers.url}/${arm.id}`,
    jobPollIntervalMs: REHEARSAL_JOB_POLL_MS,
  });
}, 120_000);

afterAll(async () => {
  for (const r of replicas) await r.stop();
  await frontEnds.stop();
  await pickers.stop();
});

const record = (id: string) => study.runs.find((r) => r.id === id);

describe('the rehearsal with study.parallelism: 2', () => {
  it('records every run of the plan as valid, in study.json and in one file per run', () => {
    expect(study.runs.map((r) => r.id)).toEqual(plan.runs.map((r) => r.id));
    const folder = join(dir, 'studies', study.metadata.studyId as string);
    const saved = JSON.parse(readFileSync(join(folder, 'study.json'), 'utf8')) as StudyRecord;
    expect(saved.runs.map((r) => [r.id, r.valid])).toEqual(plan.runs.map((r) => [r.id, true]));
    expect(readdirSync(join(folder, 'runs')).length).toBe(plan.runs.length);
    const invalid = study.runs.filter((r) => !r.valid).map((r) => `${r.id}: ${r.invalidReasons.join('; ')}`);
    expect(invalid).toEqual([]);
  });

  it('runs the four bound runs at once, one per replica of both pairs, and says which overlapped', () => {
    expect(record('bound-p8')?.replicas.map((r) => r.pod)).toEqual(['qwen3-b-1']);
    expect(record('bound-p16')?.replicas.map((r) => r.pod)).toEqual(['qwen3-b-0']);
    // (The partition may join them: it starts on pair 1 once pair 1's bound runs are done.)
    expect(record('bound-p128')?.overlappedWith).toEqual(
      expect.arrayContaining(['bound-p16', 'bound-p64', 'bound-p8']),
    );
  });

  it('runs pair 1 beside pair 0: its runs use the -b replicas and front ends and overlap pair 0 runs', () => {
    const pairOne = plan.runs.filter((run) => run.reset.pair === 1 && run.group !== 'bound');
    expect(pairOne.length).toBe(12);
    // Every run of pair 1 but its last ran beside a run of pair 0.
    const alone = pairOne.filter((run) => (record(run.id)?.overlappedWith ?? []).length === 0);
    expect(alone.map((run) => run.id)).toEqual(alone.length === 0 ? [] : [pairOne.at(-1)?.id]);
    for (const run of pairOne) {
      const saved = record(run.id);
      expect(
        saved?.replicas.map((r) => r.pod),
        run.id,
      ).toEqual(['qwen3-b-0', 'qwen3-b-1']);
      for (const other of saved?.overlappedWith ?? [])
        expect(plan.runs.find((r) => r.id === other)?.reset.pair ?? 0, `${run.id} beside ${other}`).toBe(0);
    }
    expect(cluster.restarted).toContain('vllm-router-cache-aware-b');
    expect(cluster.restarted).toContain('qwen3-epp-b');
    expect(cluster.restarted).toContain('vllm-router-cache-aware');
    // Each pair's front end had its own preflight, before its first run.
    const preflighted = new Set(frontEnds.requests.map((r) => r.arm));
    expect(preflighted.has('kube-proxy-b')).toBe(true);
    expect(preflighted.has('kube-proxy')).toBe(true);
    expect(lines.some((line) => line.startsWith('preflight of router-cache-aware-b: passed'))).toBe(true);
    // Pair 1's clients call pair 1's front end: a staged one through a gate that opened to it.
    const staged = record('arm-kube-proxy-sharegpt')?.staging;
    expect(staged?.gates).toEqual({ 'gate-arm-kube-proxy-sharegpt': 'qwen3-nodeport-b' });
    expect(cluster.events).toContain('open service/gate-arm-kube-proxy-sharegpt');
    const job = cluster.created.find((j) => j.metadata.name === 'bench-arm-kube-proxy-sharegpt');
    expect(JSON.stringify(job)).toContain('gate-arm-kube-proxy-sharegpt.vllm.svc.cluster.local');
  });

  it('never runs two runs of one pair at once', () => {
    const spans = study.runs.map((r) => ({
      id: r.id,
      pair: plan.runs.find((p) => p.id === r.id)?.reset.pair ?? 0,
      bound: r.group === 'bound',
      from: Date.parse(r.startedAt),
      to: Date.parse(r.finishedAt),
    }));
    for (const a of spans)
      for (const b of spans) {
        if (a.id >= b.id || a.pair !== b.pair || (a.bound && b.bound)) continue;
        expect(a.to <= b.from || b.to <= a.from, `${a.id} and ${b.id} on pair ${a.pair}`).toBe(true);
      }
  });
});
