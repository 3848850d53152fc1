import { describe, expect, it } from 'vitest';
import {
  type FitNode,
  type FitPods,
  fitOnNodes,
  unplacedByNodes,
  unplacedText,
} from '../../lib/study/node-fit.ts';

const node = (name: string, pool: string, cpu: number, gib: number, gpus = 0): FitNode => ({
  name,
  pool,
  cpuMillis: cpu * 1000,
  memoryMiB: gib * 1024,
  gpus,
});
const pods = (what: string, count: number, cpu: number, gib: number, nodes: string[], gpus = 0): FitPods => ({
  what,
  count,
  cpuMillis: cpu * 1000,
  memoryMiB: gib * 1024,
  gpus,
  nodes,
});

describe('fitOnNodes (first-fit decreasing per node)', () => {
  const gpuNodes = [node('server', 'gpu', 48, 192, 4), node('gpu-1', 'gpu', 48, 192, 4)];

  it('gives each replica whole GPUs on one node: 5 single-GPU replicas over two 4-GPU nodes', () => {
    const fit = fitOnNodes([pods('vLLM replica', 5, 4, 32, ['server', 'gpu-1'], 1)], gpuNodes);
    expect(fit.unplaced).toEqual([]);
    expect(fit.loads.map((l) => l.gpus)).toEqual([4, 1]);
    // A 2-GPU pod takes both on one node: three of them on two 3-GPU nodes (6 GPUs in sum) leave one out.
    const threeGpu = [node('a', 'gpu', 48, 192, 3), node('b', 'gpu', 48, 192, 3)];
    const wide = fitOnNodes([pods('two-GPU', 3, 1, 1, ['a', 'b'], 2)], threeGpu);
    expect(wide.unplaced.map((u) => [u.pods.what, u.missing])).toEqual([['two-GPU', 1]]);
    expect(wide.loads.map((l) => l.gpus)).toEqual([2, 2]);
  });

  it('places the pods with the fewest nodes first, so a pinned pod keeps its room', () => {
    // Replicas could fill the server first; the clients may only go there.
    const fit = fitOnNodes(
      [pods('vLLM replica', 4, 4, 32, ['server', 'gpu-1'], 1), pods('client', 4, 2, 24, ['server'])],
      gpuNodes,
    );
    expect(fit.unplaced).toEqual([]);
    expect(fit.loads[0].pods).toEqual([
      { what: 'client', count: 4 },
      { what: 'vLLM replica', count: 3 },
    ]);
  });

  it('reports what finds no room with the nodes it could have gone to, though the sum fits', () => {
    const nodes = [...gpuNodes, node('cpu-1', 'cpu', 4, 8)];
    const fit = fitOnNodes([pods('Envoy', 3, 2, 0.5, ['cpu-1'])], nodes);
    expect(fit.unplaced).toHaveLength(1);
    expect(fit.unplaced[0].missing).toBe(1);
    expect(unplacedText(unplacedByNodes(fit.unplaced)[0])).toBe(
      '1 of 3 x Envoy (2 CPU, 0.5 GiB each) find no room: cpu node cpu-1 (4 CPU, 8 GiB) holds 2 x Envoy (4 CPU, 1 GiB)',
    );
  });

  it('puts a DaemonSet pod on every node of its pool before the rest, and names a node without room for it', () => {
    const nodes = [node('server', 'gpu', 48, 192, 4), node('tiny', 'gpu', 1, 1, 1)];
    const daemon = { ...pods('device plugin', 1, 0.05, 2, ['server', 'tiny']), everyNode: true };
    const fit = fitOnNodes([daemon], nodes);
    expect(fit.loads.map((l) => l.pods)).toEqual([[{ what: 'device plugin', count: 1 }], []]);
    expect(unplacedText(fit.unplaced)).toMatch(
      /^device plugin \(0\.05 CPU, 2 GiB each\) on 1 node find no room/,
    );
    // Given after a pod that would fill the server, it still goes first: the other pod finds no room.
    const filler = pods('filler', 1, 48, 1, ['server']);
    const first = fitOnNodes([filler, daemon], nodes);
    expect(first.loads[0].pods).toEqual([{ what: 'device plugin', count: 1 }]);
    expect(first.unplaced.map((u) => u.pods.what)).toEqual(['filler', 'device plugin']);
  });

  it('says so when no node carries the selector', () => {
    const fit = fitOnNodes([pods('runner', 1, 0.1, 0.125, [])], gpuNodes);
    expect(unplacedText(fit.unplaced)).toBe(
      '1 of 1 x runner (0.1 CPU, 0.13 GiB each) find no room: no node carries their node selector',
    );
  });
});
