import type { LabConfig } from '../config/schema.ts';
import { studyFrontEnds } from './arms.ts';
import { onEveryPair } from './pairs.ts';
import { studyPlan } from './plan.ts';
import { formatCpu, formatMemory, parseQuantity } from './quantity.ts';

/**
 * What each pod of the lab asks the scheduler for, and whether everything that can run at once
 * fits the node. The charts take their requests from here, so the budget the configuration is
 * checked against is the one the manifests carry.
 */

/** Requests (and the memory limit) of one container, as Kubernetes quantities. */
export interface ContainerRequests {
  readonly cpu: string;
  readonly memory: string;
  readonly memoryLimit?: string;
}

/** Requests of the lab's containers. */
export const REQUESTS = {
  /** A vLLM replica: tokenizer and detokenizer processes, the API server, weights staging in host RAM. */
  replica: { cpu: '4', memory: '32Gi', memoryLimit: '32Gi' },
  router: { cpu: '1', memory: '512Mi', memoryLimit: '2Gi' },
  endpointPicker: { cpu: '500m', memory: '512Mi', memoryLimit: '2Gi' },
  /** llm-d's initContainer that copies the tokenizer files; less than the EPP, so it adds nothing. */
  tokenizerSeed: { cpu: '100m', memory: '64Mi', memoryLimit: '256Mi' },
  /**
   * A standalone Envoy or the AI Gateway's Envoy. Only the front end under test carries load, so the
   * request leaves scheduling room for every arm's Envoy at once; the workers are set by
   * `--concurrency` and may use more CPU than requested (no CPU limit).
   */
  envoy: { cpu: '2', memory: '512Mi', memoryLimit: '2Gi' },
  devicePlugin: { cpu: '50m', memory: '64Mi', memoryLimit: '256Mi' },
  runner: { cpu: '100m', memory: '128Mi', memoryLimit: '512Mi' },
  /** The file server over the results claim (charts/results-store.ts): reads files for lab results. */
  resultsServer: { cpu: '20m', memory: '64Mi', memoryLimit: '256Mi' },
  /** The AWS CLI sidecar that syncs the results claim to S3 (charts/results-upload.ts). */
  resultsUpload: { cpu: '50m', memory: '128Mi', memoryLimit: '512Mi' },
} as const satisfies Record<string, ContainerRequests>;

/** A benchmark client: tokenizer plus dataset parsing (docs/facts.md §3.8). */
export function benchmarkRequests(config: LabConfig): ContainerRequests {
  const memory = `${config.benchmark.memoryLimitGi}Gi`;
  return { cpu: '2', memory, memoryLimit: memory };
}

/**
 * Requests outside the lab's manifests: the kubelet and K3s itself are not pods, but K3s's
 * CoreDNS and metrics-server request 100m each, and the AI Gateway arm adds the Envoy Gateway and
 * AI Gateway controllers. Kept as one reserve rather than read from manifests we do not render.
 */
export const CLUSTER_RESERVE: ContainerRequests = { cpu: '1', memory: '4Gi' };

/** One line of the budget: what runs, how many at once, and what each asks for. */
export interface BudgetLine {
  readonly what: string;
  readonly count: number;
  readonly cpuMillis: number;
  readonly memoryMiB: number;
}

/**
 * Where a kind of pod may run, in the words of LabPlacement (lib/config/placement.ts): the
 * replicas' GPU nodes, the front ends' nodes, the GPU nodes that have the model cache, the study
 * runner's node (the benchmark clients are pinned beside it), or any node (K3s's add-ons).
 */
export type BudgetPlace = 'replicas' | 'frontEnds' | 'modelCacheReaders' | 'runner' | 'anyNode';

/** Pods of one kind and where they may run, for the per-node fit. */
export interface PlacedLine extends BudgetLine {
  readonly placedOn: BudgetPlace;
  /** Whole GPUs each takes (`nvidia.com/gpu`). */
  readonly gpus: number;
  /** A DaemonSet: one on every node of its place, `count` is the single host's. */
  readonly everyNode: boolean;
}

export interface ResourceBudget {
  /** What runs at once, one line per kind of pod (for messages and the single host's sum). */
  readonly lines: readonly BudgetLine[];
  /** The same pods split by where they may run (the llm-d EPP reads the model cache, so goes to a GPU node). */
  readonly placed: readonly PlacedLine[];
  readonly cpuMillis: number;
  readonly memoryMiB: number;
  readonly capacityCpuMillis: number;
  readonly capacityMemoryMiB: number;
  readonly fits: boolean;
}

/** vCPUs and memory the pods may take: the host's, or the sum over a cluster's hosts. */
export interface BudgetCapacity {
  readonly vcpus: number;
  readonly memoryGiB: number;
}

/**
 * Everything that can run at once on the host: every replica and front end the study deploys
 * (Deployments stay up between runs), the device plugin, the runner, the reserve, and the largest
 * set of benchmark clients one run starts together (the ideal partition starts one per replica).
 * On a cluster of several hosts, `capacity` is their sum: a necessary condition only; `placed`
 * feeds the per-node fit (lib/study/node-fit.ts, labBudgetFit in lib/config/placement.ts).
 */
