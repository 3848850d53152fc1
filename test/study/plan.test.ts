import { describe, expect, it } from 'vitest';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import { findRun, runPrerequisites, type StudyRun, studyPlan } from '../../lib/study/plan.ts';
import { armById, frontEnd } from '../../lib/study/topology.ts';

const ids = (overrides: object = {}) => studyPlan(parseLabConfig(overrides)).runs.map((run) => run.id);

/**
 * The arms as the plan runs them: `epp-completions` shares the EPP with `epp`, so it moves back
 * to the latest place between two arms it shares nothing with (apartFrontEnds).
 */
const PLAN_ARM_ORDER = [
  'kube-proxy',
  'router-round-robin',
  'router-cache-aware',
  'router-cache-aware-tuned',
  'router-round-robin-completions',
  'router-cache-aware-completions',
  'epp-completions',
  'router-cache-aware-tuned-completions',
  'epp',
];

describe('studyPlan (docs/facts.md §4.2)', () => {
  const config = defaultLabConfig();
  const plan = studyPlan(config);

  it('lists the default study in order: bound sweep, partition, every arm per dataset, concurrency sweep', () => {
    expect(plan.runs.map((run) => run.id)).toEqual([
      'bound-p128',
      'bound-p64',
      'bound-p16',
      'bound-p8',
      'partition',
      ...PLAN_ARM_ORDER.map((arm) => `arm-${arm}-prefix`),
      ...PLAN_ARM_ORDER.map((arm) => `arm-${arm}-sharegpt`),
      'sweep-c4-kube-proxy',
      'sweep-c4-router-cache-aware',
      'sweep-c8-kube-proxy',
      'sweep-c8-router-cache-aware',
    ]);
    expect(new Set(plan.runs.map((run) => run.id)).size).toBe(plan.runs.length);
  });

  // Two arms can share a front end (epp and epp-completions share the EPP): lib/study/staging.ts
  // restarts early only a front end the current run does not use.
  it('never runs one arm twice in a row, so the next front end can restart during a run', () => {
    const configs = [
      config,
      parseLabConfig({ study: { repeats: 2 } }),
      parseLabConfig({ study: { optionalArms: ['llmd-precise', 'epp-prefix3'] } }),
    ];
    for (const c of configs) {
      const runs = studyPlan(c).runs;
      const twice = runs.slice(1).filter((run, i) => run.arm !== undefined && run.arm === runs[i].arm);
      expect(twice.map((run) => run.id)).toEqual([]);
      // Nor two arms that restart the same Deployment (a chat arm and its completions arm).
      const restarts = (run: StudyRun) =>
        run.reset.restartFrontEndOf
          ? frontEnd(c, armById(c, run.reset.restartFrontEndOf), 0).restartDeployments
          : [];
      const shared = runs
        .slice(1)
        .filter((run, i) => restarts(run).some((name) => restarts(runs[i]).includes(name)));
      expect(shared.map((run) => run.id)).toEqual([]);
    }
  });

  it('sends each upper-bound run straight to one replica, alternating, with the swept prefix count', () => {
    const run = findRun(plan, 'bound-p64');
    expect(run.group).toBe('bound');
    expect(run.benchmarks).toEqual([
      {
        id: 'bound-p64',
        target: { kind: 'replica', servers: 'standard', replica: 1 },
        api: 'chat',
        dataset: 'prefix',
        prompts: 1024,
        concurrency: 32,
        seed: 42,
        prefix: { prefixes: 64, prefixLen: 2048, suffixLen: 128, outputLen: 128 },
        resultFile: 'bound-p64.json',
      },
    ]);
    expect(run.reset).toEqual({ prefixCaches: 'standard', replicas: [1] });
    expect(
      ['bound-p128', 'bound-p16', 'bound-p8'].map((id) => findRun(plan, id).benchmarks[0].target),
    ).toEqual([0, 0, 1].map((replica) => ({ kind: 'replica', servers: 'standard', replica })));
    expect(run.expectedRequests).toBe(1025);
    expect(findRun(plan, 'bound-p128').upperBound).toBeCloseTo((7 / 8) * (2048 / 2186), 12);
  });

  it('lets each bound run wait only for the earlier one on its replica; every other run waits for all before it', () => {
    const after = runPrerequisites(plan);
    expect(
      ['bound-p128', 'bound-p64', 'bound-p16', 'bound-p8', 'partition'].map((id) => after.get(id)),
    ).toEqual([[], [], ['bound-p128'], ['bound-p64'], ['bound-p128', 'bound-p64', 'bound-p16', 'bound-p8']]);
    plan.runs.slice(5).forEach((run, i) => {
      expect(after.get(run.id)).toEqual(plan.runs.slice(0, i + 5).map((r) => r.id));
    });
  });
  it('gives each replica 64 prefixes, 512 prompts and concurrency 16 with its own seed in the ideal partition', () => {
    const run = findRun(plan, 'partition');
    expect(
      run.benchmarks.map((b) => [b.id, b.target, b.prompts, b.concurrency, b.seed, b.prefix?.prefixes]),
    ).toEqual([
      ['partition-r0', { kind: 'replica', servers: 'standard', replica: 0 }, 512, 16, 42, 64],
      ['partition-r1', { kind: 'replica', servers: 'standard', replica: 1 }, 512, 16, 4242, 64],
    ]);
    // Together: 1,024 prompts and two warm-ups.
    expect(run.expectedRequests).toBe(1026);
  });

  it('runs every arm with the prefix workload and the ShareGPT control through its front end', () => {
    const prefix = findRun(plan, 'arm-router-cache-aware-completions-prefix');
    expect(prefix.arm).toBe('router-cache-aware-completions');
    expect(prefix.benchmarks[0]).toMatchObject({
      target: { kind: 'arm', arm: 'router-cache-aware-completions' },
      api: 'completions',
      dataset: 'prefix',
      prompts: 1024,
      concurrency: 32,
    });
    // Over /v1/completions no chat template is sent: L = 2,048 + 128.
    expect(prefix.upperBound).toBeCloseTo((7 / 8) * (2048 / 2176), 12);
    expect(findRun(plan, 'sweep-c4-router-cache-aware').upperBound).toBeCloseTo((7 / 8) * (2048 / 2186), 12);
    expect(findRun(plan, 'arm-router-cache-aware-prefix').upperBound).toBeCloseTo(
      (7 / 8) * (2048 / 2186),
      12,
    );
    const sharegpt = findRun(plan, 'arm-epp-sharegpt');
    expect(sharegpt.dataset).toBe('sharegpt');
    expect(sharegpt.benchmarks[0].prefix).toBeUndefined();
    expect(sharegpt.upperBound).toBeUndefined();
  });

  it('resets the caches before every run and restarts front ends that keep a prefix index', () => {
    expect(findRun(plan, 'arm-kube-proxy-prefix').reset).toEqual({ prefixCaches: 'standard' });
    expect(findRun(plan, 'arm-router-round-robin-sharegpt').reset).toEqual({
      prefixCaches: 'standard',
      restartFrontEndOf: 'router-round-robin',
    });
    expect(findRun(plan, 'arm-epp-prefix').reset.restartFrontEndOf).toBe('epp');
    expect(plan.runs.every((run) => run.reset.prefixCaches)).toBe(true);
  });

  it('sweeps concurrency on the prefix workload only', () => {
    const run = findRun(plan, 'sweep-c4-router-cache-aware');
    expect(run.group).toBe('sweep');
    expect(run.benchmarks[0]).toMatchObject({ concurrency: 4, dataset: 'prefix', prompts: 1024 });
  });

  it('adds the optional arms after the sweep, llm-d on its own replicas', () => {
    const runs = ids({ study: { optionalArms: ['llmd-precise', 'epp-prefix3'] } });
    // Each completions arm shares its front end with its chat arm: they are kept apart.
    expect(runs.slice(-8)).toEqual([
      'arm-epp-prefix3-prefix',
      'arm-llmd-precise-completions-prefix',
      'arm-epp-prefix3-completions-prefix',
      'arm-llmd-precise-prefix',
      'arm-epp-prefix3-sharegpt',
      'arm-llmd-precise-completions-sharegpt',
      'arm-epp-prefix3-completions-sharegpt',
      'arm-llmd-precise-sharegpt',
    ]);
    const llmdPlan = studyPlan(parseLabConfig({ study: { optionalArms: ['llmd-precise'] } }));
    const llmd = findRun(llmdPlan, 'arm-llmd-precise-prefix');
    expect(llmd.reset).toEqual({ prefixCaches: 'kv-events', restartFrontEndOf: 'llmd-precise' });
    // The completions arm goes through the same front end, restarted the same way.
    const llmdCompletions = findRun(llmdPlan, 'arm-llmd-precise-completions-prefix');
    expect(llmdCompletions.reset).toEqual({
      prefixCaches: 'kv-events',
      restartFrontEndOf: 'llmd-precise-completions',
    });
    expect(llmdCompletions.benchmarks[0].api).toBe('completions');
  });

  it('follows a changed study: no control, no completions arms, another sweep', () => {
    expect(
      ids({
        study: {
          boundSweepPrefixes: [128],
          sharegptControl: false,
          completionsArms: false,
          concurrencySweep: { levels: [16], arms: ['epp'] },
        },
      }),
    ).toEqual([
      'bound-p128',
      'partition',
      'arm-kube-proxy-prefix',
      'arm-router-round-robin-prefix',
      'arm-router-cache-aware-prefix',
      'arm-router-cache-aware-tuned-prefix',
      'arm-epp-prefix',
      'sweep-c16-epp',
    ]);
  });

  it('splits the partition unevenly but completely over three replicas', () => {
    const three = studyPlan(
      parseLabConfig({ vllm: { replicas: 3 }, workload: { partitionSeeds: [1, 2, 3] } }),
    );
    const run = findRun(three, 'partition');
    expect(run.benchmarks.map((b) => [b.prefix?.prefixes, b.prompts, b.concurrency, b.seed])).toEqual([
      [43, 344, 11, 1],
      [43, 344, 11, 2],
      [42, 336, 10, 3],
    ]);
    expect(run.benchmarks.reduce((sum, b) => sum + b.prompts, 0)).toBe(1024);
    expect(run.expectedRequests).toBe(1027);
  });

  it('carries the configured workload into every run', () => {
    const changed = studyPlan(parseLabConfig({ workload: { concurrency: 8, seed: 7, prefixLen: 1024 } }));
    const run = findRun(changed, 'arm-kube-proxy-prefix');
    expect(run.benchmarks[0]).toMatchObject({ concurrency: 8, seed: 7, prefix: { prefixLen: 1024 } });
    expect(run.title).toBe('Kubernetes Service (kube-proxy): prefix workload, concurrency 8');
  });

  it('names the runs that exist when asked for one that does not', () => {
    expect(() => findRun(plan, 'arm-nginx-prefix')).toThrow(
      /no run "arm-nginx-prefix" in the study plan; runs: bound-p128, /,
    );
  });
});

