import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import { KubeApiError } from '../../lib/runner/kube-cluster.ts';
import { runStudy } from '../../lib/runner/run-study.ts';
import { findRun, type StudyPlan, studyPlan } from '../../lib/study/plan.ts';
import type { RunRecord, StudyRecord } from '../../lib/study/results.ts';
import { armById, frontEnd } from '../../lib/study/topology.ts';
import { tempDir } from '../temp.ts';
import {
  type ClientBehaviour,
  FakeCluster,
  FakeEndpointPickers,
  FakeFrontEnds,
  FakeReplica,
  rehearsalDeps,
} from './fakes.ts';
import { SharedFakeClock } from './network/fake-shared-clock.ts';
import { REHEARSAL_JOB_POLL_MS } from './rehearsal-kit.ts';

/**
 * Staging (lib/study/staging.ts) rehearsed: the real runner against the fake cluster, whose
 * clients take 30 s to start and whose staged clients send nothing until their gate opens. A
 * gate opened before the run's reset and scrape would show in the replicas' request counts, which
 * the runner checks, so "every run valid" is itself evidence of the order.
 */

const JOB_START_SECONDS = 30;
const JOB_SECONDS = 120;
const RUNS = [
  'partition',
  'arm-kube-proxy-prefix',
  'arm-router-cache-aware-prefix',
  'arm-router-cache-aware-sharegpt',
  'arm-kube-proxy-sharegpt',
];

interface Setup {
  readonly config?: LabConfig;
  readonly runs?: readonly string[];
  readonly stagedClientsEnd?: boolean;
  readonly leftoverGates?: readonly string[];
  readonly behaviour?: Readonly<Record<string, ClientBehaviour>>;
  /** Called with the replicas before the study starts. */
  readonly prepare?: (replicas: readonly FakeReplica[]) => void;
}

const servers: { stop(): Promise<void> }[] = [];

afterEach(async () => {
  for (const s of servers.splice(0)) await s.stop();
});

async function rehearse(setup: Setup = {}) {
  const config = setup.config ?? parseLabConfig({});
  const full = studyPlan(config);
  const plan: StudyPlan = { runs: (setup.runs ?? RUNS).map((id) => findRun(full, id)) };
  const replicas = [new FakeReplica('qwen3-0'), new FakeReplica('qwen3-1')];
  for (const r of replicas) await r.start();
  const frontEnds = new FakeFrontEnds(replicas);
  await frontEnds.start();
  const pickers = new FakeEndpointPickers();
  await pickers.start();
  servers.push(...replicas, frontEnds, pickers);
  const dir = tempDir('lab-staging-');
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, pickers.token);
  // One time line for the run and the next run's staged client (they wait at once).
  const clock = new SharedFakeClock();
  const cluster = new FakeCluster({
    config,
    plan,
    replicas,
    resultsDir: dir,
    clock,
    hitRate: (spec) => (spec.dataset === 'sharegpt' ? 0.05 : 0.6),
    jobSeconds: JOB_SECONDS,
    jobStartSeconds: JOB_START_SECONDS,
    stagedClientsEnd: setup.stagedClientsEnd,
    leftoverGates: setup.leftoverGates,
    behaviour: setup.behaviour,
  });
  // One timeline: the cluster's events and every replica's reset.
  for (const r of replicas) r.onReset = () => cluster.events.push(`reset ${r.pod}`);
  setup.prepare?.(replicas);
  const lines: string[] = [];
  const started = clock.ms;
  const run = () =>
    runStudy(rehearsalDeps(config, { cluster, clock, dir, tokenFile, lines }), config, plan, {
      replicaUrls: () => replicas.map((r) => r.url),
      frontEndUrl: (arm) => `${frontEnds.url}/${arm.id}`,
      eppMetricsUrl: (arm) => `${pickers.url}/${arm.id}`,
      jobPollIntervalMs: REHEARSAL_JOB_POLL_MS,
    });
  return { config, cluster, clock, lines, run, elapsedMs: () => clock.ms - started };
}

const byId = (study: StudyRecord) => new Map(study.runs.map((r) => [r.id, r]));
const gatesLeft = (cluster: FakeCluster) => [...cluster.services.keys()].filter((n) => n.startsWith('gate-'));

