import type { LabConfig } from '../config/schema.ts';
import type { ClusterApi, KubeObject } from '../kube/cluster-api.ts';
import { STUDY_RUNNER_CONTAINER, STUDY_RUNNER_NAME } from '../study/topology.ts';
import { ClusterStudyError } from './cluster-study.ts';
import type { LogSource } from './logs.ts';

/**
 * `lab logs` on a cluster the user brings: the same sources as on the lab's own host
 * (lib/control/logs.ts logSource), read through pods/log. The runner's log is its pod's.
 */

/** The pods behind a `kubectl logs` target (`pod/x`, `deployment/x`, `job/x`). */
async function podsOf(api: ClusterApi, namespace: string, target: string): Promise<KubeObject[]> {
  const [kind, name] = target.split('/');
  if (kind === 'pod') {
    const pod = await api.read({ apiVersion: 'v1', kind: 'Pod', name, namespace });
    return pod ? [pod] : [];
  }
  if (kind === 'job') {
    // The Job controller labels its pods job-name=<job>.
    return api.list('v1', 'Pod', { namespace, labelSelector: `job-name=${name}` });
  }
  const deployment = await api.read({ apiVersion: 'apps/v1', kind: 'Deployment', name, namespace });
  const labels = (deployment?.spec as { selector?: { matchLabels?: Record<string, string> } } | undefined)
    ?.selector?.matchLabels;
  if (!labels) return [];
  const selector = Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  return api.list('v1', 'Pod', { namespace, labelSelector: selector });
}

/** Prints the log of one source; a clear stop when there is no pod behind it. */
export async function showClusterLogs(
  api: ClusterApi,
  config: LabConfig,
  source: LogSource,
  tailLines: number,
  write: (text: string) => void,
): Promise<void> {
  let pod: { namespace: string; target: string; title: string; container?: string; previous?: boolean };
  if (source.kind === 'file') {
    if (source.title !== "the study runner's log") {
      throw new ClusterStudyError(
        `${source.title} is the lab's own host's; a cluster you bring has no bootstrap (lab install's output is its log)`,
      );
    }
    // Named: with runner.results.upload the pod also has the uploader (an init container).
    pod = {
      namespace: config.namespace,
      target: `job/${STUDY_RUNNER_NAME}`,
      title: source.title,
      container: STUDY_RUNNER_CONTAINER,
    };
  } else {
    pod = source;
  }
  const pods = await podsOf(api, pod.namespace, pod.target);
  if (pods.length === 0) {
    throw new ClusterStudyError(
      `${pod.title}: no pod for ${pod.target} in namespace ${pod.namespace} (not started yet, or deleted)`,
    );
  }
  // The newest pod: a restarted Deployment's or a re-created Job's.
  const newest = [...pods].sort((a, b) =>
    String(b.metadata.creationTimestamp ?? '').localeCompare(String(a.metadata.creationTimestamp ?? '')),
  )[0];
  const text = await api.podLog(pod.namespace, newest.metadata.name, {
    tailLines,
    ...(pod.container ? { container: pod.container } : {}),
    ...(pod.previous ? { previous: true } : {}),
  });
  write(`--- ${pod.title}: pod ${pod.namespace}/${newest.metadata.name}, last ${tailLines} lines`);
  write(text.endsWith('\n') ? text.slice(0, -1) : text);
}