describe('study.repeats', () => {
  it('interleaves the arm runs (A B C A B C), each repeat its own run with its own id and reset', () => {
    const plan = studyPlan(parseLabConfig({ study: { repeats: 3, sharegptControl: false } }));
    const arms = plan.runs.filter((r) => r.group === 'arm');
    const once = studyPlan(parseLabConfig({ study: { sharegptControl: false } })).runs.filter(
      (r) => r.group === 'arm',
    );
    expect(arms).toHaveLength(3 * once.length);
    // Repeat 1 keeps the ids a study without repeats has.
    expect(arms.slice(0, once.length).map((r) => r.id)).toEqual(once.map((r) => r.id));
    expect(arms.map((r) => r.repeat)).toEqual([
      ...once.map(() => 1),
      ...once.map(() => 2),
      ...once.map(() => 3),
    ]);
    expect(arms[once.length]?.id).toBe('arm-kube-proxy-prefix-rep2');
    expect(new Set(plan.runs.map((r) => r.id)).size).toBe(plan.runs.length);
    expect(new Set(plan.runs.flatMap((r) => r.benchmarks.map((b) => b.resultFile))).size).toBe(
      plan.runs.flatMap((r) => r.benchmarks).length,
    );
    const rep2 = arms.find((r) => r.id === 'arm-epp-prefix-rep2');
    expect(rep2?.reset).toEqual(arms.find((r) => r.id === 'arm-epp-prefix')?.reset);
    expect(rep2?.title).toMatch(/\(repeat 2 of 3\)$/);
    // Bound, partition and sweep runs are not repeated.
    expect(plan.runs.filter((r) => r.group !== 'arm').map((r) => r.id)).toEqual(
      studyPlan(parseLabConfig({ study: { sharegptControl: false } }))
        .runs.filter((r) => r.group !== 'arm')
        .map((r) => r.id),
    );
  });

  it('is checked: a whole number from 1 to 20', () => {
    expect(() => parseLabConfig({ study: { repeats: 0 } })).toThrow(/study\.repeats/);
    expect(() => parseLabConfig({ study: { repeats: 21 } })).toThrow(/study\.repeats/);
  });
});