describe('staging: the next run’s clients start behind a closed gate during the run before', () => {
  it('stages every arm run, opens its gate only after its reset, and every run is valid', async () => {
    const r = await rehearse();
    const study = byId(await r.run());
    for (const run of study.values()) expect(run.invalidReasons, run.id).toEqual([]);
    // The partition aims at replicas directly: nothing stages it. Every arm run is staged during
    // the run before it.
    expect(study.get('partition')?.staging).toBeUndefined();
    const order = RUNS;
    for (const [i, id] of order.entries()) {
      if (i === 0) continue;
      const record = study.get(id) as RunRecord;
      const before = study.get(order[i - 1]) as RunRecord;
      expect(record.staging?.during, id).toBe(order[i - 1]);
      expect(record.staging?.fellBack, id).toBeUndefined();
      // Created while the run before still ran; opened once this run had started.
      expect(Date.parse(record.staging?.clientsCreatedAt ?? '')).toBeLessThan(Date.parse(before.finishedAt));
      expect(Date.parse(record.staging?.gatesOpenedAt ?? '')).toBeGreaterThanOrEqual(
        Date.parse(record.startedAt),
      );
      // The gate is a copy of the front end's own Service.
      const fe = frontEnd(r.config, armById(r.config, record.arm as string), 0);
      expect(record.staging?.gates).toEqual({ [`gate-${id}`]: fe.service });
      // On one timeline: the client exists, then this run's caches are reset, then the gate opens.
      const events = r.cluster.events;
      const created = events.indexOf(`create job/bench-${id}`);
      const opened = events.indexOf(`open service/gate-${id}`);
      const resets = events.flatMap((e, at) => (e.startsWith('reset ') && at > created ? [at] : []));
      expect(created, id).toBeGreaterThanOrEqual(0);
      expect(opened, id).toBeGreaterThan(created);
      expect(
        resets.filter((at) => at < opened),
        id,
      ).toHaveLength(2);
    }
    // Nothing of the gates is left.
    expect(gatesLeft(r.cluster)).toEqual([]);
  });

  it('restarts the next front end during the run before when that run does not use it', async () => {
    const r = await rehearse();
    const study = byId(await r.run());
    const early = study.get('arm-router-cache-aware-prefix') as RunRecord;
    expect(Date.parse(early.staging?.frontEndRestartedAt ?? '')).toBeLessThan(
      Date.parse(study.get('arm-kube-proxy-prefix')?.finishedAt ?? ''),
    );
    // Its ShareGPT control follows on the same router: restarted after its own reset, as unstaged.
    const same = study.get('arm-router-cache-aware-sharegpt') as RunRecord;
    expect(same.staging?.frontEndRestartedAt).toBeUndefined();
    expect(r.cluster.restarted).toEqual(['vllm-router-cache-aware', 'vllm-router-cache-aware']);
    const lastReset = r.cluster.events.lastIndexOf(
      'reset qwen3-1',
      r.cluster.events.indexOf('open service/gate-arm-router-cache-aware-sharegpt'),
    );
    expect(lastReset).toBeGreaterThan(
      r.cluster.events.indexOf('create job/bench-arm-router-cache-aware-sharegpt'),
    );
  });

  it('hides each staged client’s start: the study takes at least 30 s less per staged run', async () => {
    const staged = await rehearse();
    await staged.run();
    const unstaged = await rehearse({ config: parseLabConfig({ runner: { stageNextRun: false } }) });
    const study = await unstaged.run();
    for (const run of study.runs) expect(run.staging, run.id).toBeUndefined();
    expect(unstaged.cluster.events.filter((e) => e.includes('service/'))).toEqual([]);
    // Unstaged, each client is exactly the published command.
    const config = unstaged.config;
    const full = studyPlan(config);
    expect(unstaged.cluster.created).toEqual(
      RUNS.flatMap((id) => findRun(full, id).benchmarks.map((spec) => benchmarkJob(config, spec))),
    );
    const saved = unstaged.elapsedMs() - staged.elapsedMs();
    expect(saved).toBeGreaterThanOrEqual((RUNS.length - 1) * JOB_START_SECONDS * 1000);
  });
});

