import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseLabConfig } from '../../lib/config/load.ts';
import { clusterCapacity } from '../../lib/config/placement.ts';
import { labBudgetFit } from '../../lib/config/placement-fit.ts';
import { resourceBudget } from '../../lib/study/resources.ts';
import { problems } from './problems.ts';

const READY = { readyTimeoutMinutes: 60 };
const ALL_ARMS = ['epp-prefix3', 'ai-gateway', 'llmd-precise'];
const EXAMPLE = parse(readFileSync(new URL('../../examples/multi-node.yaml', import.meta.url), 'utf8'));

/** The GPU host and one CPU agent of the given type. */
const withCpuAgent = (instanceType: string, more: Record<string, unknown> = {}) => ({
  instance: READY,
  cluster: { agents: [{ name: 'cpu', role: 'cpu', instanceType }] },
  ...more,
});

describe('resource budget node by node (cluster.agents)', () => {
  it('rejects replicas and clients that fit the cluster in sum but not the GPU host they must share', () => {
    // 4 replicas (128 GiB) and 4 clients of 20 GiB: 208 GiB on a 192 GiB GPU host, beside a
    // 64 GiB CPU agent whose memory the sum counts but no replica or client may use.
    const settings = withCpuAgent('m7i.4xlarge', { vllm: { replicas: 4 }, benchmark: { memoryLimitGi: 20 } });
    // The old rule held the budget against the cluster's sum, which this passes.
    const sized = { ...withCpuAgent('m7i.4xlarge'), vllm: { replicas: 4 }, benchmark: { memoryLimitGi: 15 } };
    const config = parseLabConfig(sized, 'test.yaml');
    const sum = resourceBudget(
      { ...config, benchmark: { ...config.benchmark, memoryLimitGi: 20 } },
      clusterCapacity(config),
    );
    expect(sum.fits).toBe(true);
    expect(problems(settings)).toEqual([
      'instance.memoryGiB = 192: the pods that run at once fit the cluster in sum but not node by node: 1 of 4 x benchmark client (largest run) (2 CPU, 20 GiB each) find no room: gpu node server (48 CPU, 192 GiB, 4 GPUs) holds 1 x NVIDIA device plugin, 4 x vLLM replica, 3 x benchmark client (largest run), 1 x study runner (22.15 CPU, 188.19 GiB, 4 GPUs). Enable fewer optional arms (study.optionalArms), lower vllm.replicas or benchmark.memoryLimitGi, or use larger hosts or more GPU agents (cluster.agents)',
    ]);
    // 15 GiB clients leave room on the host: 188.19 GiB with the replicas, runner and device plugin.
    expect(
      problems(withCpuAgent('m7i.4xlarge', { vllm: { replicas: 4 }, benchmark: { memoryLimitGi: 15 } })),
    ).toEqual([]);
  });

  it('names a CPU node too small for the front ends, with what it holds and lacks', () => {
    const settings = withCpuAgent('c7i.xlarge', { study: { optionalArms: ALL_ARMS } });
    expect(problems(settings)).toEqual([
      'cluster.agents[0].instanceType = "c7i.xlarge": the pods that run at once fit the cluster in sum but not node by node: 3 of 3 x vllm-router (1 CPU, 0.5 GiB each), 3 of 3 x Endpoint Picker (0.5 CPU, 0.5 GiB each), 2 of 4 x Envoy (2 CPU, 0.5 GiB each) find no room: cpu node cpu-1 (4 CPU, 8 GiB) holds 2 x Envoy (4 CPU, 1 GiB). Use a larger CPU type or more cpu agents (cluster.agents), enable fewer optional arms (study.optionalArms), or put the front ends on the GPU nodes (placement.frontEnds: gpu)',
    ]);
    // The same front ends on a c7i.4xlarge fit; on the GPU host they fit beside the replicas.
    expect(problems(withCpuAgent('c7i.4xlarge', { study: { optionalArms: ALL_ARMS } }))).toEqual([]);
    expect(
      problems(
        withCpuAgent('c7i.xlarge', { study: { optionalArms: ALL_ARMS }, placement: { frontEnds: 'gpu' } }),
      ),
    ).toEqual([]);
  });

  it('places examples/multi-node.yaml: clients beside the runner on the server, front ends on the CPU node', () => {
    expect(problems(EXAMPLE)).toEqual([]);
    const config = parseLabConfig(EXAMPLE, 'multi-node.yaml');
    const fit = labBudgetFit(config, resourceBudget(config));
    expect(fit.unplaced).toEqual([]);
    const held = Object.fromEntries(fit.loads.map((l) => [l.node.name, l.pods]));
    expect(held.server).toContainEqual({ what: 'benchmark client (largest run)', count: 8 });
    expect(held.server).toContainEqual({ what: 'study runner', count: 1 });
    // Each replica on a GPU of its own: 8 over the 12 GPUs, none on the CPU node.
    const replicas = fit.loads.map((l) => l.pods.find((p) => p.what === 'vLLM replica')?.count ?? 0);
    expect(replicas.reduce((a, b) => a + b)).toBe(8);
    for (const load of fit.loads) expect(load.gpus).toBeLessThanOrEqual(load.node.gpus);
    expect(fit.loads.find((l) => l.node.name === 'cpu-1')?.pods.map((p) => p.what)).toEqual([
      'Envoy',
      'vllm-router',
      'Endpoint Picker',
    ]);
  });

  it('keeps the one-host lab to the sum and its message', () => {
    expect(problems({})).toEqual([]);
    expect(problems({ study: { optionalArms: ALL_ARMS } })).toEqual([]);
    expect(problems({ instance: { vcpus: 32 }, study: { optionalArms: ALL_ARMS } })[0]).toMatch(
      /^instance\.vcpus = 32: the pods that can run at once request 34\.15 CPUs but g6\.12xlarge has 32 vCPUs/,
    );
  });

  it('sends the llm-d EPP to a GPU node, where the model cache is', () => {
    const settings = withCpuAgent('c7i.4xlarge', { study: { optionalArms: ['llmd-precise'] } });
    const config = parseLabConfig(settings, 'test.yaml');
    const budget = resourceBudget(config);
    const epps = budget.placed.filter((l) => l.what === 'Endpoint Picker');
    expect(epps.map((l) => [l.placedOn, l.count])).toEqual([
      ['frontEnds', 1],
      ['modelCacheReaders', 1],
    ]);
    // The message lines still count every EPP once.
    expect(budget.lines.find((l) => l.what === 'Endpoint Picker')?.count).toBe(2);
    const server = labBudgetFit(config, budget).loads.find((l) => l.node.name === 'server');
    expect(server?.pods).toContainEqual({ what: 'Endpoint Picker', count: 1 });
  });
});
