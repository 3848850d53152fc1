import { describe, expect, it } from 'vitest';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import { studyArms } from '../../lib/study/arms.ts';
import {
  DEFAULT_RUN_OVERHEADS,
  estimateStudy,
  formatEstimate,
  type RunEstimate,
  runSimulation,
  studySchedule,
} from '../../lib/study/duration.ts';
import { findRun, studyPlan } from '../../lib/study/plan.ts';
import { routingName } from '../../lib/study/simulator.ts';

const config = defaultLabConfig();
const plan = studyPlan(config);
const arms = new Map(studyArms(config).map((arm) => [arm.id, arm]));

describe('estimateStudy', () => {
  const estimate = estimateStudy(config, plan);
  const o = DEFAULT_RUN_OVERHEADS;
  const byId = new Map(estimate.runs.map((r) => [r.id, r]));
  const run = (id: string) => byId.get(id) as RunEstimate;

  it('estimates every run: the simulated load plus its overheads', () => {
    expect(estimate.runs.map((r) => r.id)).toEqual(plan.runs.map((r) => r.id));
    for (const r of estimate.runs) {
      expect(r.loadSeconds, r.id).toBeGreaterThan(30);
      expect(r.overheadSeconds, r.id).toBeCloseTo(
        Object.values(r.overheads).reduce((a, b) => a + b, 0),
        9,
      );
    }
    // Neither the bound sweep nor the partition can wait behind a gate: they call replicas directly.
    expect(run('bound-p128').overheadSeconds).toBe(o.jobStartSeconds + o.resetSeconds + o.runnerSeconds);
    expect(run('partition').stagedAfter).toBeUndefined();
    // Fewer prefixes hit more and finish sooner; a lower concurrency takes longer.
    expect(run('bound-p8').loadSeconds).toBeLessThan(run('bound-p128').loadSeconds);
    expect(run('sweep-c4-kube-proxy').loadSeconds).toBeGreaterThan(run('arm-kube-proxy-prefix').loadSeconds);
  });

  it("hides a staged run's Job start and early front-end restart behind the load of the run before", () => {
    // The first router arm: its clients start and its router restarts during round-robin's load.
    const staged = run('arm-router-cache-aware-prefix');
    expect(staged.stagedAfter).toBe('arm-router-round-robin-prefix');
    expect(run('arm-router-round-robin-prefix').loadSeconds).toBeGreaterThan(o.jobStartSeconds);
    expect(staged.overheads).toEqual({
      jobStartSeconds: 0,
      frontEndRestartSeconds: 0,
      resetSeconds: o.resetSeconds,
      runnerSeconds: o.runnerSeconds,
      preflightSeconds: o.preflightSeconds,
      gateSeconds: o.gateSeconds,
    });
    expect(staged.overheadSeconds).toBe(
      o.resetSeconds + o.runnerSeconds + o.gateSeconds + o.preflightSeconds,
    );
    expect(staged.hiddenSeconds).toEqual({
      jobStartSeconds: o.jobStartSeconds,
      frontEndRestartSeconds: o.frontEndRestartSeconds,
    });
    // The first run after the partition is staged too; the next one's preflight is already done.
    expect(run('arm-kube-proxy-prefix').stagedAfter).toBe('partition');
    expect(run('arm-router-cache-aware-sharegpt').overheads.preflightSeconds).toBe(0);
  });

  it('counts what outlasts the earlier load: a Job start or a restart longer than it', () => {
    const slow = { ...o, jobStartSeconds: 400, frontEndRestartSeconds: 600 };
    const r = estimateStudy(config, plan, slow).runs.find((e) => e.id === 'arm-router-cache-aware-prefix');
    const earlier = run('arm-router-round-robin-prefix').loadSeconds;
    expect(earlier).toBeLessThan(400);
    expect(r?.overheads.jobStartSeconds).toBeCloseTo(400 - earlier, 9);
    expect(r?.overheads.frontEndRestartSeconds).toBeCloseTo(600 - earlier, 9);
    expect(r?.hiddenSeconds?.jobStartSeconds).toBeCloseTo(earlier, 9);
    expect(r?.overheadSeconds).toBeCloseTo(
      o.resetSeconds + o.runnerSeconds + o.gateSeconds + o.preflightSeconds + 400 - earlier + 600 - earlier,
      9,
    );
  });

  it('hides every restart of the default plan, whose order keeps arms on one front end apart', () => {
    const restarts = plan.runs.filter((r) => r.reset.restartFrontEndOf).length;
    expect(estimate.staging).toEqual({
      enabled: true,
      stagedRuns: plan.runs.length - 5,
      earlyRestarts: restarts,
      hiddenSeconds: {
        jobStartSeconds: (plan.runs.length - 5) * o.jobStartSeconds,
        frontEndRestartSeconds: restarts * o.frontEndRestartSeconds,
      },
      gateSeconds: (plan.runs.length - 5) * o.gateSeconds,
    });
    expect(estimate.overheadTotals.frontEndRestartSeconds).toBe(0);
    expect(estimate.assumedOverheads).toBe(o);
  });

  it('restarts a front end the run before uses only after that run: epp-completions right after epp', () => {
    // Both go through the same EPP (qwen3-epp): its restart cannot start before epp's run ends.
    const adjacent = {
      runs: ['arm-epp-prefix', 'arm-epp-completions-prefix'].map((id) => findRun(plan, id)),
    };
    const [first, shared] = estimateStudy(config, adjacent).runs;
    expect(shared.stagedAfter).toBe('arm-epp-prefix');
    expect(shared.overheads.jobStartSeconds).toBe(0);
    expect(shared.overheads.frontEndRestartSeconds).toBe(o.frontEndRestartSeconds);
    expect(shared.hiddenSeconds?.frontEndRestartSeconds).toBe(0);
    expect(first.overheads.frontEndRestartSeconds).toBe(o.frontEndRestartSeconds);
  });

  it('with runner.stageNextRun false, estimates every run as it starts its clients: the figure without staging', () => {
    const off = parseLabConfig({ runner: { stageNextRun: false } });
    const unstaged = estimateStudy(off, studyPlan(off));
    const preflighted = new Set<string>();
    const expected = new Map(
      plan.runs.map((r) => {
        const first = r.arm !== undefined && !preflighted.has(r.arm);
        if (r.arm) preflighted.add(r.arm);
        const overhead =
          o.jobStartSeconds +
          o.resetSeconds +
          o.runnerSeconds +
          (r.reset.restartFrontEndOf ? o.frontEndRestartSeconds : 0) +
          (first ? o.preflightSeconds : 0);
        return [r.id, overhead];
      }),
    );
    for (const r of unstaged.runs) {
      expect(r.overheadSeconds, r.id).toBe(expected.get(r.id));
      expect(r.stagedAfter, r.id).toBeUndefined();
      expect(r.loadSeconds, r.id).toBe(run(r.id).loadSeconds);
    }
    const schedule = studySchedule(plan, (r) => run(r.id).loadSeconds + (expected.get(r.id) as number));
    expect(unstaged.totalSeconds).toBeCloseTo(Math.max(...[...schedule.values()].map((s) => s.end)), 6);
    expect(unstaged.staging).toMatchObject({ enabled: false, stagedRuns: 0, gateSeconds: 0 });
    // Staging saves about the Job starts and early restarts it hides, less the gates.
    const saved = unstaged.totalSeconds - estimate.totalSeconds;
    const { hiddenSeconds, gateSeconds } = estimate.staging;
    expect(saved).toBeCloseTo(
      hiddenSeconds.jobStartSeconds + hiddenSeconds.frontEndRestartSeconds - gateSeconds,
      6,
    );
  });

  it('counts a wave of bound runs once, as long as its longest run', () => {
    const seconds = (id: string) => run(id).loadSeconds + run(id).overheadSeconds;
    const saved =
      Math.min(seconds('bound-p128'), seconds('bound-p64')) +
      Math.min(seconds('bound-p16'), seconds('bound-p8'));
    expect(estimate.serialSeconds - estimate.totalSeconds).toBeCloseTo(saved, 6);
    const groups = Object.values(estimate.groups).reduce((s, g) => s + g.loadSeconds + g.overheadSeconds, 0);
    expect(groups).toBeCloseTo(estimate.totalSeconds, 6);
    expect(estimate.costUsd).toBeCloseTo((estimate.totalSeconds / 3600) * 4.6, 6);
  });

  it('prints the duration, the cost, the breakdown per run group and per overhead, and the staging', () => {
    const text = formatEstimate(estimate);
    expect(text).toMatch(
      /^Estimated study duration after the bootstrap: \d+\.\d min \(\d+\.\d min if every run were serial\), about \d+\.\d\d USD at 4\.6 USD\/h\n/,
    );
    expect(text).toMatch(/ {2}bound {8}4 run\(s\) {2}load +\d+\.\d min {2}overhead +\d+\.\d min/);
    expect(text).toContain('  sweep        4 run(s)');
    expect(text).toContain(
      '  overhead per kind, summed over the runs: Job start 2.5 min, front-end restart 0.0 min, reset 1.4 min, runner 0.9 min, preflight 0.3 min, gate 1.8 min\n',
    );
    expect(text).toContain(
      '  staging (runner.stageNextRun): 22 of 27 runs start their clients during the run before, hiding Job starts 11.0 min and 18 front-end restart(s) 6.0 min; their gates add 1.8 min\n',
    );
    const off = parseLabConfig({ runner: { stageNextRun: false } });
    expect(formatEstimate(estimateStudy(off, studyPlan(off)))).toContain(
      '  staging off (runner.stageNextRun: false): every run starts its clients when it starts\n',
    );
  });

  it('grows with the workload and the price', () => {
    const bigger = parseLabConfig({ workload: { prompts: 2048 }, instance: { pricePerHourUsd: 9.2 } });
    const more = estimateStudy(bigger, studyPlan(bigger));
    expect(more.totalSeconds).toBeGreaterThan(estimate.totalSeconds);
    expect(more.costUsd).toBeGreaterThan(2 * estimate.costUsd);
  });
});

