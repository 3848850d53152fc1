import { type BudgetNode, nodesSelected } from '../../config/placement-fit.ts';
import {
  type FitPods,
  fitOnNodes,
  type UnplacedPods,
  unplacedByNodes,
  unplacedText,
} from '../../study/node-fit.ts';
import { formatCpu, formatMemory, parseQuantity } from '../../study/quantity.ts';
import {
  type Json,
  type KubeObject,
  labelsOf,
  list,
  nameOf,
  objectRef,
  record,
  stringMap,
} from '../manifest.ts';
import { ofKind, podTemplateOf, replicasOf, type Testbed } from '../testbed.ts';
import { BUDGET, type Violation } from '../violation.ts';

/**
 * The resource budget: the CPU and memory requests of everything that can run at once must fit
 * the node's allocatable, or the last pods to be created stay Pending and every run that needs
 * them fails (the manual lab's AI Gateway Envoy, created last on a full node).
 */

export interface NodeCapacity {
  /** Allocatable CPU cores. */
  readonly cpu: number;
  /** Allocatable memory in bytes. */
  readonly memoryBytes: number;
}

/** One thing that holds requests while the study runs. */
export interface Consumer {
  /** `StatefulSet vllm/qwen3 x2` */
  readonly what: string;
  readonly cpu: number;
  readonly memoryBytes: number;
}

/** Label of the benchmark Jobs (charts/benchmark-job.ts BENCHMARK_LABEL): the benchmark id. */
const BENCHMARK_LABEL = 'lab.llm-gateway/benchmark';
/** A label naming a Job's run, when the manifests carry one. */
const RUN_LABEL = 'lab.llm-gateway/run';
/** Envoy Gateway v1.8.1's proxy defaults (api/v1alpha1/shared_types.go): 1 replica, 100m CPU, 512Mi. */
const ENVOY_GATEWAY_DEFAULT = { replicas: 1, cpu: '100m', memory: '512Mi' };

interface Requests {
  readonly cpu: number;
  readonly memoryBytes: number;
}

/** A container's requests; Kubernetes defaults a missing request to the limit when one is set. */
function containerRequests(container: unknown): Requests {
  const resources = record(record(container).resources);
  const requests = record(resources.requests);
  const limits = record(resources.limits);
  const of = (name: string) => parseQuantity(requests[name] ?? limits[name]) ?? 0;
  return { cpu: of('cpu'), memoryBytes: of('memory') };
}

/**
 * A pod's effective requests as the scheduler counts them: the sum of its containers, or its
 * largest initContainer when that is more (init containers run one at a time, before the rest).
 */
export function podRequests(spec: Json): Requests {
  const sum = list(spec.containers)
    .map(containerRequests)
    .reduce((a, b) => ({ cpu: a.cpu + b.cpu, memoryBytes: a.memoryBytes + b.memoryBytes }), {
      cpu: 0,
      memoryBytes: 0,
    });
  const init = list(spec.initContainers).map(containerRequests);
  return {
    cpu: Math.max(sum.cpu, ...init.map((r) => r.cpu)),
    memoryBytes: Math.max(sum.memoryBytes, ...init.map((r) => r.memoryBytes)),
  };
}

function times(object: KubeObject, count: number, requests: Requests): Consumer {
  return {
    what: `${objectRef(object)}${count === 1 ? '' : ` x${count}`}`,
    cpu: requests.cpu * count,
    memoryBytes: requests.memoryBytes * count,
  };
}

function isBenchmarkJob(testbed: Testbed, job: KubeObject): boolean {
  return testbed.benchClients.some((ref) => ref.pod.object === job);
}

/** The run a benchmark Job belongs to: a run label, else its benchmark id without the `-r<i>` of a partition client. */
export function runOfJob(job: KubeObject): string {
  const labels = labelsOf(job);
  const benchmark = labels[BENCHMARK_LABEL] ?? nameOf(job).replace(/^bench-/, '');
  return labels[RUN_LABEL] ?? benchmark.replace(/-r\d+$/, '');
}

/** A workload that runs all the time: its pod spec, how many pods, and what each requests. */
interface StandingWorkload {
  readonly object: KubeObject;
  /** After the object's name: `(the Envoy Gateway proxy it describes)`. */
  readonly note?: string;
  readonly spec: Json;
  readonly count: number;
  readonly requests: Requests;
  /** A DaemonSet: one pod per node it selects (counted once on a single node). */
  readonly everyNode: boolean;
}

/** Pods a workload runs at once: a Job's parallelism, a controller's replicas, one for a DaemonSet (per node) or Pod. */
function podCount(object: KubeObject): number {
  if (object.kind === 'DaemonSet' || object.kind === 'Pod') return 1;
  if (object.kind !== 'Job') return replicasOf(object);
  const parallelism = record(object.spec).parallelism;
  return typeof parallelism === 'number' ? parallelism : 1;
}

