import { cpuText, memoryText } from './resources.ts';

/**
 * Whether the pods that run at once fit the cluster node by node, not only in sum (issue 17): a
 * cluster's spare CPU on its CPU node does not help a GPU node whose replicas and benchmark clients
 * ask for more than it has. Pure: the configuration rules and `lab check` describe their pods and
 * nodes, this packs them.
 *
 * The packing is first-fit decreasing: pods with the fewest nodes to go to first (the runner and
 * the clients pinned beside it), then by their largest share of a node; each goes on the first of
 * its nodes with room. A packing found is a placement that exists; the scheduler, which spreads
 * pods, may still pick a worse one, so this is a necessary condition, as the sum was.
 */

/** One host as the budget sees it. */
export interface FitNode {
  /** `server`, `gpu-1` */
  readonly name: string;
  /** The node pool it belongs to: `gpu`, `cpu`. */
  readonly pool: string;
  readonly cpuMillis: number;
  readonly memoryMiB: number;
  readonly gpus: number;
}

/** Identical pods that run at once, and the nodes each may run on. */
export interface FitPods {
  /** `vLLM replica`, `StatefulSet vllm/qwen3` */
  readonly what: string;
  readonly count: number;
  readonly cpuMillis: number;
  readonly memoryMiB: number;
  /** Whole GPUs each pod takes (`nvidia.com/gpu`); a pod's GPUs are on one node. */
  readonly gpus: number;
  /** Names of the nodes a pod may go to (its node selector's matches). */
  readonly nodes: readonly string[];
  /** One pod on every node of `nodes` (a DaemonSet), `count` ignored. */
  readonly everyNode?: boolean;
}

/** What one node holds after the packing. */
export interface NodeLoad {
  readonly node: FitNode;
  readonly pods: { what: string; count: number }[];
  cpuMillis: number;
  memoryMiB: number;
  gpus: number;
}

/** Pods that no node of theirs has room for, with those nodes' loads. */
export interface UnplacedPods {
  readonly pods: FitPods;
  /** How many of `pods.count` found no room. */
  readonly missing: number;
  readonly nodes: readonly NodeLoad[];
}

export interface NodeFit {
  readonly loads: readonly NodeLoad[];
  readonly unplaced: readonly UnplacedPods[];
}

type Resource = 'cpuMillis' | 'memoryMiB' | 'gpus';
const RESOURCES: readonly Resource[] = ['cpuMillis', 'memoryMiB', 'gpus'];

function roomFor(load: NodeLoad, pods: FitPods): boolean {
  return RESOURCES.every((r) => load[r] + pods[r] <= load.node[r]);
}

function add(load: NodeLoad, pods: FitPods): void {
  for (const r of RESOURCES) load[r] += pods[r];
  const line = load.pods.find((p) => p.what === pods.what);
  if (line) line.count += 1;
  else load.pods.push({ what: pods.what, count: 1 });
}

/** The pods' largest share of their largest node: the dominant resource of first-fit decreasing. */
function dominantShare(pods: FitPods, nodes: readonly FitNode[]): number {
  return Math.max(
    ...RESOURCES.map((r) => {
      const most = Math.max(0, ...nodes.map((node) => node[r]));
      return most === 0 ? (pods[r] > 0 ? Number.POSITIVE_INFINITY : 0) : pods[r] / most;
    }),
  );
}

/** Packs the pods onto the nodes; what finds no room is `unplaced`, grouped as given. */
export function fitOnNodes(pods: readonly FitPods[], nodes: readonly FitNode[]): NodeFit {
  const loads = new Map<string, NodeLoad>(
    nodes.map((node) => [node.name, { node, pods: [], cpuMillis: 0, memoryMiB: 0, gpus: 0 }]),
  );
  const loadsOf = (group: FitPods) =>
    group.nodes.flatMap((name) => {
      const load = loads.get(name);
      return load ? [load] : [];
    });
  const missing = new Map<FitPods, number>();
  // DaemonSet pods first, one per node: the device plugin runs before the replicas that need its GPUs.
  for (const group of pods.filter((p) => p.everyNode)) {
    for (const load of loadsOf(group)) {
      if (roomFor(load, group)) add(load, group);
      else missing.set(group, (missing.get(group) ?? 0) + 1);
    }
  }
  const single = pods
    .filter((p) => !p.everyNode)
    .map((group) => ({
      group,
      choices: loadsOf(group),
      share: dominantShare(
        group,
        loadsOf(group).map((l) => l.node),
      ),
    }))
    .sort((a, b) => a.choices.length - b.choices.length || b.share - a.share);
  for (const { group, choices } of single) {
    for (let i = 0; i < group.count; i++) {
      const load = choices.find((l) => roomFor(l, group));
      if (load) add(load, group);
      else missing.set(group, (missing.get(group) ?? 0) + 1);
    }
  }
  return {
    loads: [...loads.values()],
    unplaced: pods.flatMap((group) => {
      const n = missing.get(group);
      return n ? [{ pods: group, missing: n, nodes: loadsOf(group) }] : [];
    }),
  };
}

/** `4 CPU, 32 GiB, 1 GPU` */
export function requestText(r: Pick<FitNode, Resource>): string {
  const gpus = r.gpus > 0 ? `, ${r.gpus} GPU${r.gpus === 1 ? '' : 's'}` : '';
  return `${cpuText(r.cpuMillis)} CPU, ${memoryText(r.memoryMiB)}${gpus}`;
}

/** `server (48 CPU, 192 GiB, 4 GPUs) holds 3 x vLLM replica, 8 x benchmark client (28.1 CPU, 184 GiB, 3 GPUs)` */
export function loadText(load: NodeLoad): string {
  const held = load.pods.length === 0 ? 'nothing' : load.pods.map((p) => `${p.count} x ${p.what}`).join(', ');
  return `${load.node.name} (${requestText(load.node)}) holds ${held} (${requestText(load)})`;
}

/** The unplaced groups gathered by the nodes they could have gone to, for one message per set of nodes. */
export function unplacedByNodes(unplaced: readonly UnplacedPods[]): UnplacedPods[][] {
  const sets = new Map<string, UnplacedPods[]>();
  for (const u of unplaced) {
    const key = u.nodes.map((l) => l.node.name).join(',');
    sets.set(key, [...(sets.get(key) ?? []), u]);
  }
  return [...sets.values()];
}

/** `2 of 4 x Envoy (2 CPU, 0.5 GiB each)`; a DaemonSet: `NVIDIA device plugin (...) on 1 node`. */
function missingText({ pods, missing }: UnplacedPods): string {
  const each = `(${requestText(pods)} each)`;
  if (pods.everyNode) return `${pods.what} ${each} on ${missing} node${missing === 1 ? '' : 's'}`;
  return `${missing} of ${pods.count} x ${pods.what} ${each}`;
}

/**
 * One sentence for groups that share their nodes (unplacedByNodes): what does not fit and what
 * each pod asks for, then the pool's nodes with their capacity and what they already hold.
 */
export function unplacedText(groups: readonly UnplacedPods[]): string {
  const nodes = groups[0]?.nodes ?? [];
  const pools = [...new Set(nodes.map((l) => l.node.pool))].join('/');
  const where =
    nodes.length === 0
      ? 'no node carries their node selector'
      : `${pools} node${nodes.length === 1 ? '' : 's'} ${nodes.map(loadText).join('; ')}`;
  return `${groups.map(missingText).join(', ')} find no room: ${where}`;
}
