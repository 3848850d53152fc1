import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import { RUNNER_DIR, RUNNER_RESULTS_MOUNT } from '../lib/runner/runner-files.ts';
import { REQUESTS } from '../lib/study/resources.ts';
import { STUDY_RUNNER_CONTAINER } from '../lib/study/topology.ts';
import { containerResources, envVars, RESULTS_HOST_PATH, rootContainerSecurity } from './common.ts';

/**
 * What both labs' study runner charts share (charts/study-runner.ts, charts/network/study-runner.ts):
 * the ConfigMap size check and the runner's Job, a pinned Node image running the bundled runner
 * from its ConfigMap with the results host folder mounted. Each lab keeps its own Role.
 */

/** Kubernetes refuses a ConfigMap larger than 1 MiB (etcd's object limit). */
export const CONFIGMAP_LIMIT_BYTES = 1024 * 1024;

/** Bytes of a ConfigMap's data as stored (UTF-8 of keys and values). */
export function configMapDataBytes(data: Readonly<Record<string, string>>): number {
  return Object.entries(data).reduce(
    (sum, [key, value]) => sum + Buffer.byteLength(key) + Buffer.byteLength(value),
    0,
  );
}

/**
 * Throws when a runner's ConfigMap data is over Kubernetes' limit: `what` names the ConfigMap
 * (`StudyRunner: the runner ConfigMap`), `shrink` what to make smaller besides the bundle.
 */
export function checkRunnerConfigMapSize(
  data: Readonly<Record<string, string>>,
  what: string,
  shrink: string,
): void {
  const bytes = configMapDataBytes(data);
  if (bytes >= CONFIGMAP_LIMIT_BYTES) {
    throw new Error(
      `${what} holds ${bytes} bytes, over Kubernetes' limit of ${CONFIGMAP_LIMIT_BYTES}; shrink ${shrink} or the bundle`,
    );
  }
}

export interface RunnerJobProps {
  /** The name of the Job, of its ConfigMap and of its ServiceAccount. */
  readonly name: string;
  /**
   * The namespace of the Job.
   * @default none in the manifest (the chart's)
   */
  readonly namespace?: string;
  /** Labels of the Job. */
  readonly labels: Readonly<Record<string, string>>;
  /** Labels of its pod. */
  readonly podLabels: Readonly<Record<string, string>>;
  /** The runner's Node image (`runner.image`). */
  readonly image: string;
  /**
   * The container's image pull policy.
   * @default none in the manifest (Kubernetes' default)
   */
  readonly imagePullPolicy?: string;
  /** The bundle's file name in the ConfigMap, which the container runs with node. */
  readonly bundle: string;
  /**
   * Env vars after LAB_RUNNER_DIR and LAB_RESULTS_DIR.
   * @default none
   */
  readonly env?: readonly k8s.EnvVar[];
  /** Where the pod runs: the node whose results folder is kept. */
  readonly placement: Pick<k8s.PodSpec, 'nodeSelector' | 'tolerations' | 'affinity'>;
  /**
   * The results folder's volume, named `results` (charts/results-store.ts).
   * @default the host folder RESULTS_HOST_PATH of the runner's node
   */
  readonly results?: k8s.Volume;
  /**
   * Native sidecars (init containers with restartPolicy Always) and the volumes only they use.
   * @default none
   */
  readonly sidecars?: { readonly containers: k8s.Container[]; readonly volumes: k8s.Volume[] };
  /**
   * Seconds the pod gets to stop, which a sidecar's last work runs within.
   * @default none in the manifest (Kubernetes' 30)
   */
  readonly terminationGracePeriodSeconds?: number;
}

/** The study runner's Job (construct id `job`), run once: a failed runner is seen, not retried. */
export function runnerJob(scope: Construct, props: RunnerJobProps): k8s.KubeJob {
  const { name, labels } = props;
  return new k8s.KubeJob(scope, 'job', {
    metadata: { name, ...(props.namespace ? { namespace: props.namespace } : {}), labels: { ...labels } },
    spec: {
      // A retried runner would resume anyway; a failure should be seen, not repeated silently.
      backoffLimit: 0,
      template: {
        metadata: { labels: { ...props.podLabels } },
        spec: {
          serviceAccountName: name,
          automountServiceAccountToken: true,
          restartPolicy: 'Never',
          ...(props.terminationGracePeriodSeconds === undefined
            ? {}
            : { terminationGracePeriodSeconds: props.terminationGracePeriodSeconds }),
          ...props.placement,
          ...(props.sidecars ? { initContainers: [...props.sidecars.containers] } : {}),
          containers: [
            {
              name: STUDY_RUNNER_CONTAINER,
              image: props.image,
              ...(props.imagePullPolicy ? { imagePullPolicy: props.imagePullPolicy } : {}),
              command: ['node', `${RUNNER_DIR}/${props.bundle}`],
              env: [
                ...envVars({ LAB_RUNNER_DIR: RUNNER_DIR, LAB_RESULTS_DIR: RUNNER_RESULTS_MOUNT }),
                ...(props.env ?? []),
              ],
              resources: containerResources(REQUESTS.runner),
              // Root: the results host folder belongs to root, like the outputs of the Jobs it starts.
              securityContext: rootContainerSecurity(),
              volumeMounts: [
                { name: 'runner', mountPath: RUNNER_DIR, readOnly: true },
                { name: 'results', mountPath: RUNNER_RESULTS_MOUNT },
              ],
            },
          ],
          volumes: [
            { name: 'runner', configMap: { name } },
            props.results ?? {
              name: 'results',
              hostPath: { path: RESULTS_HOST_PATH, type: 'DirectoryOrCreate' },
            },
            ...(props.sidecars?.volumes ?? []),
          ],
        },
      },
    },
  });
}
