import type { LabPlacement, NodePool, Toleration } from '../config/placement.ts';
import type { ResultsVolume } from '../config/results-volume.ts';
import type { KubeObject } from '../kube/cluster-api.ts';
import { uploadCheck } from './upload-check.ts';

/**
 * What a cluster must offer before `lab install` applies anything, judged from what the API
 * returned. Pure: install.ts reads the cluster, this says pass, warn or fail, each with the fix.
 */

export type CheckOutcome = 'pass' | 'warn' | 'fail';

export interface ClusterCheck {
  /** `gpus`, `runtime-class`, `nodes-<setting>`, `results-storage`, `results-upload`, `rbac`. */
  readonly id: string;
  /** What was checked: a setting, a RuntimeClass, the kubeconfig's user. */
  readonly subject: string;
  readonly outcome: CheckOutcome;
  readonly message: string;
  /** What to do about a warn or fail. */
  readonly fix?: string;
}

export interface ClusterSnapshot {
  readonly nodes: readonly KubeObject[];
  /** Names of the cluster's RuntimeClasses. */
  readonly runtimeClasses: readonly string[];
  /** Access questions that were refused, as `create deployments.apps in vllm`. */
  readonly refused: readonly string[];
  /** The cluster's StorageClasses. */
  readonly storageClasses?: readonly StorageClassInfo[];
}

export interface StorageClassInfo {
  readonly name: string;
  readonly provisioner?: string;
  /** Marked the default (the DefaultStorageClass admission gives it to claims that name none). */
  readonly isDefault: boolean;
}

export interface ClusterNeeds {
  readonly placement: LabPlacement;
  /** GPUs the replicas request in all (lib/study/resources.ts). */
  readonly gpus: number;
  /** Which pools the configuration places pods on, by the name a user knows them under. */
  readonly pools: readonly { readonly what: string; readonly setting: string; readonly pool: NodePool }[];
  /** Where the results folder lives (runner.results). */
  readonly results: ResultsVolume;
}

/**
 * The annotations that mark a default StorageClass (Kubernetes' "Change the default StorageClass"
 * task; the beta one is still honoured by the DefaultStorageClass admission plugin).
 */
export const DEFAULT_CLASS_ANNOTATIONS = [
  'storageclass.kubernetes.io/is-default-class',
  'storageclass.beta.kubernetes.io/is-default-class',
] as const;

/** A StorageClass object as the check reads it. */
export function storageClassInfo(object: KubeObject): StorageClassInfo {
  const annotations = object.metadata.annotations ?? {};
  return {
    name: object.metadata.name,
    ...(typeof object.provisioner === 'string' ? { provisioner: object.provisioner } : {}),
    isDefault: DEFAULT_CLASS_ANNOTATIONS.some((key) => annotations[key] === 'true'),
  };
}

/** Where the results go on a cluster the user brings: a claim of a StorageClass it has. */
export function resultsCheck(results: ResultsVolume, classes: readonly StorageClassInfo[]): ClusterCheck {
  if (results.volume !== 'claim') {
    return {
      id: 'results-storage',
      subject: 'runner.results',
      outcome: 'fail',
      message:
        "runner.results.volume is node-folder: the results would live in one node's host folder, which someone must label (placement.runnerNodeSelector) and nothing copies out",
      fix: 'set runner.results.volume: claim (a PersistentVolumeClaim; runner.results.storageClassName names its StorageClass, null for the default); lab results then copies the results through the Kubernetes API',
    };
  }
  const names = classes.map((c) => `${c.name}${c.isDefault ? ' (default)' : ''}`).join(', ') || 'none';
  const size = `PersistentVolumeClaim of ${results.size}`;
  if (results.storageClassName) {
    const found = classes.find((c) => c.name === results.storageClassName);
    return found
      ? {
          id: 'results-storage',
          subject: 'runner.results',
          outcome: 'pass',
          message: `a ${size} from StorageClass ${found.name}${found.provisioner ? ` (${found.provisioner})` : ''}`,
        }
      : {
          id: 'results-storage',
          subject: 'runner.results',
          outcome: 'fail',
          message: `StorageClass ${results.storageClassName} (runner.results.storageClassName) does not exist (the cluster has: ${names}): the claim would stay Pending`,
          fix: `set runner.results.storageClassName to one of the cluster's StorageClasses (kubectl get storageclass), or null for the default`,
        };
  }
  const defaults = classes.filter((c) => c.isDefault);
  if (defaults.length > 0) {
    return {
      id: 'results-storage',
      subject: 'runner.results',
      outcome: 'pass',
      message: `a ${size} from the default StorageClass ${defaults[0].name}${defaults[0].provisioner ? ` (${defaults[0].provisioner})` : ''}`,
    };
  }
  return {
    id: 'results-storage',
    subject: 'runner.results',
    outcome: 'fail',
    message: `runner.results.storageClassName is null and the cluster has no default StorageClass (it has: ${names}): the claim would stay Pending`,
    fix: `name one in runner.results.storageClassName, or mark one the default: kubectl annotate storageclass <name> ${DEFAULT_CLASS_ANNOTATIONS[0]}=true`,
  };
}

export const GPU_RESOURCE = 'nvidia.com/gpu';

interface NodeShape {
  readonly spec?: { readonly taints?: readonly Taint[]; readonly unschedulable?: boolean };
  readonly status?: {
    readonly allocatable?: Readonly<Record<string, string>>;
    readonly conditions?: readonly { readonly type?: string; readonly status?: string }[];
  };
}

interface Taint {
  readonly key: string;
  readonly value?: string;
  readonly effect: string;
}

