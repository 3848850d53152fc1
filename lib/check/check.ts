import { defaultLabConfig } from '../config/load.ts';
import { clusterNodeRoles, type LabPlacement, labPlacement, type NodeRole } from '../config/placement.ts';
import { gibToBytes } from '../study/quantity.ts';
import type { KubeObject } from './manifest.ts';
import { cellGroups, findCell, isNetworkCell } from './network/cell.ts';
import { istioSchemaViolations } from './network/schemas.ts';
import {
  envoyAddressesByName,
  poolsSelectReplicas,
  routersAddressReplicasByName,
} from './rules/addressing.ts';
import {
  aiGatewayEppServesTls,
  aiGatewayReferencesResolve,
  backendKindsListed,
  extensionManagerComplete,
} from './rules/ai-gateway.ts';
import { benchmarkRunsOnce, workloadCreatesCachePressure } from './rules/benchmark.ts';
import { type BudgetCluster, type NodeCapacity, requestsFitNode, requestsFitNodes } from './rules/budget.ts';
import { envoyConfiguration, envoyContainer } from './rules/envoy.ts';
import {
  eppConfigPresent,
  eppFlagsParse,
  eppKvMetricOverridden,
  eppPluginTypesRegistered,
  eppProbesOnHealthPort,
  eppRbac,
  eppSecureServingMatchesEnvoy,
  unknownPluginRegistries,
} from './rules/epp.ts';
import { oneGpuPerReplica, runtimeClassOnGpuPods } from './rules/gpu.ts';
import { llmdReplicasMatchIndexer, llmdScorerEvidenceNotes, llmdTokenizerDirWritable } from './rules/llmd.ts';
import { networkLessonViolations } from './rules/network.ts';
import { type PlacementExpectation, placementViolations } from './rules/placement.ts';
import {
  devModeForCacheReset,
  prefixCachingAndMetrics,
  replicasStayInternal,
  servedModelNameMatches,
} from './rules/servers.ts';
import { validateSchema } from './schemas.ts';
import { findTestbed, type Testbed } from './testbed.ts';
import { type Note, note, type Violation } from './violation.ts';

export interface CheckOptions {
  /**
   * KV cache tokens of one replica, for lesson 8.
   * @default the lab configuration's `vllm.kvCacheTokensPerReplica` (163,472 on an L4 at 0.85)
   */
  readonly kvCacheTokensPerReplica?: number;
  /**
   * Allocatable CPU cores of the node, for the resource budget.
   * @default the lab configuration's `instance.vcpus` (48 on a g6.12xlarge)
   */
  readonly nodeCpu?: number;
  /**
   * Allocatable memory of the node in GiB, for the resource budget.
   * @default the lab configuration's `instance.memoryGiB` (192 on a g6.12xlarge)
   */
  readonly nodeMemoryGiB?: number;
  /**
   * The cluster's nodes for the resource budget: with more than one, the pods are fitted node by
   * node (the nodes their selectors match) instead of summed against `nodeCpu` and `nodeMemoryGiB`.
   * @default one node of `nodeCpu` and `nodeMemoryGiB`
   */
  readonly budgetCluster?: BudgetCluster;
  /**
   * Where the configuration places each kind of pod, for the placement rules.
   * @default labPlacement of the lab configuration (replicas and clients on GPU nodes)
   */
  readonly placement?: LabPlacement;
  /**
   * Roles of the cluster's nodes: a pod selecting another role would stay Pending.
   * @default the lab configuration's (gpu, plus cpu with a CPU agent)
   */
  readonly clusterRoles?: readonly NodeRole[];
}

export interface CheckReport {
  readonly violations: Violation[];
  readonly notes: Note[];
}

/** The lesson rules of docs/facts.md §5, in lesson order. */
function lessonViolations(
  testbed: Testbed,
  kvCacheTokensPerReplica: number,
  budget: NodeCapacity | BudgetCluster,
  expected: PlacementExpectation,
): Violation[] {
  return [
    ...runtimeClassOnGpuPods(testbed, expected.placement.gpuRuntimeClass),
    ...oneGpuPerReplica(testbed),
    ...prefixCachingAndMetrics(testbed),
    ...servedModelNameMatches(testbed),
    ...replicasStayInternal(testbed).violations,
    ...routersAddressReplicasByName(testbed),
    ...envoyAddressesByName(testbed),
    ...poolsSelectReplicas(testbed),
    ...eppFlagsParse(testbed),
    ...eppConfigPresent(testbed),
    ...eppPluginTypesRegistered(testbed),
    ...llmdReplicasMatchIndexer(testbed),
    ...llmdTokenizerDirWritable(testbed),
    ...eppSecureServingMatchesEnvoy(testbed),
    ...eppKvMetricOverridden(testbed),
    ...eppProbesOnHealthPort(testbed),
    ...eppRbac(testbed),
    ...envoyContainer(testbed),
    ...envoyConfiguration(testbed),
    ...benchmarkRunsOnce(testbed),
    ...workloadCreatesCachePressure(testbed, { kvCacheTokensPerReplica }),
    ...devModeForCacheReset(testbed),
    ...backendKindsListed(testbed),
    ...extensionManagerComplete(testbed),
    ...aiGatewayEppServesTls(testbed),
    ...aiGatewayReferencesResolve(testbed),
    ...('nodes' in budget ? requestsFitNodes(testbed, budget) : requestsFitNode(testbed, budget)),
    ...placementViolations(testbed, expected),
  ];
}

