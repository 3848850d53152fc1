import { describe, expect, it } from 'vitest';
import { runLabCli } from './run-lab.ts';

describe('lab plan', () => {
  it('reads right for the default configuration', () => {
    const run = runLabCli(['plan']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      'Workload: 128 prefixes x 2,048 tokens, 1,024 prompts (8 per prefix), concurrency 32',
    );
    expect(run.stdout).toContain(
      'Verdict: routing can matter: a perfect partition fits and random routing must evict.',
    );
    expect(run.stdout).toMatch(/^ {2}ideal-partition +\d/m);
  });

  it('reads right for the failed first design, 8 x 512', () => {
    const run = runLabCli(['plan', '--prefixes', '8', '--prefix-len', '512']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('  working set             4,096 tokens');
    expect(run.stdout).toContain('Verdict: routing cannot matter: the working set fits in one replica');
  });

  it('prints JSON with --json', () => {
    const run = runLabCli(['plan', '--json', '--replicas', '3', '--kv-tokens', '100000']);
    expect(run.code).toBe(0);
    const json = JSON.parse(run.stdout);
    expect(json.kvCacheTokensPerReplica).toBe(100_000);
    expect(json.policies['ideal-partition'].perReplica).toHaveLength(3);
  });

  it('names the option, the bad value and what is allowed', () => {
    const run = runLabCli(['plan', '--prefixes', 'many']);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `lab plan: option '--prefixes <n>' argument 'many' is invalid. --prefixes must be a whole number greater than 0, got "many"; see lab plan --help\n`,
    );
  });
});
