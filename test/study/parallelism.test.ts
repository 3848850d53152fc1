import { describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import {
  DEFAULT_RUN_OVERHEADS,
  estimateStudy,
  type StudyEstimate,
  studySchedule,
} from '../../lib/study/duration.ts';
import { onEveryPair, pairSuffix } from '../../lib/study/pairs.ts';
import { findRun, runPrerequisites, studyPlan } from '../../lib/study/plan.ts';
import { armById, frontEnd, replicaUrls, targetBaseUrl } from '../../lib/study/topology.ts';

const serial = parseLabConfig({});
const two = parseLabConfig({ study: { parallelism: 2 } });
const plan = studyPlan(two);
const pairOf = (id: string) => findRun(plan, id).reset.pair ?? 0;
const runSeconds = (estimate: StudyEstimate, id: string) => {
  const run = estimate.runs.find((r) => r.id === id);
  return (run?.loadSeconds ?? 0) + (run?.overheadSeconds ?? 0);
};

describe('study.parallelism: 2 (two replica pairs)', () => {
  it('names pair 1 with the suffix -b and refuses pairs that do not exist', () => {
    expect([pairSuffix(0), pairSuffix(1)]).toEqual(['', '-b']);
    expect(() => pairSuffix(2)).toThrow('replica pair 2 does not exist; allowed: 0 to 1');
    expect(replicaUrls(two, 'standard', 1)).toEqual([
      'http://qwen3-b-0.qwen3-b-headless.vllm.svc.cluster.local:8000',
      'http://qwen3-b-1.qwen3-b-headless.vllm.svc.cluster.local:8000',
    ]);
    const names = (id: string, pair: number) => frontEnd(two, armById(two, id), pair);
    expect(names('router-cache-aware', 1)).toMatchObject({
      service: 'vllm-router-cache-aware-b',
      restartDeployments: ['vllm-router-cache-aware-b'],
    });
    expect(names('epp-completions', 1)).toMatchObject({
      service: 'envoy-epp-b',
      restartDeployments: ['qwen3-epp-b'],
    });
    expect(names('kube-proxy', 1).service).toBe('qwen3-nodeport-b');
    expect(names('kube-proxy', 0).service).toBe('qwen3-nodeport');
  });

  it('keeps the serial plan exactly as it was: no run names a pair', () => {
    const runs = studyPlan(serial).runs;
    expect(runs.some((run) => run.reset.pair !== undefined)).toBe(false);
    expect(runs.flatMap((run) => run.benchmarks).some((b) => b.target.pair !== undefined)).toBe(false);
    expect(plan.runs.map((run) => run.id)).toEqual(runs.map((run) => run.id));
  });

  it('spreads the bound sweep over all four replicas, so it runs at once', () => {
    const bound = plan.runs.filter((run) => run.group === 'bound');
    expect(bound.map((run) => [run.id, run.reset.pair ?? 0, run.reset.replicas])).toEqual([
      ['bound-p128', 0, [0]],
      ['bound-p64', 0, [1]],
      ['bound-p16', 1, [0]],
      ['bound-p8', 1, [1]],
    ]);
    expect(findRun(plan, 'bound-p8').benchmarks[0].target).toEqual({
      kind: 'replica',
      servers: 'standard',
      replica: 1,
      pair: 1,
    });
    const after = runPrerequisites(plan);
    for (const run of bound) expect(after.get(run.id)).toEqual([]);
  });

  it('gives the partition, arm and sweep runs turns over the pairs, the last pair first', () => {
    // Pair 0 holds the longest bound runs (128 and 64 prefixes), so pair 1 is free first.
    expect(pairOf('partition')).toBe(1);
    // The arm runs alternate; the sweep too, but never one arm twice in a row on a pair (below).
    const rest = plan.runs.filter((run) => run.group === 'arm');
    for (const [i, run] of rest.entries()) expect(run.reset.pair ?? 0, run.id).toBe(i % 2);
    // A client on pair 1 calls pair 1's front end; pair 0's are as in a serial study.
    expect(targetBaseUrl(two, findRun(plan, 'arm-kube-proxy-sharegpt').benchmarks[0].target)).toBe(
      'http://qwen3-nodeport-b.vllm.svc.cluster.local:8000',
    );
    expect(findRun(plan, 'arm-router-cache-aware-prefix').benchmarks[0].target).toEqual({
      kind: 'arm',
      arm: 'router-cache-aware',
    });
    expect(findRun(plan, 'partition').benchmarks.map((b) => b.target)).toEqual([
      { kind: 'replica', servers: 'standard', replica: 0, pair: 1 },
      { kind: 'replica', servers: 'standard', replica: 1, pair: 1 },
    ]);
    // Each run waits only for the earlier runs of its own pair.
    const after = runPrerequisites(plan);
    expect(after.get('partition')).toEqual(['bound-p16', 'bound-p8']);
    expect(after.get('arm-kube-proxy-prefix')).toEqual(['bound-p128', 'bound-p64']);
    expect(after.get('arm-router-round-robin-prefix')).toEqual(['bound-p16', 'bound-p8', 'partition']);
  });

  it('never gives a pair one arm twice in a row: each swept arm runs on both pairs', () => {
    for (const pair of [0, 1]) {
      const runs = plan.runs.filter((run) => run.arm !== undefined && (run.reset.pair ?? 0) === pair);
      const twice = runs.slice(1).filter((run, i) => run.arm === runs[i].arm);
      expect(twice.map((run) => run.id)).toEqual([]);
    }
    expect(
      [
        'sweep-c4-kube-proxy',
        'sweep-c4-router-cache-aware',
        'sweep-c8-kube-proxy',
        'sweep-c8-router-cache-aware',
      ].map(pairOf),
    ).toEqual([0, 1, 1, 0]);
  });

  it('keeps the optional arms on pair 0', () => {
    const withOptional = studyPlan(
      parseLabConfig({
        instance: { type: 'g6.48xlarge', gpus: 8, vcpus: 192, memoryGiB: 768, pricePerHourUsd: 13.35 },
        study: { parallelism: 2, optionalArms: ['llmd-precise', 'epp-prefix3'] },
      }),
    );
    const optional = withOptional.runs.filter((run) => /llmd|prefix3/.test(run.id));
    expect(optional.length).toBeGreaterThan(0);
    for (const run of optional) expect(run.reset.pair, run.id).toBeUndefined();
    expect(onEveryPair(armById(two, 'epp')) && !onEveryPair({ ...armById(two, 'epp'), optional: true })).toBe(
      true,
    );
  });

  it('schedules runs by their prerequisites: the estimate is about half the serial one', () => {
    const schedule = studySchedule(plan, () => 100);
    expect(schedule.get('bound-p8')).toEqual({ start: 0, end: 100 });
    expect(schedule.get('partition')).toEqual({ start: 100, end: 200 });
    expect(schedule.get('arm-kube-proxy-prefix')).toEqual({ start: 100, end: 200 });
    const one = estimateStudy(serial, studyPlan(serial));
    const both = estimateStudy(two, plan);
    // Without staging every run costs the same on either pair.
    const unstaged = (config: typeof two) => {
      const off = { ...config, runner: { ...config.runner, stageNextRun: false } };
      return estimateStudy(off, studyPlan(off)).serialSeconds;
    };
    expect(unstaged(two)).toBeCloseTo(unstaged(serial), 6);
    expect(both.totalSeconds).toBeLessThan(one.totalSeconds * 0.52);
    // Staged on each pair: every run after the partition and the first arm run of each pair.
    expect(both.staging.stagedRuns).toBe(one.staging.stagedRuns);
    const o = DEFAULT_RUN_OVERHEADS;
    const first = both.runs.find((r) => r.id === 'arm-router-cache-aware-prefix');
    expect(first?.stagedAfter).toBe('arm-kube-proxy-prefix');
    expect(first?.overheadSeconds).toBe(
      o.resetSeconds + o.runnerSeconds + o.gateSeconds + o.preflightSeconds,
    );
    // The two pairs' runs overlap in time.
    const staged = studySchedule(plan, (r) => runSeconds(both, r.id));
    const a = staged.get('arm-kube-proxy-prefix');
    const b = staged.get('arm-router-round-robin-prefix');
    expect(a && b && a.start < b.end && b.start < a.end).toBe(true);
    // Balanced: each pair's last run ends within two minutes of the other's.
    const ends = [0, 1].map((pair) =>
      Math.max(
        ...plan.runs
          .filter((run) => (run.reset.pair ?? 0) === pair)
          .map((run) => studySchedule(plan, (r) => runSeconds(both, r.id)).get(run.id)?.end ?? 0),
      ),
    );
    expect(Math.abs(ends[0] - ends[1])).toBeLessThan(120);
    // The groups add up to the whole.
    const sum = Object.values(both.groups).reduce((s, g) => s + g.loadSeconds + g.overheadSeconds, 0);
    expect(sum).toBeCloseTo(both.totalSeconds, 6);
  });
});
