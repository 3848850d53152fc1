import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fixtureStudy } from '../report/fixture.ts';
import { tempDir } from '../temp.ts';
import { runLabCli, runLabHere } from './run-lab.ts';

describe('lab plan', () => {
  it('reads right for the default configuration', async () => {
    const run = await runLabHere(['plan']);
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
      /^ {2}router-cache-aware \(prompt-blind\) +vllm-router-cache-aware +4\d\.\d% .* 5\d\d \/ 5\d\d /m,
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
    // Per overhead kind, and what staging the next run hides (runner.stageNextRun, on by default).
    expect(run.stdout).toMatch(
      /^ {2}overhead per kind, summed over the runs: Job start \d+\.\d min, front-end restart \d+\.\d min, reset \d+\.\d min, runner \d+\.\d min, preflight \d+\.\d min, gate \d+\.\d min$/m,
    );
    expect(run.stdout).toMatch(
      /^ {2}staging \(runner\.stageNextRun\): 22 of 27 runs start their clients during the run before, hiding Job starts 11\.0 min and 18 front-end restart\(s\) 6\.0 min; their gates add 1\.8 min$/m,
    );
    // The g6.12xlarge's four GPUs fit a second pair of two replicas: what study.parallelism: 2 would give.
    const paired = /^ {2}with study\.parallelism: 2 \(.*\): (\d+\.\d) min, about \d+\.\d\d USD$/m.exec(
      run.stdout,
    );
    const serial = /^Estimated study duration after the bootstrap: (\d+\.\d) min/m.exec(run.stdout);
    expect(Number(paired?.[1])).toBeLessThan(0.6 * Number(serial?.[1]));
  });

  it("--calibrate-from refits the timing model on a study's single-replica runs and predicts with it", async () => {
    const dir = tempDir('lab-plan-calibrate-');
    writeFileSync(join(dir, 'study.json'), JSON.stringify(fixtureStudy()));
    const run = await runLabHere(['plan', '--calibrate-from', dir]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      /^Timing model calibrated on 4 single-replica run\(s\) of .*study\.json \(bound-p128, bound-p64, bound-p16, bound-p8\):$/m,
    );
    expect(run.stdout).toMatch(/^ {2}stepOverheadMs +12\.6 -> \d/m);
    expect(run.stdout).toMatch(/^ {2}in-sample RMS relative error \d+\.\d% a priori, \d+\.\d% calibrated$/m);
    expect(run.stdout).toMatch(
      /^ {2}router-cache-aware \(prompt-blind\) +vllm-router-cache-aware +4\d\.\d% /m,
    );
    // A folder without a study is named with the reason.
    const empty = await runLabHere(['plan', '--calibrate-from', tempDir('lab-plan-nostudy-')]);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toMatch(/^lab plan: --calibrate-from .*study\.json/);
  });

  it('offers no parallelism figure when the cluster lacks the GPUs for a second pair', async () => {
    const run = await runLabHere(['plan', '--replicas', '4']);
    expect(run.code).toBe(0);
    expect(run.stdout).not.toContain('study.parallelism: 2');
  });

  it('reads right for the failed first design, 8 x 512', async () => {
    const run = await runLabHere(['plan', '--prefixes', '8', '--prefix-len', '512']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('  working set             4,096 tokens');
    expect(run.stdout).toMatch(
      /Verdict: routing cannot matter: the ideal partition is predicted at .* within the noise \(\+-\d\.\d points\): the working set fits in one replica\./,
    );
  });

  it('prints JSON with --json', async () => {
    const run = await runLabHere(['plan', '--json', '--replicas', '3', '--kv-tokens', '100000']);
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
    expect(json.estimate.staging).toMatchObject({ enabled: true, stagedRuns: 22 });
    expect(json.estimate.staging.hiddenSeconds.jobStartSeconds).toBeGreaterThan(0);
    expect(json.estimate.assumedOverheads.gateSeconds).toBe(5);
    const staged = json.estimate.runs.find((r: { id: string }) => r.id === 'arm-router-cache-aware-prefix');
    expect(staged.stagedAfter).toBe('arm-router-round-robin-prefix');
    expect(staged.overheads.jobStartSeconds).toBe(0);
  });

  it('estimates without staging when runner.stageNextRun is false, and says so', async () => {
    const path = join(tempDir('lab-plan-'), 'lab.yaml');
    writeFileSync(path, 'runner:\n  stageNextRun: false\n');
    const text = await runLabHere(['--config', path, 'plan']);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(
      '  staging off (runner.stageNextRun: false): every run starts its clients when it starts\n',
    );
    const staged = await runLabHere(['plan', '--json']);
    const unstaged = await runLabHere(['--config', path, 'plan', '--json']);
    const total = (run: { stdout: string }) => JSON.parse(run.stdout).estimate.totalSeconds as number;
    // The Job starts and restarts staging hides cost instance time again.
    expect(total(unstaged) - total(staged)).toBeGreaterThan(10 * 60);
    expect(JSON.parse(unstaged.stdout).estimate.staging.stagedRuns).toBe(0);
  });

  it('says that an empty configuration file leaves every setting at its default', async () => {
    const path = join(tempDir('lab-plan-'), 'empty.yaml');
    writeFileSync(path, '# nothing set yet\n');
    const run = await runLabHere(['--config', path, 'plan', '--json']);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe(`warning: ${path} is empty: every setting has its default (the published lab)\n`);
  });

  it('names the option, the bad value and what is allowed (through bin/launch.mjs, as a user runs it)', () => {
    const run = runLabCli(['plan', '--prefixes', 'many']);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `lab plan: option '--prefixes <n>' argument 'many' is invalid. --prefixes must be a whole number greater than 0, got "many"; see lab plan --help\n`,
    );
  });

  describe('with a network-lab configuration', () => {
    const network = ['--config', 'examples/network-lab.yaml', 'plan'];

    it('prints runs, duration and cost per cell, entries per Service count, conntrack expectations', async () => {
      const run = await runLabHere(network);
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(
        /^ {2}mesh +iptables +sidecar +C E1 E1s E2 E3 E4 E5 E6 E7 E8 E9 E10 +91 +\d+\.\d min +\d+\.\d min +\d+\.\d min +\d\.\d\d USD$/m,
      );
      expect(run.stdout).toMatch(/^ {2}dp-cilium +cilium +none +C E9 E10 +16 /m);
      expect(run.stdout).toMatch(
        /^ {2}cells run in parallel: 123 runs, \d+\.\d min after the bootstraps, about \d\.\d\d USD in all/m,
      );
      expect(run.stdout).toMatch(
        /^ {2}dp-iptables +7 \(iptables\) +0 +700 +7,000 +35,000 +70,000 +estimate$/m,
      );
      expect(run.stdout).toMatch(/^ {2}dp-cilium +3 \(cilium\) +0 +300 +3,000 +15,000 +30,000 +estimate$/m);
      expect(run.stdout).toContain(
        'dp-cilium: LB map 30,000 of 65,536 entries at 10,000 Services, headroom 35,536',
      );
      expect(run.stdout).toMatch(/^ {2}dp-cilium +e10-limit-1024 +1,024 +4,000 +524-1,024$/m);
      expect(run.stdout).toContain('No warnings: every cell can measure what it claims.');
    });

    it('prints the plan as JSON with --json, one cell with --cell', async () => {
      const run = await runLabHere([...network, '--json', '--cell', 'dp-cilium']);
      expect(run.code).toBe(0);
      const json = JSON.parse(run.stdout);
      expect(json.cells).toHaveLength(1);
      expect(json.cells[0]).toMatchObject({
        cell: 'dp-cilium',
        datapath: 'cilium',
        runs: 16,
        lbMapMax: 65_536,
        entries: { perService: 3, basis: 'estimate' },
      });
      expect(json.cells[0].entries.steps.at(-1)).toEqual({
        services: 10_000,
        entriesAdded: 30_000,
        lbMapEntries: 30_000,
        lbMapHeadroom: 35_536,
        lbMapOverflow: false,
      });
      expect(json.cells[0].conntrack[1]).toMatchObject({ limit: 2048, expectedSucceededMin: 1548 });
      expect(json.durationSeconds).toBe(json.cells[0].durationSeconds);
      expect(json.costUsd).toBeGreaterThan(0);
      expect(json.overheads.jobStartSeconds).toBeGreaterThan(0);
    });

    it('refuses an unknown cell and the LLM-gateway what-if options, naming them', async () => {
      const unknown = await runLabHere([...network, '--cell', 'dp-nft']);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toBe(
        'lab plan: --cell dp-nft: no such cell in network.cells (cells: mesh, dp-iptables, dp-cilium)\n',
      );
      const whatIf = await runLabHere([...network, '--prefixes', '8', '--kv-tokens', '1000']);
      expect(whatIf.code).toBe(1);
      expect(whatIf.stderr).toMatch(
        /^lab plan: --prefixes, --kv-tokens: what-if values of the LLM-gateway lab's workload/,
      );
      const llm = await runLabHere(['plan', '--cell', 'mesh']);
      expect(llm.code).toBe(1);
      expect(llm.stderr).toContain('--cell mesh: cells belong to the network lab');
    });
  });
});

describe('lab plan --replicas (issue 17)', () => {
  it.each([4, 8])(
    'predicts every policy and the study for %i replicas, the partition with a client each',
    async (replicas) => {
      const run = await runLabHere(['plan', '--json', '--replicas', String(replicas)]);
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

  it('prints the table for 8 replicas and prices the configured cluster', async () => {
    const run = await runLabHere(['plan', '--replicas', '8'], { LAB_CONFIG: 'examples/multi-node.yaml' });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('  KV cache per replica    163,472 tokens x 8 replica(s)');
    expect(run.stdout).toMatch(/^ {2}policy +overall +replica 0 .* replica 7 /m);
    expect(run.stdout).toMatch(/^Verdict: routing can matter: /m);
    // The server (instance.pricePerHourUsd 4.6), two g6.12xlarge agents and a c7i.4xlarge.
    expect(run.stdout).toMatch(/about \d+\.\d\d USD at 14\.518 USD\/h$/m);
  });
});