describe('what the simulator runs for each run', () => {
  it("runs each arm through its front end's model, the one lab plan predicts it with", () => {
    const name = (id: string) => {
      const run = plan.runs.find((r) => r.arm === id);
      if (!run) throw new Error(`no run of ${id}`);
      return routingName(runSimulation(config, run, arms).routing);
    };
    expect(name('kube-proxy')).toBe('per-connection');
    expect(name('router-round-robin')).toBe('round-robin');
    expect(name('router-cache-aware')).toBe('vllm-router-cache-aware');
    expect(name('epp-completions')).toBe('gaie-epp');
    // Prompt visibility travels with the model: the chat arm is blind, the completions arm is not.
    const epp = (id: string) =>
      runSimulation(config, findRun(plan, `arm-${id}-prefix`), arms).routing as { promptVisible: boolean };
    expect(epp('epp').promptVisible).toBe(false);
    expect(epp('epp-completions').promptVisible).toBe(true);
    // Completions send no chat template.
    expect(
      runSimulation(config, findRun(plan, 'arm-epp-completions-prefix'), arms).input.chatTemplateTokens,
    ).toBe(0);
  });

  it('simulates bound runs on one replica, ShareGPT as unique prompts of its mean lengths', () => {
    expect(runSimulation(config, findRun(plan, 'bound-p16'), arms)).toMatchObject({
      routing: 'single-replica',
      input: { replicas: 1, prefixes: 16 },
    });
    expect(runSimulation(config, findRun(plan, 'arm-kube-proxy-sharegpt'), arms).input).toMatchObject({
      prefixes: 1024,
      prefixLen: 230,
      outputLen: 203,
    });
    expect(runSimulation(config, findRun(plan, 'sweep-c4-kube-proxy'), arms).input.concurrency).toBe(4);
  });
});