export function resourceBudget(
  config: LabConfig,
  capacity: BudgetCapacity = { vcpus: config.instance.vcpus, memoryGiB: config.instance.memoryGiB },
): ResourceBudget {
  const line = (
    what: string,
    count: number,
    r: ContainerRequests,
    placedOn: BudgetPlace,
    more: { gpus?: number; everyNode?: boolean } = {},
  ): PlacedLine => ({
    what,
    count,
    cpuMillis: cpuMillis(r.cpu),
    memoryMiB: memoryMiB(r.memory),
    placedOn,
    gpus: more.gpus ?? 0,
    everyNode: more.everyNode ?? false,
  });
  const frontEnds = studyFrontEnds(config);
  // With `study.parallelism: 2` the core front ends and the standard replicas exist once per pair.
  const pairs = config.study.parallelism;
  const count = (kind: string) =>
    frontEnds
      .filter((arm) => arm.frontEnd === kind)
      .reduce((sum, arm) => sum + (onEveryPair(arm) ? pairs : 1), 0);
  const replicaSets = (frontEnds.some((arm) => arm.servers === 'kv-events') ? 2 : 1) + pairs - 1;
  const eppFamily = count('epp') + count('ai-gateway') + count('llmd');
  // Each pair runs its own clients: at most the largest run's, beside the other pair's.
  const clients = pairs * Math.max(...studyPlan(config).runs.map((run) => run.benchmarks.length));
  const placed = [
    line('vLLM replica', replicaSets * config.vllm.replicas, REQUESTS.replica, 'replicas', { gpus: 1 }),
    line('vllm-router', count('router'), REQUESTS.router, 'frontEnds'),
    line('Endpoint Picker', count('epp') + count('ai-gateway'), REQUESTS.endpointPicker, 'frontEnds'),
    // charts/endpoint-picker.ts: the llm-d EPP seeds its tokenizer from the GPU nodes' model cache.
    line('Endpoint Picker', count('llmd'), REQUESTS.endpointPicker, 'modelCacheReaders'),
    line('Envoy', eppFamily, REQUESTS.envoy, 'frontEnds'),
    line('NVIDIA device plugin', 1, REQUESTS.devicePlugin, 'replicas', { everyNode: true }),
    line('study runner', 1, REQUESTS.runner, 'runner'),
    line(
      'results server',
      config.runner.results.volume === 'claim' ? 1 : 0,
      REQUESTS.resultsServer,
      'runner',
    ),
    line(
      'results uploader',
      config.runner.results.volume === 'claim' && config.runner.results.upload ? 1 : 0,
      REQUESTS.resultsUpload,
      'runner',
    ),
    line('benchmark client (largest run)', clients, benchmarkRequests(config), 'runner'),
    line('cluster add-ons (reserve)', 1, CLUSTER_RESERVE, 'anyNode'),
  ].filter((l) => l.count > 0);
  const lines = mergeLines(placed);
  const cpu = lines.reduce((sum, l) => sum + l.count * l.cpuMillis, 0);
  const memory = lines.reduce((sum, l) => sum + l.count * l.memoryMiB, 0);
  const capacityCpuMillis = capacity.vcpus * 1000;
  const capacityMemoryMiB = capacity.memoryGiB * 1024;
  return {
    lines,
    placed,
    cpuMillis: cpu,
    memoryMiB: memory,
    capacityCpuMillis,
    capacityMemoryMiB,
    fits: cpu <= capacityCpuMillis && memory <= capacityMemoryMiB,
  };
}

/** One line per kind of pod, the counts of its places added, in first-seen order. */
function mergeLines(placed: readonly PlacedLine[]): BudgetLine[] {
  const lines: BudgetLine[] = [];
  for (const { what, count, cpuMillis, memoryMiB } of placed) {
    const i = lines.findIndex((l) => l.what === what);
    if (i < 0) lines.push({ what, count, cpuMillis, memoryMiB });
    else lines[i] = { ...lines[i], count: lines[i].count + count };
  }
  return lines;
}

/** The budget's largest lines by CPU or memory, for a message: `8 x vLLM replica (32 CPU, 256 GiB)`. */
export function largestLines(budget: ResourceBudget, by: 'cpu' | 'memory', n = 3): string {
  const size = (l: BudgetLine) => l.count * (by === 'cpu' ? l.cpuMillis : l.memoryMiB);
  return [...budget.lines]
    .sort((a, b) => size(b) - size(a))
    .slice(0, n)
    .map(
      (l) =>
        `${l.count} x ${l.what} (${cpuText(l.count * l.cpuMillis)} CPU, ${memoryText(l.count * l.memoryMiB)})`,
    )
    .join(', ');
}

/** CPU of a Kubernetes quantity (`2`, `500m`) in whole millicores, so sums stay exact. */
export function cpuMillis(quantity: string): number {
  const cores = parseQuantity(quantity);
  if (cores === undefined) throw new Error(`not a CPU quantity: "${quantity}"`);
  return Math.round(cores * 1000);
}

/** Memory of a Kubernetes quantity (`512Mi`, `32Gi`) in MiB. */
export function memoryMiB(quantity: string): number {
  const bytes = parseQuantity(quantity);
  if (bytes === undefined) throw new Error(`not a memory quantity: "${quantity}"`);
  return bytes / 2 ** 20;
}

/** `34.15` (CPUs) from millicores. */
export function cpuText(millis: number): string {
  return formatCpu(millis / 1000);
}

/** `161.69 GiB` from MiB. */
export function memoryText(mib: number): string {
  return formatMemory(mib * 2 ** 20);
}
