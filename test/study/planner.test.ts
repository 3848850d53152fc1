import { describe, expect, it } from 'vitest';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import {
  formatPlan,
  MATTERS_FROM,
  noiseBand,
  planEngine,
  planInput,
  planJson,
  planStudy,
  planWorkload,
  studyPredictions,
} from '../../lib/study/planner.ts';
import { ROUTING_POLICIES, simulate } from '../../lib/study/simulator.ts';

describe('planWorkload', () => {
  const config = defaultLabConfig();

  it('takes its input from the configuration, with what-if values on top', () => {
    expect(planInput(config)).toEqual({
      replicas: 2,
      kvCacheTokensPerReplica: 163_472,
      blockSize: 16,
      prefixes: 128,
      prefixLen: 2048,
      suffixLen: 128,
      chatTemplateTokens: 10,
      outputLen: 128,
      prompts: 1024,
      concurrency: 32,
      seed: 42,
    });
    expect(planInput(config, { prefixes: 8, prefixLen: 512, kvTokens: 1000, replicas: 3 })).toMatchObject({
      prefixes: 8,
      prefixLen: 512,
      kvCacheTokensPerReplica: 1000,
      replicas: 3,
    });
  });

  it('simulates the batch limits the replicas are started with', () => {
    const small = parseLabConfig({ vllm: { maxNumBatchedTokens: 512, maxNumSeqs: 8 } });
    const plan = planWorkload(planInput(small), planEngine(small));
    expect(plan.engine).toEqual({ maxNumBatchedTokens: 512, maxNumSeqs: 8 });
    expect(planJson(plan)).toMatchObject({ engine: { maxNumBatchedTokens: 512, maxNumSeqs: 8 } });
    expect(formatPlan(plan)).toContain('engine limits           512 batched tokens, 8 sequences per step');
    // At most 8 requests run at once on a replica: the peak the simulation reports follows the limit.
    const peak = simulate(planInput(small), 'round-robin', planEngine(small)).perReplica.map(
      (r) => r.peakRunning,
    );
    expect(Math.max(...peak)).toBeLessThanOrEqual(8);
    const defaultPeak = simulate(planInput(config), 'round-robin', planEngine(config)).perReplica;
    expect(Math.max(...defaultPeak.map((r) => r.peakRunning))).toBeGreaterThan(8);
  });

  it('says routing can matter for the published design, and the partition beats load balancing', () => {
    const plan = planWorkload(planInput(config), planEngine(config));
    expect(plan.verdict).toMatch(
      /^routing can matter: the ideal partition is predicted at 7\d\.\d% against 4\d\.\d% for the best load-balancing policy \(\+3\d\.\d points\): a perfect partition fits and load balancing must evict$/,
    );
    expect(plan.upperBound).toBeCloseTo(0.82, 3);
    const { policies } = plan;
    expect(Object.keys(policies)).toEqual([...ROUTING_POLICIES]);
    for (const balanced of ['random', 'per-connection', 'round-robin', 'least-loaded'] as const) {
      expect(policies['ideal-partition'].hitRate - policies[balanced].hitRate).toBeGreaterThan(0.2);
    }
    expect(policies['ideal-partition'].hitRate).toBeLessThanOrEqual(plan.upperBound);
  });

  it("says routing cannot matter for the manual lab's first design (8 x 512)", () => {
    const plan = planWorkload(planInput(config, { prefixes: 8, prefixLen: 512 }), planEngine(config));
    expect(plan.verdict).toMatch(
      /^routing cannot matter: the ideal partition is predicted at .* within the noise \(\+-\d\.\d points\): the working set fits in one replica$/,
    );
    const rates = Object.values(plan.policies).map((p) => p.hitRate);
    expect(Math.max(...rates) - Math.min(...rates)).toBeLessThan(0.01);
  });

  it('says a workload too large for any partition cannot be fully helped', () => {
    const plan = planWorkload(planInput(config, { prefixes: 256, prompts: 2048 }), planEngine(config));
    expect(plan.verdict).toContain('even a perfect partition overflows each replica');
    expect(plan.partitionFits).toBe(false);
  });

  it('gives other tools fractions under stable keys', () => {
    const json = planJson(planWorkload(planInput(config), planEngine(config))) as Record<string, unknown>;
    expect(Object.keys(json)).toEqual([
      'workingSetTokens',
      'kvCacheTokensPerReplica',
      'engine',
      'partitionFits',
      'upperBound',
      'verdict',
      'seeds',
      'policies',
    ]);
    expect(json.workingSetTokens).toBe(262_144);
    const policies = json.policies as Record<string, { hitRate: number; perReplica: number[] }>;
    expect(policies['round-robin'].perReplica).toHaveLength(2);
    for (const p of Object.values(policies)) {
      expect(p.hitRate).toBeGreaterThanOrEqual(0);
      expect(p.hitRate).toBeLessThanOrEqual(1);
    }
  });

  it('prints the facts and a table people can read', () => {
    const text = formatPlan(planWorkload(planInput(config), planEngine(config)));
    expect(text).toContain('  working set             262,144 tokens');
    expect(text).toContain('  perfect partition       131,072 tokens on the fullest replica: fits');
    expect(text).toContain('  upper bound (1 replica) 82.0% = (8 - 1)/8 x 2048/2186');
    expect(text).toMatch(/^ {2}policy +overall +replica 0 +replica 1 +requests$/m);
    expect(text).toMatch(/^ {2}round-robin +\d+\.\d% +\d+\.\d% +\d+\.\d% +512 \/ 512$/m);
  });
});

