import { k8s } from 'cdk8s-plus-34';
import type { NodePool } from '../lib/config/placement.ts';
import type { ContainerRequests } from '../lib/study/resources.ts';

/**
 * Small helpers shared by the charts. The charts use the typed Kubernetes API objects that
 * cdk8s-plus-34 exports as `k8s` rather than its high-level constructs: those add container
 * defaults (2Gi memory limit, read-only root filesystem, non-root user) that break vLLM, and
 * every field of a lab pod is a fact of the study that should be written out, not inherited.
 */

// The lab's labels live in labels.ts, free of cdk8s, so that the study runner can bundle them.
export { COMPONENT_LABEL, labLabels } from './labels.ts';

// The host folders live in lib/study/topology.ts: the bootstrap and the runner use them too.
import {
  MODEL_CACHE_HOST_PATH,
  MODEL_CACHE_MOUNT,
  NVIDIA_RUNTIME_CLASS,
  RESULTS_HOST_PATH,
} from '../lib/study/topology.ts';

export { MODEL_CACHE_HOST_PATH, MODEL_CACHE_MOUNT, NVIDIA_RUNTIME_CLASS, RESULTS_HOST_PATH };

/** Extended resource the NVIDIA device plugin advertises. */
export const GPU_RESOURCE = 'nvidia.com/gpu';

export function quantity(value: string | number): k8s.Quantity {
  return typeof value === 'number' ? k8s.Quantity.fromNumber(value) : k8s.Quantity.fromString(value);
}

/**
 * A container that only reads the runner's results folder, which the runner writes as root
 * (charts/runner-job.ts): it reads as root, with no capability, a read-only root filesystem
 * (its mounts of the folder are read-only too).
 */
export const RESULTS_READER_SECURITY: k8s.SecurityContext = {
  runAsNonRoot: false,
  runAsUser: 0,
  readOnlyRootFilesystem: true,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
};

/** A container's `resources` from the lab's request table (lib/study/resources.ts): no CPU limit. */
export function containerResources(r: ContainerRequests): k8s.ResourceRequirements {
  return {
    requests: { cpu: quantity(r.cpu), memory: quantity(r.memory) },
    ...(r.memoryLimit ? { limits: { memory: quantity(r.memoryLimit) } } : {}),
  };
}

export function port(value: number): k8s.IntOrString {
  return k8s.IntOrString.fromNumber(value);
}

/** `name=value` pairs as container env vars, in the order given. */
export function envVars(vars: Record<string, string>): k8s.EnvVar[] {
  return Object.entries(vars).map(([name, value]) => ({ name, value }));
}

/** The shared model cache as a pod volume. */
export function modelCacheVolume(): k8s.Volume {
  return {
    name: 'model-cache',
    hostPath: { path: MODEL_CACHE_HOST_PATH, type: 'DirectoryOrCreate' },
  };
}

export function modelCacheMount(): k8s.VolumeMount {
  return { name: 'model-cache', mountPath: MODEL_CACHE_MOUNT };
}

/**
 * Security context for containers that run as their image's user (vLLM and the pip-installed
 * router run as root and write to their filesystem): explicit, so no library default applies.
 */
export function rootContainerSecurity(): k8s.SecurityContext {
  return { runAsNonRoot: false, readOnlyRootFilesystem: false, allowPrivilegeEscalation: false };
}

/** A pod's nodeSelector and tolerations for a node pool of the configuration (lib/config/placement.ts). */
export function podPlacement(pool: NodePool): Pick<k8s.PodSpec, 'nodeSelector' | 'tolerations'> {
  return {
    nodeSelector: { ...pool.nodeSelector },
    ...(pool.tolerations.length > 0 ? { tolerations: pool.tolerations.map((t) => ({ ...t })) } : {}),
  };
}

/**
 * `runtimeClassName` of a pod that uses a GPU: the configured RuntimeClass, or none where the
 * node's default runtime is already NVIDIA's (`placement.gpuNodes.runtimeClassName: null`).
 */
export function gpuRuntime(runtimeClass: string | null | undefined): Pick<k8s.PodSpec, 'runtimeClassName'> {
  return runtimeClass ? { runtimeClassName: runtimeClass } : {};
}
