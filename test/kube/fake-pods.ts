import type { IncomingMessage, ServerResponse } from 'node:http';
import { send, status } from './fake-api-util.ts';
import { type FollowedLogs, serveFollowedLog } from './fake-log-follow.ts';

/**
 * The pods the fake API server's controllers make (test/kube/fake-api-server.ts), and what a
 * test plugs in behind them: the program a Job runs (the study runner, on the fake clock), the
 * HTTP server a pod's proxy reaches (the results server over a folder that plays the claim) and
 * a pod's log.
 */

export type FakeJobState = 'active' | 'succeeded' | 'failed';

export interface FakeWorkloads {
  /** A Job was created: start what its pod runs. */
  jobCreated?(job: Record<string, unknown>): void;
  /** Where the Job's pod is; absent: running. */
  jobState?(name: string): FakeJobState;
  /** `GET pods/<pod>/proxy/<path>`: true when it answered. */
  proxy?(pod: FakePod, path: string, req: IncomingMessage, res: ServerResponse): boolean;
  /** `GET pods/<pod>/log`. */
  log?(pod: FakePod): string | undefined;
}

export interface FakePod {
  readonly apiVersion: 'v1';
  readonly kind: 'Pod';
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly labels: Record<string, string>;
  };
  readonly spec: Record<string, unknown>;
  readonly status: { readonly phase: string };
}

interface Owner {
  readonly object: Record<string, unknown> & { metadata: Record<string, unknown> };
  readonly deletedAt?: number;
}

/** The Job controller's pod labels (batch/v1: `job-name` and `batch.kubernetes.io/job-name`). */
export function jobPodLabels(job: string): Record<string, string> {
  return { 'job-name': job, 'batch.kubernetes.io/job-name': job };
}

/**
 * One pod per available Deployment (`<name>-7d9c4-0`) and per live Job (`<name>-x0`), with the
 * template's labels and spec.
 */
export function podsOf(
  owners: readonly Owner[],
  availableDeployment: (owner: Owner) => boolean,
  jobState: (name: string) => FakeJobState,
): FakePod[] {
  const pods: FakePod[] = [];
  for (const owner of owners) {
    if (owner.deletedAt !== undefined) continue;
    const { kind, metadata } = owner.object;
    const template = (
      owner.object.spec as {
        template?: { metadata?: { labels?: Record<string, string> }; spec?: Record<string, unknown> };
      }
    )?.template;
    const name = String(metadata.name);
    const namespace = String(metadata.namespace ?? 'default');
    if (kind === 'Deployment' && availableDeployment(owner)) {
      pods.push({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `${name}-7d9c4-0`, namespace, labels: { ...(template?.metadata?.labels ?? {}) } },
        spec: template?.spec ?? {},
        status: { phase: 'Running' },
      });
    }
    if (kind === 'Job') {
      const state = jobState(name);
      pods.push({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: `${name}-x0`,
          namespace,
          labels: { ...(template?.metadata?.labels ?? {}), ...jobPodLabels(name) },
        },
        spec: template?.spec ?? {},
        status: { phase: state === 'active' ? 'Running' : state === 'succeeded' ? 'Succeeded' : 'Failed' },
      });
    }
  }
  return pods;
}

/** The Job's status as the Job controller writes it (conditions Complete / Failed). */
export function jobStatus(state: FakeJobState): Record<string, unknown> {
  if (state === 'active') return { active: 1 };
  if (state === 'succeeded') return { succeeded: 1, conditions: [{ type: 'Complete', status: 'True' }] };
  return { failed: 1, conditions: [{ type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded' }] };
}

/** Which RBAC verb an API request needs (the apiserver's RequestInfo: GET by name get, else list). */
export function verbOf(method: string, named: boolean): string {
  switch (method) {
    case 'GET':
      return named ? 'get' : 'list';
    case 'PATCH':
      return 'patch';
    case 'POST':
      return 'create';
    case 'DELETE':
      return 'delete';
    default:
      return method.toLowerCase();
  }
}

/**
 * `pods/log` and `GET pods/proxy/<path>` of one pod, answered by what the test plugged in
 * (FakeWorkloads.log and .proxy; a followed log: fake-log-follow.ts).
 */
export function answerPodSubresource(
  pods: readonly FakePod[],
  workloads: (FakeWorkloads & FollowedLogs) | undefined,
  request: {
    readonly namespace?: string;
    readonly name: string;
    readonly subresource: string;
    readonly path: string;
  },
  req: IncomingMessage,
  res: ServerResponse,
): void {
  const { namespace, name, subresource, path } = request;
  const pod = pods.find((p) => p.metadata.name === name && p.metadata.namespace === namespace);
  if (!pod) {
    send(res, 404, status(404, `pods "${name}" not found`));
    return;
  }
  if (subresource === 'log') {
    if (serveFollowedLog(req, res, pod, workloads)) return;
    const log = workloads?.log?.(pod);
    if (log === undefined) send(res, 400, status(400, `container in pod "${name}" has no log yet`));
    else {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(log);
    }
    return;
  }
  if (subresource === 'proxy' && req.method === 'GET') {
    // The apiserver decodes the path before it proxies it.
    const proxied = `/${decodeURIComponent(path)}`;
    req.url = proxied;
    if (workloads?.proxy?.(pod, proxied, req, res)) return;
    send(res, 503, status(503, `no endpoints available for pod "${name}"`));
    return;
  }
  send(res, 405, status(405, `${req.method} pods/${subresource} not served by the fake`));
}
