import { fieldPath, record } from '../manifest.ts';
import { type ContainerRef, type PodTemplate, type Testbed, unique } from '../testbed.ts';
import { type Violation, violation } from '../violation.ts';

/** Lessons 1 and 2: GPUs reach exactly the pods that need them, one per replica. */

const GPU = 'nvidia.com/gpu';

interface GpuPod {
  readonly pod: PodTemplate;
  readonly what: string;
  readonly why: string;
}

/**
 * Lesson 1: every pod that needs a GPU runs with the GPU RuntimeClass the configuration
 * names (`placement.gpuNodes.runtimeClassName`, `nvidia` by default: the one K3s registers). With none configured the
 * node's default runtime injects the GPUs (EKS GPU AMIs) and there is nothing to check here.
 */
export function runtimeClassOnGpuPods(testbed: Testbed, expected: string | undefined): Violation[] {
  if (expected === undefined) return [];
  const pods: GpuPod[] = [
    ...unique(testbed.servers.map((ref) => ref.pod)).map((pod) => ({
      pod,
      what: 'a vLLM replica',
      why: 'the GPU is requested but not injected, so vLLM finds no CUDA device',
    })),
    ...unique(testbed.devicePlugins.map((ref) => ref.pod)).map((pod) => ({
      pod,
      what: 'the NVIDIA device plugin',
      why: 'it cannot load NVML, the node never advertises nvidia.com/gpu and no replica schedules',
    })),
    ...unique(testbed.benchClients.map((ref) => ref.pod)).map((pod) => ({
      pod,
      what: 'the benchmark client',
      why: '`vllm bench serve` dies with "RuntimeError: Failed to infer device type" when it sees no GPU',
    })),
  ];
  return pods.flatMap(({ pod, what, why }) => {
    const runtimeClass = pod.spec.runtimeClassName;
    if (runtimeClass === expected) return [];
    const actual = runtimeClass === undefined ? 'is not set' : `is ${JSON.stringify(runtimeClass)}`;
    return [
      violation(
        pod.object,
        `${pod.path}.runtimeClassName`,
        1,
        `${actual}; ${what} needs "${expected}": ${why}`,
      ),
    ];
  });
}

/** The GPU count in a resources block; NaN when it is not a number. */
function gpuCount(resources: unknown, kind: 'limits' | 'requests'): number | undefined {
  const value = record(record(resources)[kind])[GPU];
  if (value === undefined) return undefined;
  return typeof value === 'number' ? value : Number(value);
}

function gpuField(ref: ContainerRef, kind: 'limits' | 'requests'): string {
  return `${ref.path}.${fieldPath(['resources', kind, GPU])}`;
}

/** Lesson 2: each replica owns exactly one GPU; the benchmark client takes none. */
export function oneGpuPerReplica(testbed: Testbed): Violation[] {
  const replicas = testbed.servers.flatMap((ref) => {
    const limit = gpuCount(ref.container.resources, 'limits');
    const request = gpuCount(ref.container.resources, 'requests');
    const object = ref.pod.object;
    if (limit !== 1) {
      const actual = limit === undefined ? 'is not set' : `is ${limit}`;
      return [
        violation(
          object,
          gpuField(ref, 'limits'),
          2,
          `${actual}; each vLLM replica must own exactly one GPU, so the replicas sit on distinct physical GPUs with no contention`,
        ),
      ];
    }
    if (request !== undefined && request !== limit) {
      return [
        violation(
          object,
          gpuField(ref, 'requests'),
          2,
          `is ${request} but the limit is ${limit}; a GPU request must equal its limit or the pod is rejected`,
        ),
      ];
    }
    return [];
  });
  const clients = testbed.benchClients.flatMap((ref) =>
    (['limits', 'requests'] as const).flatMap((kind) => {
      const count = gpuCount(ref.container.resources, kind);
      if (count === undefined || count === 0) return [];
      return [
        violation(
          ref.pod.object,
          gpuField(ref, kind),
          2,
          `is ${count}; the benchmark client must request no GPU: it would take one from the replicas (it only needs runtimeClassName nvidia to see one)`,
        ),
      ];
    }),
  );
  return [...replicas, ...clients];
}
