import { describe, expect, it } from 'vitest';
import {
  clusterGpuCount,
  clusterNodes,
  clusterPricePerHourUsd,
  vcpusByQuota,
} from '../../lib/config/cluster.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { configWarnings } from '../../lib/config/warnings.ts';
import { problems } from './problems.ts';

const TWO_GPU_ONE_CPU = [
  { name: 'gpu', role: 'gpu', count: 2, instanceType: 'g6.xlarge' },
  { name: 'client', role: 'cpu', instanceType: 'c7i.4xlarge' },
];
/** Agents need the longer ready timeout (the server waits for them): 60 minutes here. */
const withAgents = (agents: unknown[], extra: object = {}) => ({
  cluster: { agents },
  instance: { readyTimeoutMinutes: 60 },
  ...extra,
});

describe('cluster.agents (issue 17)', () => {
  it('is empty by default: the cluster is the one GPU host', () => {
    const config = parseLabConfig({});
    expect(config.cluster.agents).toEqual([]);
    expect(clusterNodes(config)).toEqual([
      {
        name: 'server',
        role: 'gpu',
        instanceType: 'g6.12xlarge',
        gpus: 4,
        vcpus: 48,
        memoryGiB: 192,
        pricePerHourUsd: 4.6,
        quota: { name: 'Running On-Demand G and VT instances', code: 'L-DB2E81BA' },
      },
    ]);
    expect(clusterGpuCount(config)).toBe(4);
    expect(configWarnings(config).some((w) => w.startsWith('cluster'))).toBe(false);
  });

  it('lists every host, server first, with the facts of its type; GPU agents add their GPUs', () => {
    const config = parseLabConfig(withAgents(TWO_GPU_ONE_CPU));
    const nodes = clusterNodes(config);
    expect(nodes.map((n) => [n.name, n.agent, n.role, n.instanceType, n.gpus, n.vcpus, n.memoryGiB])).toEqual(
      [
        ['server', undefined, 'gpu', 'g6.12xlarge', 4, 48, 192],
        ['gpu-1', 'gpu', 'gpu', 'g6.xlarge', 1, 4, 16],
        ['gpu-2', 'gpu', 'gpu', 'g6.xlarge', 1, 4, 16],
        ['client-1', 'client', 'cpu', 'c7i.4xlarge', 0, 16, 32],
      ],
    );
    expect(clusterGpuCount(config)).toBe(6);
    expect(clusterPricePerHourUsd(nodes)).toBeCloseTo(4.6 + 2 * 0.805 + 0.714, 5);
  });

  it('sums the vCPUs per On-Demand quota and warns with the sums', () => {
    const config = parseLabConfig(withAgents(TWO_GPU_ONE_CPU));
    expect(vcpusByQuota(clusterNodes(config)).map((q) => [q.quota.name, q.vcpus])).toEqual([
      ['Running On-Demand G and VT instances', 56],
      ['Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances', 16],
    ]);
    const warnings = configWarnings(config).filter((w) => w.startsWith('cluster'));
    expect(warnings).toEqual([
      'cluster: the hosts need 56 vCPUs of "Running On-Demand G and VT instances" (quota code L-DB2E81BA) at once (server 48 + gpu-1 4 + gpu-2 4); check the account\'s quota in this region before deploying',
      'cluster: the hosts need 16 vCPUs of "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" (quota code L-1216C47A) at once (client-1 16); check the account\'s quota in this region before deploying',
    ]);
  });

  it('takes a type outside the table when the agent gives its facts; its own facts win over the table', () => {
    const config = parseLabConfig(
      withAgents([
        {
          name: 'big',
          role: 'gpu',
          instanceType: 'g5.12xlarge',
          gpus: 4,
          vcpus: 48,
          memoryGiB: 192,
          pricePerHourUsd: 5.67,
        },
        // A c7i.xlarge (4 vCPUs) is too small for the default front ends (the per-node budget).
        { name: 'cheap', role: 'cpu', instanceType: 'c7i.2xlarge', pricePerHourUsd: 0.1 },
      ]),
    );
    expect(
      clusterNodes(config)
        .slice(1)
        .map((n) => [n.name, n.gpus, n.pricePerHourUsd]),
    ).toEqual([
      ['big-1', 4, 5.67],
      ['cheap-1', 0, 0.1],
    ]);
    expect(clusterGpuCount(config)).toBe(8);
  });

  it('rejects a GPU agent on a type without GPUs, a zero count, a name used twice and a type without facts', () => {
    expect(problems(withAgents([{ name: 'gpu', role: 'gpu', instanceType: 'c7i.4xlarge' }]))).toEqual([
      'cluster.agents[0].instanceType = "c7i.4xlarge": "c7i.4xlarge" has no GPU but the agent\'s role is gpu; use a GPU type (e.g. g6.xlarge) or role cpu',
    ]);
    expect(problems(withAgents([{ name: 'gpu', role: 'gpu', count: 0, instanceType: 'g6.xlarge' }]))).toEqual(
      ['cluster.agents[0].count = 0: must be at least 1; remove the entry for no agent of this kind'],
    );
    expect(
      problems(
        withAgents([
          { name: 'gpu', role: 'gpu', instanceType: 'g6.xlarge' },
          { name: 'gpu', role: 'cpu', instanceType: 'c7i.2xlarge' },
        ]),
      ),
    ).toEqual(['cluster.agents[1].name = "gpu": "gpu" is used twice']);
    expect(problems(withAgents([{ name: 'x', role: 'gpu', instanceType: 'g5.xlarge', gpus: 1 }]))).toEqual([
      'cluster.agents[0].instanceType = "g5.xlarge": "g5.xlarge" is not in the instance table (g6.xlarge, g6.2xlarge, g6.4xlarge, g6.8xlarge, g6.12xlarge, g6.24xlarge, g6.48xlarge, c7i.xlarge, c7i.2xlarge, c7i.4xlarge, c7i.8xlarge, m7i.xlarge, m7i.2xlarge, m7i.4xlarge); give gpus, vcpus, memoryGiB and pricePerHourUsd for it; missing: vcpus, memoryGiB, pricePerHourUsd',
    ]);
    expect(problems(withAgents([{ name: 'Gpu', role: 'tpu', instanceType: 'g6.xlarge' }]))).toHaveLength(2);
  });

  it("needs a ready timeout that holds the server's wait for its agents", () => {
    expect(problems({ cluster: { agents: TWO_GPU_ONE_CPU } })).toEqual([
      "instance.readyTimeoutMinutes = 45: must be at least 53 with cluster.agents, got 45: the server's bootstrap also waits up to 8 minutes for its agents to join and fill their model caches",
    ]);
    expect(problems({ cluster: { agents: TWO_GPU_ONE_CPU }, instance: { readyTimeoutMinutes: 53 } })).toEqual(
      [],
    );
  });

  it('warns when a cpu agent runs on a GPU type (its GPUs are paid for and unused)', () => {
    // Front ends on the GPU host: the g6.xlarge's 4 vCPUs cannot hold the default ones (per-node budget).
    const gpuFrontEnds = { placement: { frontEnds: 'gpu' } };
    const config = parseLabConfig(
      withAgents([{ name: 'client', role: 'cpu', instanceType: 'g6.xlarge' }], gpuFrontEnds),
    );
    expect(clusterGpuCount(config)).toBe(4);
    expect(configWarnings(config)).toContain(
      'cluster.agents client: role cpu on g6.xlarge leaves its 1 GPU(s) unused but paid for; use a CPU type (e.g. c7i.4xlarge) or role gpu',
    );
  });

  it('refuses agents in the network lab, whose cells are one host each', () => {
    expect(problems(withAgents(TWO_GPU_ONE_CPU, { lab: 'network' }))).toEqual([
      expect.stringMatching(
        /^cluster\.agents = .*: agents join the LLM-gateway lab only; a network-lab cell is one host \(leave cluster\.agents empty\)$/,
      ),
    ]);
  });
});