describe('the study for 4 and 8 replicas (issue 17)', () => {
  // The server's bootstrap waits for its agents too: a cluster needs the longer ready timeout.
  const eightGpuAgents = {
    instance: { readyTimeoutMinutes: 60 },
    cluster: { agents: [{ name: 'gpu', role: 'gpu', count: 2, instanceType: 'g6.12xlarge' }] },
  };

  it.each([
    [4, {}],
    [8, eightGpuAgents],
  ])(
    'with %i replicas: one partition client per replica, each its own prefixes and seed',
    (replicas, cluster) => {
      const plan = studyPlan(parseLabConfig({ ...cluster, vllm: { replicas } }));
      const run = findRun(plan, 'partition');
      expect(run.benchmarks).toHaveLength(replicas);
      expect(run.benchmarks.map((b) => b.target)).toEqual(
        Array.from({ length: replicas }, (_, replica) => ({ kind: 'replica', servers: 'standard', replica })),
      );
      // 128 prefixes, 1,024 prompts and concurrency 32 split evenly; seeds 42, 4242, 8442, ...
      for (const b of run.benchmarks) {
        expect(b.prefix?.prefixes).toBe(128 / replicas);
        expect(b.prompts).toBe(1024 / replicas);
        expect(b.concurrency).toBe(32 / replicas);
      }
      expect(run.benchmarks.map((b) => b.seed)).toEqual(
        Array.from({ length: replicas }, (_, i) => 42 + 4200 * i),
      );
      expect(new Set(run.benchmarks.map((b) => b.id)).size).toBe(replicas);
      expect(run.expectedRequests).toBe(1024 + replicas);
      expect(run.title).toBe(
        `Ideal partition: ${Array(replicas)
          .fill(128 / replicas)
          .join(' + ')} prefixes pinned to ${replicas} replicas`,
      );
    },
  );

  it('runs the bound sweep one replica per run, all four at once when there are 4 or more replicas', () => {
    for (const replicas of [4, 8]) {
      const plan = studyPlan(parseLabConfig({ ...eightGpuAgents, vllm: { replicas } }));
      const bounds = plan.runs.filter((r) => r.group === 'bound');
      expect(bounds.map((r) => r.reset.replicas)).toEqual([[0], [1], [2], [3]]);
      // None of the four waits for another: they run at once.
      const waits = runPrerequisites(plan);
      expect(bounds.map((r) => waits.get(r.id))).toEqual([[], [], [], []]);
    }
  });
});