/**
 * Workloads that run all the time: Deployments, StatefulSets, ReplicaSets, DaemonSets, Pods, other
 * Jobs, and the proxies Envoy Gateway creates for each EnvoyProxy (its envoy container and pod
 * settings), with v1.8.1's defaults.
 */
function standingWorkloads(testbed: Testbed): StandingWorkload[] {
  const workloads = testbed.objects.flatMap((object): StandingWorkload[] => {
    const pod = podTemplateOf(object);
    if (!pod || object.kind === 'CronJob') return [];
    if (object.kind === 'Job' && isBenchmarkJob(testbed, object)) return [];
    const everyNode = object.kind === 'DaemonSet';
    const count = podCount(object);
    return [{ object, spec: pod.spec, count, requests: podRequests(pod.spec), everyNode }];
  });
  const proxies = ofKind(testbed, 'EnvoyProxy').map((proxy): StandingWorkload => {
    const deployment = record(record(record(record(proxy.spec).provider).kubernetes).envoyDeployment);
    const requests = record(record(record(deployment.container).resources).requests);
    return {
      object: proxy,
      note: '(the Envoy Gateway proxy it describes)',
      spec: record(deployment.pod),
      count: typeof deployment.replicas === 'number' ? deployment.replicas : ENVOY_GATEWAY_DEFAULT.replicas,
      requests: {
        cpu: parseQuantity(requests.cpu ?? ENVOY_GATEWAY_DEFAULT.cpu) ?? 0,
        memoryBytes: parseQuantity(requests.memory ?? ENVOY_GATEWAY_DEFAULT.memory) ?? 0,
      },
      everyNode: false,
    };
  });
  return [...workloads, ...proxies];
}

/** The standing workloads as budget lines: `StatefulSet vllm/qwen3 x2`. */
function standingConsumers(testbed: Testbed): Consumer[] {
  return standingWorkloads(testbed).map((w) => {
    const line = times(w.object, w.count, w.requests);
    return w.note ? { ...line, what: `${line.what} ${w.note}` } : line;
  });
}

/**
 * The benchmark Jobs that run together: every client of one run (the ideal partition starts one
 * per replica at once). The largest group by CPU and by memory; runs follow one another.
 */
function largestBenchmarkRun(testbed: Testbed): { cpu: Consumer; memory: Consumer } | undefined {
  const jobs = [...new Set(testbed.benchClients.map((ref) => ref.pod.object))].filter(
    (o) => o.kind === 'Job',
  );
  if (jobs.length === 0) return undefined;
  const runs = new Map<string, KubeObject[]>();
  for (const job of jobs) runs.set(runOfJob(job), [...(runs.get(runOfJob(job)) ?? []), job]);
  const groups: Consumer[] = [...runs].map(([run, members]) => {
    const total = members
      .map((job) => podRequests(record(podTemplateOf(job)?.spec)))
      .reduce((a, b) => ({ cpu: a.cpu + b.cpu, memoryBytes: a.memoryBytes + b.memoryBytes }));
    return {
      what: `benchmark run ${run} (${members.length} Job${members.length === 1 ? '' : 's'} at once)`,
      ...total,
    };
  });
  const by = (key: 'cpu' | 'memoryBytes') => groups.reduce((a, b) => (b[key] > a[key] ? b : a));
  return { cpu: by('cpu'), memory: by('memoryBytes') };
}

/** Everything that can hold requests at the same moment, per resource. */
export function concurrentConsumers(testbed: Testbed): { cpu: Consumer[]; memory: Consumer[] } {
  const standing = standingConsumers(testbed);
  const bench = largestBenchmarkRun(testbed);
  return {
    cpu: bench ? [...standing, bench.cpu] : standing,
    memory: bench ? [...standing, bench.memory] : standing,
  };
}

const BIGGEST = 4;

/** Budget rule: summed requests of what runs at once fit the node's allocatable CPU and memory. */
export function requestsFitNode(testbed: Testbed, capacity: NodeCapacity): Violation[] {
  const consumers = concurrentConsumers(testbed);
  const check = (
    resource: 'cpu' | 'memory',
    key: 'cpu' | 'memoryBytes',
    limit: number,
    format: (n: number) => string,
    option: string,
  ): Violation[] => {
    const list = consumers[resource];
    const total = list.reduce((sum, c) => sum + c[key], 0);
    if (total <= limit) return [];
    const biggest = [...list]
      .sort((a, b) => b[key] - a[key])
      .slice(0, BIGGEST)
      .map((c) => `${c.what} ${format(c[key])}`)
      .join(', ');
    return [
      {
        object: '(everything that runs at once)',
        field: `resources.requests.${resource}`,
        lesson: BUDGET,
        message: `${resource === 'cpu' ? 'CPU' : 'memory'} requests add up to ${format(total)}, more than the node's ${format(limit)} (${option}); biggest: ${biggest}; the pods created last stay Pending and the runs that need them fail`,
      },
    ];
  };
  return [
    ...check('cpu', 'cpu', capacity.cpu, (n) => `${formatCpu(n)} CPU`, '--node-cpu'),
    ...check('memory', 'memoryBytes', capacity.memoryBytes, formatMemory, '--node-memory-gib'),
  ];
}

