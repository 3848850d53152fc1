import { describe, expect, it } from 'vitest';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import { studyArms } from '../../lib/study/arms.ts';
import {
  DEFAULT_RUN_OVERHEADS,
  estimateStudy,
  formatEstimate,
  runSimulation,
} from '../../lib/study/duration.ts';
import { findRun, studyPlan } from '../../lib/study/plan.ts';
import { routingName } from '../../lib/study/simulator.ts';

const config = defaultLabConfig();
const plan = studyPlan(config);
const arms = new Map(studyArms(config).map((arm) => [arm.id, arm]));

describe('estimateStudy', () => {
  const estimate = estimateStudy(config, plan);

  it('estimates every run: the simulated load plus its overheads', () => {
    expect(estimate.runs.map((r) => r.id)).toEqual(plan.runs.map((r) => r.id));
    for (const r of estimate.runs) expect(r.loadSeconds, r.id).toBeGreaterThan(30);
    const o = DEFAULT_RUN_OVERHEADS;
    const base = o.jobStartSeconds + o.resetSeconds + o.runnerSeconds;
    const byId = new Map(estimate.runs.map((r) => [r.id, r]));
    expect(byId.get('bound-p128')?.overheadSeconds).toBe(base);
    // The first run of a router arm: its preflight and the router's restart.
    expect(byId.get('arm-router-cache-aware-prefix')?.overheadSeconds).toBe(
      base + o.frontEndRestartSeconds + o.preflightSeconds,
    );
    expect(byId.get('arm-router-cache-aware-sharegpt')?.overheadSeconds).toBe(
      base + o.frontEndRestartSeconds,
    );
    // Fewer prefixes hit more and finish sooner; a lower concurrency takes longer.
    expect(byId.get('bound-p8')?.loadSeconds).toBeLessThan(byId.get('bound-p128')?.loadSeconds as number);
    expect(byId.get('sweep-c4-kube-proxy')?.loadSeconds).toBeGreaterThan(
      byId.get('arm-kube-proxy-prefix')?.loadSeconds as number,
    );
  });

  it('counts a wave of bound runs once, as long as its longest run', () => {
    const byId = new Map(estimate.runs.map((r) => [r.id, r.loadSeconds + r.overheadSeconds]));
    const saved =
      Math.min(byId.get('bound-p128') as number, byId.get('bound-p64') as number) +
      Math.min(byId.get('bound-p16') as number, byId.get('bound-p8') as number);
    expect(estimate.serialSeconds - estimate.totalSeconds).toBeCloseTo(saved, 6);
    const groups = Object.values(estimate.groups).reduce((s, g) => s + g.loadSeconds + g.overheadSeconds, 0);
    expect(groups).toBeCloseTo(estimate.totalSeconds, 6);
    expect(estimate.costUsd).toBeCloseTo((estimate.totalSeconds / 3600) * 4.6, 6);
  });

  it('prints the duration, the cost and the breakdown per run group', () => {
    const text = formatEstimate(estimate);
    expect(text).toMatch(
      /^Estimated study duration after the bootstrap: \d+\.\d min \(\d+\.\d min if every run were serial\), about \d+\.\d\d USD at 4\.6 USD\/h\n/,
    );
    expect(text).toMatch(/ {2}bound {8}4 run\(s\) {2}load +\d+\.\d min {2}overhead +\d+\.\d min/);
    expect(text).toContain('  sweep        4 run(s)');
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
