import { HttpStatusError, type RetryContext, retryableStatus, withRetry } from './call-policy.ts';
import { KubeApiError } from './kube-cluster.ts';
import type { Cluster, EndpointPickers, Replicas, ServiceObject } from './ports.ts';

/**
 * The Kubernetes API and the replicas behind the runner's error policy (call-policy.ts): every
 * call the first lab's runner makes goes through these two wrappers, which add what a retry
 * means for each call (a 409 of a create that met its own earlier try, a pod delete that must
 * not kill the replacement).
 */

export {
  ApiUnreachableError,
  apiOutageMsOf,
  backoffDelayMs,
  DEFAULT_API_OUTAGE_MS,
  DEFAULT_RETRY_POLICY,
  HttpStatusError,
  type RetryContext,
  type RetryPolicy,
  retryable,
  retryableStatus,
  retryPolicyOf,
  withRetry,
} from './call-policy.ts';

/** Every call of the Kubernetes API, retried on transient faults. */
export function retryingCluster(cluster: Cluster, ctx: RetryContext): Cluster {
  const r = <T>(what: string, call: (tryNumber: number) => Promise<T>) => withRetry(what, call, ctx);
  return {
    // A retried create can meet its own earlier try (409): the Job then exists, which is what was
    // asked. A 409 on the first try is somebody else's Job (a killed runner's): an answer.
    createJob: (job) =>
      r(`create job/${job.metadata.name}`, async (tryNumber) => {
        try {
          await cluster.createJob(job);
        } catch (error) {
          if (
            tryNumber > 1 &&
            error instanceof KubeApiError &&
            error.status === 409 &&
            (await cluster.getJob(job.metadata.name))
          )
            return;
          throw error;
        }
      }),
    getJob: (name) => r(`get job/${name}`, () => cluster.getJob(name)),
    deleteJob: (name) => r(`delete job/${name}`, () => cluster.deleteJob(name)),
    listPods: (selector) => r(`list pods ${selector}`, () => cluster.listPods(selector)),
    // The uid precondition travels with every try: a retry never deletes the replacement pod.
    deletePod: (name, uid) => r(`delete pod/${name}`, () => cluster.deletePod(name, uid)),
    listJobNames: (selector) => r(`list jobs ${selector}`, () => cluster.listJobNames(selector)),
    podLog: (name, container, since) => r(`log of pod/${name}`, () => cluster.podLog(name, container, since)),
    resourceStatus: (ref) => r(`get ${ref.plural}/${ref.name}`, () => cluster.resourceStatus(ref)),
    restartDeployment: (name, at) =>
      r(`restart deployment/${name}`, () => cluster.restartDeployment(name, at)),
    getDeployment: (name) => r(`get deployment/${name}`, () => cluster.getDeployment(name)),
    serverVersion: () => r('GET /version', () => cluster.serverVersion()),
    getServiceSpec: (name) => r(`get service/${name}`, () => cluster.getServiceSpec(name)),
    createService: (service) => createServiceOnce(cluster, service, r),
    setServiceSelector: (name, selector) =>
      r(`set the selector of service/${name}`, () => cluster.setServiceSelector(name, selector)),
    deleteService: (name) => r(`delete service/${name}`, () => cluster.deleteService(name)),
    listServiceNames: (selector) => r(`list services ${selector}`, () => cluster.listServiceNames(selector)),
  };
}

/**
 * A Service create, retried. A retried try can meet the earlier one, which the API server may
 * have done before the fault (409): that Service, with the selector asked for, is what was
 * asked. A 409 on the first try is not ours (a killed runner's gate, say) and is thrown, as is
 * a Service whose selector differs (a gate that is already open must never pass for a closed one).
 */
function createServiceOnce(
  cluster: Cluster,
  service: ServiceObject,
  r: <T>(what: string, call: (tryNumber: number) => Promise<T>) => Promise<T>,
): Promise<void> {
  const { name } = service.metadata;
  return r(`create service/${name}`, async (tryNumber) => {
    try {
      await cluster.createService(service);
    } catch (error) {
      if (tryNumber > 1 && error instanceof KubeApiError && error.status === 409) {
        const existing = await cluster.getServiceSpec(name);
        if (existing && sameSelector(existing.selector, service.spec.selector)) return;
      }
      throw error;
    }
  });
}

/** Two `spec.selector` values select the same pods (absent and empty both select none). */
function sameSelector(a: unknown, b: unknown): boolean {
  const entries = (s: unknown) =>
    Object.entries((s ?? {}) as Record<string, unknown>)
      .map(([k, v]) => `${k}=${String(v)}`)
      .sort();
  return JSON.stringify(entries(a)) === JSON.stringify(entries(b));
}

/**
 * The replicas' calls that carry evidence, retried on transient faults: `/metrics` (a scrape lost
 * to one reset connection would invalidate a run) and the cache reset (idempotent). `/v1/models`
 * is a readiness probe that the runner already polls, so it is not retried here.
 */
export function retryingReplicas(replicas: Replicas, api: RetryContext): Replicas {
  // A replica that stays down is the readiness wait's to ride out, not one call's.
  const ctx = { ...api, policy: { ...api.policy, outageMs: 0 } };
  return {
    metrics: (url) => withRetry(`GET ${url}/metrics`, () => replicas.metrics(url), ctx),
    resetPrefixCache: (url) =>
      withRetry(
        `POST ${url}/reset_prefix_cache`,
        async () => {
          const status = await replicas.resetPrefixCache(url);
          if (retryableStatus(status))
            throw new HttpStatusError(`POST ${url}/reset_prefix_cache answered HTTP ${status}`, status);
          return status;
        },
        ctx,
      ).catch((error: unknown) => {
        // After the last try, a status is still an answer for the caller to judge.
        if (error instanceof HttpStatusError) return error.status;
        throw error;
      }),
    models: (url) => replicas.models(url),
  };
}

/** The Endpoint Pickers' /metrics, the evidence of a prompt-aware run: short retries, as a replica's. */
export function retryingEndpointPickers(pickers: EndpointPickers, api: RetryContext): EndpointPickers {
  const ctx = { ...api, policy: { ...api.policy, outageMs: 0 } };
  return { metrics: (url) => withRetry(`GET ${url}/metrics`, () => pickers.metrics(url), ctx) };
}