describe('verdict from the predictions', () => {
  const config = defaultLabConfig();

  it('never says routing cannot matter while its own numbers differ beyond the noise', () => {
    for (const prefixes of [8, 32, 64, 96, 128, 256]) {
      const plan = planWorkload(planInput(config, { prefixes }), planEngine(config));
      const ideal = plan.policies['ideal-partition'];
      const best = (['random', 'per-connection', 'round-robin', 'least-loaded'] as const)
        .map((p) => plan.policies[p])
        .reduce((a, b) => (b.hitRate > a.hitRate ? b : a));
      const band = Math.max(noiseBand(ideal.hitRateSpread, best.hitRateSpread), MATTERS_FROM);
      const gap = ideal.hitRate - best.hitRate;
      expect(plan.verdict.startsWith('routing can matter')).toBe(gap > band);
      expect(plan.verdict).toContain(`${(ideal.hitRate * 100).toFixed(1)}%`);
    }
  });
});

describe('planStudy: every arm of the configured study', () => {
  it('predicts each arm with its front-end model, mean and spread over the configured seeds', () => {
    const config = parseLabConfig({
      study: { optionalArms: ['epp-prefix3', 'llmd-precise'], predictionSeeds: 3 },
    });
    const plan = planStudy(config);
    expect(plan.arms.seeds).toEqual([42, 43, 44]);
    expect(plan.arms.arms.map((a) => [a.arm, a.model])).toEqual([
      ['kube-proxy', 'per-connection'],
      ['router-round-robin', 'round-robin'],
      ['router-cache-aware', 'vllm-router-cache-aware'],
      ['router-cache-aware-tuned', 'vllm-router-cache-aware'],
      ['router-round-robin-completions', 'round-robin'],
      ['router-cache-aware-completions', 'vllm-router-cache-aware'],
      ['router-cache-aware-tuned-completions', 'vllm-router-cache-aware'],
      ['epp', 'gaie-epp'],
      ['epp-completions', 'gaie-epp'],
      ['epp-prefix3', 'gaie-epp'],
      ['epp-prefix3-completions', 'gaie-epp'],
      ['llmd-precise', 'llmd-precise'],
      ['llmd-precise-completions', 'llmd-precise'],
    ]);
    const arm = (id: string) => {
      const found = plan.arms.arms.find((a) => a.arm === id);
      if (!found) throw new Error(id);
      return found;
    };
    // Prompt-blind arms carry their label; over chat the cache-aware router routes on load alone:
    // balanced, at the hit rate of the least-loaded reference policy.
    expect(arm('epp').promptBlind).toMatch(/^prompt-blind/);
    const [r0 = 0, r1 = 0] = arm('router-cache-aware').requestsPerReplica.map((e) => e.mean);
    expect(Math.abs(r0 - r1)).toBeLessThan(64);
    expect(arm('router-cache-aware').hitRate.mean).toBeLessThan(arm('kube-proxy').hitRate.mean + 0.03);
    // Over completions the prefix-aware arms beat kube-proxy by far more than the spread.
    const kube = arm('kube-proxy').hitRate;
    for (const id of [
      'router-cache-aware-completions',
      'epp-prefix3-completions',
      'llmd-precise-completions',
    ]) {
      const { mean, spread } = arm(id).hitRate;
      expect(mean - kube.mean).toBeGreaterThan(4 * Math.hypot(spread, kube.spread));
    }
    expect(arm('kube-proxy').p99TtftMs.mean).toBeGreaterThan(arm('kube-proxy').meanTtftMs.mean);
    expect(plan.armsVerdict).toMatch(/^best predicted hit rate \(indistinguishable within the noise\): /);
    expect(plan.armsVerdict).not.toMatch(/prompt-blind|kube-proxy/);
    // The default study's p99 is its opening burst's, and the plan says so beside the table.
    expect(plan.tailNote).toMatch(
      /^p99 TTFT is set by the opening burst \(the first 32 requests, sent at once\)/,
    );
    expect(formatPlan(plan)).toContain(plan.tailNote);
  });

  it('leaves the burst note out where the burst does not set the p99 (one request at a time)', () => {
    const config = parseLabConfig({ study: { predictionSeeds: 2 } });
    expect(planStudy(config, { concurrency: 1, prompts: 128 }).tailNote).toBeUndefined();
  });

  it('the study JSON predictions use the KV cache size the replicas logged', () => {
    const config = defaultLabConfig();
    const small = studyPredictions(config, 100_000);
    const normal = studyPredictions(config);
    const hit = (p: typeof small) => p.partition.hitRate.mean;
    expect(hit(small)).toBeLessThan(hit(normal) - 0.1);
  });
});
