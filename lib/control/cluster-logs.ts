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

/** The pod (the newest behind the source) and container whose log a source names. */
interface LogPod {
  readonly namespace: string;
  readonly name: string;
  readonly title: string;
  readonly container?: string;
  readonly previous?: boolean;
  /** The pod as read: its containers, for the default one. */
  readonly object: KubeObject;
}

/** The pod behind one source; a clear stop when there is none. */
async function logPod(api: ClusterApi, config: LabConfig, source: LogSource): Promise<LogPod> {
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
  return {
    namespace: pod.namespace,
    name: newest.metadata.name,
    title: pod.title,
    ...(pod.container ? { container: pod.container } : {}),
    ...(pod.previous ? { previous: true } : {}),
    object: newest,
  };
}

/** Prints the log of one source; a clear stop when there is no pod behind it. */
export async function showClusterLogs(
  api: ClusterApi,
  config: LabConfig,
  source: LogSource,
  tailLines: number,
  write: (text: string) => void,
): Promise<void> {
  const pod = await logPod(api, config, source);
  const text = await api.podLog(pod.namespace, pod.name, {
    tailLines,
    ...(pod.container ? { container: pod.container } : {}),
    ...(pod.previous ? { previous: true } : {}),
  });
  write(`--- ${pod.title}: pod ${pod.namespace}/${pod.name}, last ${tailLines} lines`);
  write(text.endsWith('\n') ? text.slice(0, -1) : text);
}

/**
 * `lab logs --follow` on a cluster: the last `tailLines` lines, then every new one as the API
 * streams it (pods/log with follow=true), until the container ends or `signal` aborts (Ctrl-C).
 * `print` gets the log as it comes (not cut into lines), `write` the header and the end line.
 */
export async function followClusterLogs(
  api: ClusterApi,
  config: LabConfig,
  source: LogSource,
  tailLines: number,
  out: { readonly write: (line: string) => void; readonly print: (text: string) => void },
  signal: AbortSignal,
): Promise<'ended' | 'stopped'> {
  const pod = await logPod(api, config, source);
  const container = pod.container ?? defaultContainer(pod.object);
  out.write(
    `--- ${pod.title}: pod ${pod.namespace}/${pod.name}, last ${tailLines} lines, then following (Ctrl-C stops)`,
  );
  let last = '\n';
  const how = await api.followPodLog(
    pod.namespace,
    pod.name,
    { container, tailLines, ...(pod.previous ? { previous: true } : {}) },
    (text) => {
      if (text.length === 0) return;
      last = text;
      out.print(text);
    },
    signal,
  );
  // The end line on a line of its own, also after a log whose last line had no newline.
  if (!last.endsWith('\n')) out.print('\n');
  out.write(how === 'ended' ? `--- ${pod.title}: container ${container} ended` : `--- stopped following`);
  return how;
}

/**
 * The container a log without --container is read from, as kubectl picks it: the pod's
 * `kubectl.kubernetes.io/default-container` annotation, else its first container. Following needs
 * one named (client-node's Log always sends `container`).
 */
export function defaultContainer(pod: KubeObject): string {
  const annotated = (pod.metadata.annotations as Record<string, string> | undefined)?.[
    'kubectl.kubernetes.io/default-container'
  ];
  if (annotated) return annotated;
  const first = (pod.spec as { containers?: { name?: string }[] } | undefined)?.containers?.[0]?.name;
  if (!first)
    throw new ClusterStudyError(`pod ${pod.metadata.namespace}/${pod.metadata.name} has no container`);
  return first;
}
