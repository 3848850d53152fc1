import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { checkManifests, type KubeObject } from '../../lib/check/index.ts';
import type { BudgetCluster } from '../../lib/check/rules/budget.ts';
import { BUDGET } from '../../lib/check/violation.ts';
import { clusterNodeRoles, labPlacement } from '../../lib/config/placement.ts';
import { type BudgetNode, budgetNodes } from '../../lib/config/placement-fit.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { synthLab } from '../charts/synth.ts';

const EXAMPLE = parse(readFileSync(new URL('../../examples/multi-node.yaml', import.meta.url), 'utf8'));
const lab = synthLab(EXAMPLE);
/** The synthesized charts and every benchmark Job of the study, as `lab check` sees dist/. */
const objects = [
  ...lab.objects,
  ...studyPlan(lab.config).runs.flatMap((run) =>
    run.benchmarks.map((spec) => benchmarkJob(lab.config, spec)),
  ),
] as unknown as KubeObject[];
const nodes = budgetNodes(lab.config);
const cluster = (resized: Record<string, Partial<BudgetNode>> = {}): BudgetCluster => ({
  nodes: nodes.map((node) => ({ ...node, ...resized[node.name] })),
  runnerNodeSelector: labPlacement(lab.config).runner.nodeSelector,
});
const options = { placement: labPlacement(lab.config), clusterRoles: clusterNodeRoles(lab.config) };
const budget = (found: ReturnType<typeof checkManifests>) => found.filter((v) => v.lesson === BUDGET);

describe('lab check: the resource budget node by node (cluster.agents)', () => {
  it('passes examples/multi-node.yaml fitted to its four hosts', () => {
    expect(nodes.map((n) => [n.name, n.pool, n.cpuMillis, n.memoryMiB, n.gpus])).toEqual([
      ['server', 'gpu', 48_000, 192 * 1024, 4],
      ['gpu-1', 'gpu', 48_000, 192 * 1024, 4],
      ['gpu-2', 'gpu', 48_000, 192 * 1024, 4],
      ['cpu-1', 'cpu', 16_000, 32 * 1024, 0],
    ]);
    expect(checkManifests(objects, { ...options, budgetCluster: cluster() })).toEqual([]);
  });

  it('rejects clients that the sum passes but the runner node cannot hold, naming the node', () => {
    // A 96 GiB server: the cluster still has 512 GiB, but the 8 partition clients (12 GiB each)
    // are pinned beside the runner on the server, with the device plugin's 64 MiB.
    const sum = { nodeCpu: 160, nodeMemoryGiB: 96 + 192 + 192 + 32 };
    expect(budget(checkManifests(objects, { ...options, ...sum }))).toEqual([]);
    const found = budget(
      checkManifests(objects, { ...options, budgetCluster: cluster({ server: { memoryMiB: 96 * 1024 } }) }),
    );
    expect(found.map((v) => [v.object, v.field])).toEqual([['(node server)', 'resources.requests']]);
    expect(found[0].message).toMatch(
      /^1 of 1 x Job vllm\/bench-partition-r\d \(2 CPU, 12 GiB each\) find no room: gpu node server \(48 CPU, 96 GiB, 4 GPUs\) holds .*during benchmark run partition; the pods that find no room stay Pending/,
    );
  });

  it('names a CPU node too small for the front ends, with its capacity and what it holds', () => {
    const small = cluster({ 'cpu-1': { cpuMillis: 4000, memoryMiB: 8 * 1024 } });
    const found = budget(checkManifests(objects, { ...options, budgetCluster: small }));
    expect(found.map((v) => v.object)).toEqual(['(node cpu-1)']);
    expect(found[0].message).toMatch(/find no room: cpu node cpu-1 \(4 CPU, 8 GiB\) holds /);
    expect(found[0].message).toMatch(/x Deployment vllm\/vllm-router-[\w-]+ \(1 CPU, 0\.5 GiB each\)/);
    expect(found[0].message).not.toMatch(/during benchmark run/);
  });

  it('keeps the summed budget and its message for a cluster of one node', () => {
    const one = { nodes: nodes.slice(0, 1), runnerNodeSelector: {} };
    const found = budget(
      checkManifests(objects, { ...options, nodeCpu: 1, nodeMemoryGiB: 1000, budgetCluster: one }),
    );
    expect(found.map((v) => [v.object, v.field])).toEqual([
      ['(everything that runs at once)', 'resources.requests.cpu'],
    ]);
    expect(found[0].message).toMatch(
      /^CPU requests add up to [\d.]+ CPU, more than the node's 1 CPU \(--node-cpu\)/,
    );
  });
});