describe('staging: what it leaves behind when it cannot be used', () => {
  it('falls back when a staged client ends before its gate opens, and turns staging off when the next one does too', async () => {
    const r = await rehearse({ stagedClientsEnd: true });
    const study = byId(await r.run());
    for (const run of study.values()) expect(run.invalidReasons, run.id).toEqual([]);
    const first = study.get('arm-kube-proxy-prefix') as RunRecord;
    expect(first.staging?.fellBack).toMatch(
      /^staged job\/bench-arm-kube-proxy-prefix ended \(failed\) before its gate opened/,
    );
    expect(first.staging?.gatesOpenedAt).toBeUndefined();
    // Once can be an evicted pod; twice in a row is the client image.
    expect(study.get(RUNS[2])?.staging?.fellBack).toMatch(/ended \(failed\) before its gate opened/);
    for (const id of RUNS.slice(3)) expect(study.get(id)?.staging, id).toBeUndefined();
    expect(r.lines.some((l) => l.includes('staging is off for the rest of the study'))).toBe(true);
    // The failed staged Job was gone before its run's own client was created.
    const events = r.cluster.events;
    expect(events.indexOf('gone job/bench-arm-kube-proxy-prefix')).toBeLessThan(
      events.lastIndexOf('create job/bench-arm-kube-proxy-prefix'),
    );
    expect(gatesLeft(r.cluster)).toEqual([]);
  });

  it('removes a staged run’s client and gate when the study stops before it starts', async () => {
    let resets = 0;
    const r = await rehearse({
      runs: ['arm-kube-proxy-prefix', 'arm-kube-proxy-sharegpt', 'arm-router-cache-aware-prefix'],
      // From the second run's reset on, no replica exposes vLLM metrics: the study stops there.
      prepare: (replicas) => {
        for (const replica of replicas)
          replica.onReset = () => {
            if (++resets > 2) for (const x of replicas) x.blankScrapes = 1_000;
          };
      },
    });
    await expect(r.run()).rejects.toThrow(/no replica exposes vLLM metrics/);
    expect(r.cluster.events).toContain('create job/bench-arm-kube-proxy-sharegpt');
    expect(r.cluster.events).toContain('delete job/bench-arm-kube-proxy-sharegpt');
    expect(r.cluster.events).not.toContain('open service/gate-arm-kube-proxy-sharegpt');
    expect(gatesLeft(r.cluster)).toEqual([]);
    expect(await r.cluster.getJob('bench-arm-kube-proxy-sharegpt')).toBeUndefined();
  });

  it('falls back for one run when one staged client ended (an evicted pod), and stages the later runs', async () => {
    const r = await rehearse();
    const getJob = r.cluster.getJob.bind(r.cluster);
    let looks = 0;
    // The staged client of arm-kube-proxy-prefix is seen ended when its gate would open.
    r.cluster.getJob = async (name) =>
      name === 'bench-arm-kube-proxy-prefix' && ++looks === 2 ? { failed: 1 } : getJob(name);
    const study = byId(await r.run());
    for (const run of study.values()) expect(run.invalidReasons, run.id).toEqual([]);
    expect(study.get('arm-kube-proxy-prefix')?.staging?.fellBack).toMatch(/its pod was evicted, or/);
    for (const id of RUNS.slice(2)) expect(study.get(id)?.staging?.gatesOpenedAt, id).toBeDefined();
    expect(r.lines.some((l) => l.includes('staging is off'))).toBe(false);
  });

  it('starts a run unstaged when its gate cannot be opened, instead of stopping the study', async () => {
    const r = await rehearse();
    const open = r.cluster.setServiceSelector.bind(r.cluster);
    let refused = false;
    r.cluster.setServiceSelector = async (name, selector) => {
      if (name === 'gate-arm-kube-proxy-prefix' && !refused) {
        refused = true;
        throw new KubeApiError(
          'PATCH',
          `/api/v1/namespaces/vllm/services/${name}`,
          403,
          '{"kind":"Status","message":"forbidden"}',
        );
      }
      await open(name, selector);
    };
    const study = byId(await r.run());
    for (const run of study.values()) expect(run.invalidReasons, run.id).toEqual([]);
    expect(study.get('arm-kube-proxy-prefix')?.staging?.fellBack).toMatch(
      /^the gates of arm-kube-proxy-prefix could not be opened \(PATCH .* HTTP 403: forbidden\)/,
    );
    expect(r.cluster.events).toContain('create job/bench-arm-kube-proxy-prefix');
    for (const id of RUNS.slice(2)) expect(study.get(id)?.staging?.gatesOpenedAt, id).toBeDefined();
    expect(gatesLeft(r.cluster)).toEqual([]);
  });

  it('deletes the gates a killed runner left before the study starts', async () => {
    const r = await rehearse({ runs: ['arm-kube-proxy-prefix'], leftoverGates: ['gate-arm-epp-prefix'] });
    await r.run();
    expect(r.cluster.events).toContain('delete service/gate-arm-epp-prefix');
    expect(r.lines).toContain('deleting service/gate-arm-epp-prefix, a gate an earlier runner left');
    expect(gatesLeft(r.cluster)).toEqual([]);
  });
});
