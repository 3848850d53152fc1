import { describe, expect, it } from 'vitest';
import { runLabCli } from './run-lab.ts';

describe('lab plan', () => {
  it('reads right for the default configuration', () => {
    const run = runLabCli(['plan']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      'Workload: 128 prefixes x 2,048 tokens, 1,024 prompts (8 per prefix), concurrency 32',
    );
    expect(run.stdout).toMatch(
      /Verdict: routing can matter: the ideal partition is predicted at 7\d\.\d% against 4\d\.\d% for the best load-balancing policy \(\+3\d\.\d points\): a perfect partition fits and load balancing must evict\./,
    );
    expect(run.stdout).toMatch(/^ {2}ideal-partition +\d/m);
    // Every arm of the default study, with its model and spread.
    expect(run.stdout).toMatch(/^ {2}kube-proxy +per-connection +4\d\.\d% \+-\d\.\d/m);
    expect(run.stdout).toMatch(
      /^ {2}router-cache-aware \(prompt-blind\) +vllm-router-cache-aware .* 1024 \/ 0 /m,
    );
    expect(run.stdout).toMatch(/^ {2}epp-completions +gaie-epp +7\d\.\d% \+-/m);
    expect(run.stdout).toMatch(
      /^Arms: best predicted hit rate \(indistinguishable within the noise\): router-cache-aware-completions/m,
    );
    // The configured study's duration and cost, per run group.
    expect(run.stdout).toMatch(
      /^Estimated study duration after the bootstrap: \d+\.\d min \(\d+\.\d min if every run were serial\), about \d+\.\d\d USD at 4\.6 USD\/h$/m,
    );
    expect(run.stdout).toMatch(/^ {2}arm +18 run\(s\)/m);
  });

  it('reads right for the failed first design, 8 x 512', () => {
    const run = runLabCli(['plan', '--prefixes', '8', '--prefix-len', '512']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('  working set             4,096 tokens');
    expect(run.stdout).toMatch(
      /Verdict: routing cannot matter: the ideal partition is predicted at .* within the noise \(\+-\d\.\d points\): the working set fits in one replica\./,
    );
  });

  it('prints JSON with --json', () => {
    const run = runLabCli(['plan', '--json', '--replicas', '3', '--kv-tokens', '100000']);
    expect(run.code).toBe(0);
    const json = JSON.parse(run.stdout);
    expect(json.kvCacheTokensPerReplica).toBe(100_000);
    expect(json.policies['ideal-partition'].perReplica).toHaveLength(3);
    // The per-arm section: every arm with means and spreads, the ideal partition beside them.
    expect(json.arms.seeds).toEqual([42, 43, 44, 45, 46]);
    const kube = json.arms.arms.find((a: { arm: string }) => a.arm === 'kube-proxy');
    expect(kube.model).toBe('per-connection');
    expect(kube.requestsPerReplica).toHaveLength(3);
    expect(kube.hitRate.spread).toBeGreaterThan(0);
    for (const figure of ['totalTokensPerSecond', 'meanTtftMs', 'p99TtftMs', 'meanItlMs']) {
      expect(kube[figure].mean).toBeGreaterThan(0);
    }
    expect(json.arms.partition.model).toBe('ideal-partition');
    expect(json.armsVerdict).toMatch(/^best predicted hit rate/);
    expect(json.estimate.runs).toHaveLength(27);
    expect(json.estimate.totalSeconds).toBeGreaterThan(0);
  });

  it('names the option, the bad value and what is allowed', () => {
    const run = runLabCli(['plan', '--prefixes', 'many']);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `lab plan: option '--prefixes <n>' argument 'many' is invalid. --prefixes must be a whole number greater than 0, got "many"; see lab plan --help\n`,
    );
  });
});

describe('lab plan --replicas (issue 17)', () => {
  it.each([4, 8])(
    'predicts every policy and the study for %i replicas, the partition with a client each',
    (replicas) => {
      const run = runLabCli(['plan', '--json', '--replicas', String(replicas)]);
      expect(run.code).toBe(0);
      const json = JSON.parse(run.stdout);
      expect(json.policies['ideal-partition'].perReplica).toHaveLength(replicas);
      expect(json.policies['ideal-partition'].requestsPerReplica).toEqual(
        Array(replicas).fill(1024 / replicas),
      );
      // 16 prefixes x 2,048 tokens per replica at 8 replicas: the partition fits, random routing evicts.
      expect(json.partitionFits).toBe(true);
      expect(json.policies['ideal-partition'].hitRate).toBeGreaterThan(json.policies.random.hitRate + 0.3);
      const kube = json.arms.arms.find((a: { arm: string }) => a.arm === 'kube-proxy');
      expect(kube.requestsPerReplica).toHaveLength(replicas);
      expect(json.estimate.runs.filter((r: { group: string }) => r.group === 'partition')).toHaveLength(1);
    },
  );

  it('prints the table for 8 replicas and prices the configured cluster', () => {
    const run = runLabCli(['plan', '--replicas', '8'], { LAB_CONFIG: 'examples/multi-node.yaml' });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('  KV cache per replica    163,472 tokens x 8 replica(s)');
    expect(run.stdout).toMatch(/^ {2}policy +overall +replica 0 .* replica 7 /m);
    expect(run.stdout).toMatch(/^Verdict: routing can matter: /m);
    // The server (instance.pricePerHourUsd 4.6), two g6.12xlarge agents and a c7i.4xlarge.
    expect(run.stdout).toMatch(/about \d+\.\d\d USD at 14\.518 USD\/h$/m);
  });
});