/**
 * The cluster the per-node budget is held against: its nodes (with the labels pods select them by)
 * and the study runner's node selector, beside which the runner pins every benchmark Job at run
 * time (lib/runner/layout.ts onRunnerNode), so the clients of a run share the runner's node.
 */
export interface BudgetCluster {
  readonly nodes: readonly BudgetNode[];
  readonly runnerNodeSelector: Readonly<Record<string, string>>;
}

const GPU = 'nvidia.com/gpu';

/** Whole GPUs a pod takes: its containers' `nvidia.com/gpu` (extended resources: request = limit). */
function podGpus(spec: Json): number {
  return list(spec.containers).reduce((sum: number, container) => {
    const resources = record(record(container).resources);
    const n = Number(record(resources.limits)[GPU] ?? record(resources.requests)[GPU] ?? 0);
    return sum + (Number.isFinite(n) ? n : 0);
  }, 0);
}

function fitPods(
  what: string,
  count: number,
  spec: Json,
  requests: Requests,
  nodes: readonly string[],
  everyNode = false,
): FitPods {
  return {
    what,
    count,
    cpuMillis: Math.round(requests.cpu * 1000),
    memoryMiB: requests.memoryBytes / 2 ** 20,
    gpus: podGpus(spec),
    nodes,
    everyNode,
  };
}

/**
 * The standing workloads as pods with their nodes: those matching the pod's nodeSelector (required
 * node affinity and taints are not modelled: the lab's charts place by nodeSelector alone).
 */
function standingPods(testbed: Testbed, cluster: BudgetCluster): FitPods[] {
  return standingWorkloads(testbed).map((w) =>
    fitPods(
      w.note ? `${objectRef(w.object)} ${w.note}` : objectRef(w.object),
      w.count,
      w.spec,
      w.requests,
      nodesSelected(cluster.nodes, stringMap(w.spec.nodeSelector)),
      w.everyNode,
    ),
  );
}

/** The benchmark Jobs of each run, each on the runner's node among those its own selector allows. */
function benchmarkRuns(testbed: Testbed, cluster: BudgetCluster): { run: string; pods: FitPods[] }[] {
  const jobs = [...new Set(testbed.benchClients.map((ref) => ref.pod.object))].filter(
    (o) => o.kind === 'Job',
  );
  const runs = new Map<string, FitPods[]>();
  for (const job of jobs) {
    const spec = record(podTemplateOf(job)?.spec);
    const selector = { ...stringMap(spec.nodeSelector), ...cluster.runnerNodeSelector };
    const pods = fitPods(objectRef(job), 1, spec, podRequests(spec), nodesSelected(cluster.nodes, selector));
    runs.set(runOfJob(job), [...(runs.get(runOfJob(job)) ?? []), pods]);
  }
  // Largest first: the clients' memory is what fills a node (12 GiB each by default).
  const memory = (pods: FitPods[]) => pods.reduce((sum, p) => sum + p.memoryMiB, 0);
  return [...runs].map(([run, pods]) => ({ run, pods })).sort((a, b) => memory(b.pods) - memory(a.pods));
}

function budgetViolation(groups: readonly UnplacedPods[], run: string | undefined): Violation {
  const names = groups[0].nodes.map((l) => l.node.name);
  const during = run === undefined ? '' : ` during benchmark run ${run}`;
  return {
    object:
      names.length === 0
        ? '(no node selected)'
        : `(node${names.length === 1 ? '' : 's'} ${names.join(', ')})`,
    field: 'resources.requests',
    lesson: BUDGET,
    message: `${unplacedText(groups)}${during}; the pods that find no room stay Pending and the runs that need them fail`,
  };
}

/**
 * Budget rule on a cluster of several nodes: the pods that run at once fit node by node (the sum
 * over the cluster can pass while a GPU node cannot hold its replicas and clients). The standing
 * pods first, then every run's Jobs beside them, largest first; the first that does not fit is reported.
 */
export function requestsFitNodes(testbed: Testbed, cluster: BudgetCluster): Violation[] {
  const standing = standingPods(testbed, cluster);
  const report = (pods: FitPods[], run?: string) => {
    const { unplaced } = fitOnNodes(pods, cluster.nodes);
    return unplacedByNodes(unplaced).map((groups) => budgetViolation(groups, run));
  };
  const alone = report(standing);
  if (alone.length > 0) return alone;
  for (const { run, pods } of benchmarkRuns(testbed, cluster)) {
    const violations = report([...standing, ...pods], run);
    if (violations.length > 0) return violations;
  }
  return [];
}
