import { describe, expect, it } from 'vitest';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import { formatPlan, planEngine, planInput, planJson, planWorkload } from '../../lib/study/planner.ts';
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
    expect(plan.verdict).toBe('routing can matter: a perfect partition fits and random routing must evict');
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
    expect(plan.verdict).toBe(
      'routing cannot matter: the working set fits in one replica, so every policy hits equally',
    );
    const rates = Object.values(plan.policies).map((p) => p.hitRate);
    expect(Math.max(...rates) - Math.min(...rates)).toBeLessThan(0.01);
  });

  it('says a workload too large for any partition cannot be fully helped', () => {
    const plan = planWorkload(planInput(config, { prefixes: 256, prompts: 2048 }), planEngine(config));
    expect(plan.verdict).toContain('routing cannot fully help');
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