/** A pod with these tolerations may be scheduled despite the taint (core/v1 Toleration.ToleratesTaint). */
export function tolerates(tolerations: readonly Toleration[], taint: Taint): boolean {
  if (taint.effect === 'PreferNoSchedule') return true;
  return tolerations.some((t) => {
    if (t.effect && t.effect !== taint.effect) return false;
    if (t.operator === 'Exists') return t.key === undefined || t.key === taint.key;
    return t.key === taint.key && (t.value ?? '') === (taint.value ?? '');
  });
}

/** Nodes a pod of this pool may land on: Ready, schedulable, labels match, taints tolerated. */
export function nodesFor(pool: NodePool, nodes: readonly KubeObject[]): KubeObject[] {
  return nodes.filter((node) => {
    const shape = node as NodeShape;
    if (shape.spec?.unschedulable) return false;
    const ready = shape.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
    if (!ready) return false;
    const labels = node.metadata.labels ?? {};
    if (!Object.entries(pool.nodeSelector).every(([key, value]) => labels[key] === value)) return false;
    return (shape.spec?.taints ?? []).every((taint) => tolerates(pool.tolerations, taint));
  });
}

function gpusOf(node: KubeObject): number {
  const value = (node as NodeShape).status?.allocatable?.[GPU_RESOURCE];
  return value === undefined ? 0 : Number.parseInt(value, 10) || 0;
}

function selectorText(pool: NodePool): string {
  const pairs = Object.entries(pool.nodeSelector).map(([k, v]) => `${k}=${v}`);
  return pairs.length > 0 ? pairs.join(',') : '(any node)';
}

export function clusterChecks(needs: ClusterNeeds, cluster: ClusterSnapshot): ClusterCheck[] {
  const checks: ClusterCheck[] = [];
  const gpuNodes = nodesFor(needs.placement.replicas, cluster.nodes);
  const allocatable = gpuNodes.reduce((sum, node) => sum + gpusOf(node), 0);
  const gpuLine = `${allocatable} ${GPU_RESOURCE} allocatable on ${gpuNodes.length} node(s) matching placement.gpuNodes (${selectorText(needs.placement.replicas)}); the replicas request ${needs.gpus}`;
  if (allocatable >= needs.gpus) {
    checks.push({ id: 'gpus', subject: 'placement.gpuNodes', outcome: 'pass', message: gpuLine });
  } else {
    checks.push({
      id: 'gpus',
      subject: 'placement.gpuNodes',
      outcome: 'fail',
      message: gpuLine,
      fix:
        gpuNodes.length === 0
          ? 'label the GPU nodes (kubectl label node <node> llm-gateway-lab/node-role=gpu) or point placement.gpuNodes.nodeSelector at labels they have; add their taints to placement.gpuNodes.tolerations'
          : `lower vllm.replicas, or add GPU nodes; a node advertises ${GPU_RESOURCE} only once the NVIDIA device plugin or GPU operator runs on it`,
    });
  }
  const runtimeClass = needs.placement.gpuRuntimeClass;
  if (runtimeClass === undefined) {
    checks.push({
      id: 'runtime-class',
      subject: '(none)',
      outcome: 'pass',
      message:
        "GPU pods carry no runtimeClassName (placement.gpuNodes.runtimeClassName: null): the nodes' default runtime must inject the GPUs",
    });
  } else if (cluster.runtimeClasses.includes(runtimeClass)) {
    checks.push({
      id: 'runtime-class',
      subject: runtimeClass,
      outcome: 'pass',
      message: `RuntimeClass ${runtimeClass} exists`,
    });
  } else {
    checks.push({
      id: 'runtime-class',
      subject: runtimeClass,
      outcome: 'fail',
      message: `RuntimeClass ${runtimeClass} (placement.gpuNodes.runtimeClassName) does not exist (the cluster has: ${cluster.runtimeClasses.join(', ') || 'none'}): every GPU pod would fail admission`,
      fix: "on the EKS accelerated AMI nvidia is the default runtime: set placement.gpuNodes.runtimeClassName: null; with the GPU operator use the RuntimeClass it creates (docs/cluster.md, 'The RuntimeClass question')",
    });
  }
  for (const { what, setting, pool } of needs.pools) {
    const matching = nodesFor(pool, cluster.nodes);
    if (matching.length > 0) {
      checks.push({
        id: `nodes-${setting}`,
        subject: setting,
        outcome: 'pass',
        message: `${what}: ${matching.length} node(s) match ${setting} (${selectorText(pool)})`,
      });
    } else {
      checks.push({
        id: `nodes-${setting}`,
        subject: setting,
        outcome: 'fail',
        message: `${what}: no Ready node matches ${setting} (${selectorText(pool)}) and tolerates its taints: the pods would stay Pending`,
        fix: `label a node (kubectl label node <node> ${Object.entries(pool.nodeSelector)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')}) or change ${setting}`,
      });
    }
  }
  checks.push(resultsCheck(needs.results, cluster.storageClasses ?? []));
  const upload = uploadCheck(needs.results, nodesFor(needs.placement.runner, cluster.nodes));
  if (upload) checks.push(upload);
  if (cluster.refused.length === 0) {
    checks.push({
      id: 'rbac',
      subject: 'kubeconfig user',
      outcome: 'pass',
      message:
        "the kubeconfig user may create everything the lab installs and read the study's pods (list, pods/proxy, pods/log)",
    });
  } else {
    checks.push({
      id: 'rbac',
      subject: 'kubeconfig user',
      outcome: 'fail',
      message: `the kubeconfig user may not: ${cluster.refused.join('; ')}`,
      fix: 'use a context with cluster-admin (the lab creates CRD-backed objects, ClusterRoles and a namespace; lab status, results and logs read its pods through pods/proxy and pods/log), or ask an administrator for these permissions',
    });
  }
  return checks;
}
