import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import type { StudyStatus } from '../../lib/runner/status.ts';
import { aimAtGate } from '../../lib/study/benchmark.ts';
import { findRun } from '../../lib/study/plan.ts';
import type { RunRecord, StudyRecord } from '../../lib/study/results.ts';
import { armById, frontEnd } from '../../lib/study/topology.ts';
import { IDENTICAL_PREFIXES_REASON } from '../../lib/study/validity.ts';
import { ARM_RATES, BOUND_RATES } from './rehearsal-kit.ts';
import {
  byId,
  config,
  durationMs,
  hitRate,
  plan,
  type Rehearsal,
  readJson,
  rehearsal,
  replicas,
  useRehearsalServers,
} from './rehearsal-setup.ts';

/** Rehearsals of the whole default study: every run valid, broken runs invalid with their reason, a study stopped by identical prefixes. */

useRehearsalServers();

describe('rehearsal: the whole default study against a fake cluster and loopback replicas', () => {
  let r: Rehearsal;
  let study: StudyRecord;

  /**
   * The whole study, run by the first test that reads it, not in `beforeAll`: vitest's per-file
   * times, which test/file-weights.json is written from, leave hooks out, so the file weighed a
   * third of its cost and ran late in a suite. The same for the broken runs' study below.
   */
  let made: Promise<void> | undefined;
  const wholeStudy = (): Promise<void> => {
    made ??= runWholeStudy();
    return made;
  };
  async function runWholeStudy(): Promise<void> {
    // The runner's own Job poll (every second), which the other rehearsals make coarser.
    r = rehearsal({ options: { jobPollIntervalMs: undefined } });
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
  }

  it('records every run of the plan, in order, each valid', async () => {
    await wholeStudy();
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

  it('writes study.json, one file per run and a finished status', async () => {
    await wholeStudy();
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

  it('creates each client Job exactly as benchmarkJob builds it, the partition clients together', async () => {
    await wholeStudy();
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

  it('per-replica requests add up to the prompts plus one warm-up per client', async () => {
    await wholeStudy();
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

  it('measures the hit rates the replicas served', async () => {
    await wholeStudy();
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

  it('carries the client numbers into each run summary', async () => {
    await wholeStudy();
    const summary = byId(study).get('partition')?.summary;
    expect(summary).toMatchObject({
      completed: 1024,
      failed: 0,
      p99TtftMs: 812.5,
    });
    // Two clients of equal duration: all tokens over the longest duration.
    expect(summary?.totalTokenThroughput).toBeCloseTo(2 * 12_929, 6);
  });

  it('reset every cache through the endpoint and restarted each front end that keeps a prefix index', async () => {
    await wholeStudy();
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

  it('records the study metadata once', async () => {
    await wholeStudy();
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

  it('logs progress with the elapsed time and a study ETA from the mean run duration', async () => {
    await wholeStudy();
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

  let made: Promise<void> | undefined;
  const brokenStudy = (): Promise<void> => {
    made ??= (async () => {
      const r = rehearsal({
        behaviour: {
          'arm-kube-proxy-prefix': { noResultFile: true },
          'arm-epp-prefix': { completed: 1000 },
          'arm-router-round-robin-prefix': { metricsVanish: true },
        },
      });
      study = byId(await r.run());
    })();
    return made;
  };

  it('a missing result file', async () => {
    await brokenStudy();
    expect(study.get('arm-kube-proxy-prefix')).toMatchObject({
      valid: false,
      invalidReasons: ['client arm-kube-proxy-prefix: result file arm-kube-proxy-prefix.json is missing'],
    });
    expect(study.get('arm-kube-proxy-prefix')?.summary).toBeUndefined();
  });

  it('completed below the prompt count (and the replicas did not serve the rest)', async () => {
    await brokenStudy();
    const run = study.get('arm-epp-prefix');
    expect(run?.valid).toBe(false);
    expect(run?.invalidReasons).toEqual([
      'client arm-epp-prefix: completed 1000 of 1024 prompts (24 failed)',
      'replicas served 1001 requests (qwen3-0 501, qwen3-1 500), expected 1025 (prompts plus one warm-up per client)',
    ]);
    expect(run?.summary?.failed).toBe(24);
  });

  it('metrics absent', async () => {
    await brokenStudy();
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

  it('every other run stays valid', async () => {
    await brokenStudy();
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