/** Schema violations first, then lesson by lesson; the order of the files within each. */
function inLessonOrder(violations: readonly Violation[]): Violation[] {
  return violations
    .map((v, i) => ({ v, i }))
    .sort((a, b) => a.v.lesson - b.v.lesson || a.i - b.i)
    .map(({ v }) => v);
}

/**
 * A network-lab cell's folder: the Kubernetes schemas, the Istio kinds' schemas and the network
 * lessons (docs/facts.md (the network lab)), instead of the LLM-gateway lab's.
 */
function inspectNetworkCell(objects: readonly KubeObject[]): CheckReport {
  // Several cell folders (a synthesized lab's dist/): each cell judged against its own description.
  const groups = cellGroups(objects);
  if (groups.length > 1) {
    const reports = groups.map(inspectNetworkCell);
    return {
      violations: inLessonOrder(reports.flatMap((r) => r.violations)),
      notes: reports.flatMap((r) => r.notes),
    };
  }
  const schema = objects.map((object) => {
    const istio = istioSchemaViolations(object);
    return istio ? { violations: istio, notes: [] } : validateSchema(object);
  });
  const found = findCell(objects);
  const smallest = defaultLabConfig().network.experiments.smallestExpectedLatencyMs;
  const notes = schema.flatMap((result) => result.notes);
  if (!found?.cell) {
    notes.push({
      object: '(manifests)',
      message: `no readable network-cell ConfigMap: the cell's mesh mode and Cilium values were not judged, fortio's -r against the default ${smallest} ms`,
    });
  }
  return {
    violations: inLessonOrder([
      ...schema.flatMap((result) => result.violations),
      ...(found?.violations ?? []),
      ...networkLessonViolations(objects, found, smallest),
    ]),
    notes,
  };
}

/** Schema validation and every lesson, with notes on what could not be judged. */
export function inspectManifests(objects: readonly KubeObject[], options: CheckOptions = {}): CheckReport {
  if (isNetworkCell(objects)) return inspectNetworkCell(objects);
  const defaults = defaultLabConfig();
  const kv = options.kvCacheTokensPerReplica ?? defaults.vllm.kvCacheTokensPerReplica;
  const capacity: NodeCapacity = {
    cpu: options.nodeCpu ?? defaults.instance.vcpus,
    memoryBytes: gibToBytes(options.nodeMemoryGiB ?? defaults.instance.memoryGiB),
  };
  // One node keeps the summed budget and its messages; several are fitted node by node.
  const cluster = options.budgetCluster;
  const budget = cluster && cluster.nodes.length > 1 ? cluster : capacity;
  const expected: PlacementExpectation = {
    placement: options.placement ?? labPlacement(defaults),
    clusterRoles: options.clusterRoles ?? clusterNodeRoles(defaults),
  };
  const schema = objects.map(validateSchema);
  const testbed = findTestbed(objects);
  const violations = [
    ...schema.flatMap((result) => result.violations),
    ...lessonViolations(testbed, kv, budget, expected),
  ];
  const notes = [
    ...schema.flatMap((result) => result.notes),
    ...replicasStayInternal(testbed).notes,
    ...llmdScorerEvidenceNotes(testbed),
    ...unknownPluginRegistries(testbed).map(({ ref, image }) =>
      note(
        ref.pod.object,
        `plugin types not checked: no plugin registry known for ${image} (known: GAIE v1.0.x, llm-d inference scheduler v0.3.x)`,
      ),
    ),
  ];
  if (testbed.servers.length === 0) {
    notes.push({
      object: '(manifests)',
      message:
        'no vLLM replica found (no container runs `vllm serve` or a vLLM image): the replica-side lessons had nothing to check',
    });
  }
  return { violations: inLessonOrder(violations), notes };
}

/** Every violation of the Kubernetes schemas and of the lessons of docs/facts.md §5. */
export function checkManifests(objects: readonly KubeObject[], options: CheckOptions = {}): Violation[] {
  return inspectManifests(objects, options).violations;
}
