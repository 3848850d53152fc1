import type { LabConfig } from '../config/schema.ts';
import { KubeApiError } from './kube-cluster.ts';
import type { Clock, Cluster, Replicas, ServiceObject } from './ports.ts';

/**
 * Bounded exponential backoff for the runner's calls to the Kubernetes API and the replicas. A
 * paid study must not end on one transient fault (issue 11: one HTTP 500 on a Job poll ended it),
 * but it must not retry a request the server refused on its merits either.
 */

export interface RetryPolicy {
  /** Tries in all, the first included. */
  readonly attempts: number;
  /** Delay before the second try; each later delay doubles. */
  readonly initialDelayMs: number;
  /** No delay is longer than this. */
  readonly maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { attempts: 5, initialDelayMs: 1_000, maxDelayMs: 30_000 };

/** The policy of `runner.retry` (seconds in the configuration, ms here); both labs' runners use it. */
export function retryPolicyOf(config: {
  readonly runner: { readonly retry: LabConfig['runner']['retry'] };
}): RetryPolicy {
  const { retry } = config.runner;
  return {
    attempts: retry.attempts,
    initialDelayMs: retry.initialDelaySeconds * 1000,
    maxDelayMs: retry.maxDelaySeconds * 1000,
  };
}

/** An HTTP answer that is not a success, from a replica or a front end. */
export class HttpStatusError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = 'HttpStatusError';
  }
}

/**
 * Error codes of Node's sockets and DNS that mean "no answer", not "a wrong question": worth
 * another try. `UND_ERR_*` are undici's (Node's fetch) for the same faults.
 */
const CONNECTION_CODES = [
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
];

/** 429 (too many requests) and every 5xx are worth another try; other statuses are answers. */
export function retryableStatus(status: number): boolean {
  return status === 429 || (status >= 500 && status <= 599);
}

/**
 * Whether a failed call may succeed when tried again: 429, 5xx, a refused or reset connection,
 * a DNS hiccup, a timeout. A 4xx other than 429 means the request was wrong and is not retried.
 */
export function retryable(error: unknown): boolean {
  if (error instanceof KubeApiError || error instanceof HttpStatusError) return retryableStatus(error.status);
  const e = error as { code?: unknown; name?: unknown; message?: unknown; cause?: { code?: unknown } };
  const code = typeof e?.code === 'string' ? e.code : typeof e?.cause?.code === 'string' ? e.cause.code : '';
  if (CONNECTION_CODES.includes(code)) return true;
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return true;
  const message = typeof e?.message === 'string' ? e.message : '';
  // The transports put the code into the message (`GET http://...: ECONNREFUSED`).
  return (
    CONNECTION_CODES.some((c) => message.includes(c)) ||
    /socket hang up|no answer within|timed? ?out/i.test(message)
  );
}

/** The delay before try `n + 1` (n counts from 1): initial x 2^(n-1), at most the maximum. */
export function backoffDelayMs(policy: RetryPolicy, failedTries: number): number {
  return Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (failedTries - 1));
}

export interface RetryContext {
  readonly policy: RetryPolicy;
  readonly clock: Clock;
  /** Told about every retry, with what failed and when the next try is. */
  readonly log: (line: string) => void | Promise<void>;
}

/**
 * Runs `call`; on a retryable failure waits with exponential backoff and tries again, at most
 * `policy.attempts` times in all. Every retry is logged. The last error, or a non-retryable one,
 * is thrown as it was.
 */
export async function withRetry<T>(what: string, call: () => Promise<T>, ctx: RetryContext): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await call();
    } catch (error) {
      if (!retryable(error) || tries >= ctx.policy.attempts) throw error;
      const delay = backoffDelayMs(ctx.policy, tries);
      await ctx.log(
        `retry ${tries}/${ctx.policy.attempts - 1} of ${what} in ${delay / 1000}s: ${(error as Error).message}`,
      );
      await ctx.clock.sleep(delay);
    }
  }
}

/** Every call of the Kubernetes API, retried on transient faults. */
export function retryingCluster(cluster: Cluster, ctx: RetryContext): Cluster {
  const r = <T>(what: string, call: () => Promise<T>) => withRetry(what, call, ctx);
  return {
    // A retried create can meet its own first try (409): the Job then exists, which is what was asked.
    createJob: (job) =>
      r(`create job/${job.metadata.name}`, async () => {
        try {
          await cluster.createJob(job);
        } catch (error) {
          if (
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
    deletePod: (name) => r(`delete pod/${name}`, () => cluster.deletePod(name)),
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
  r: <T>(what: string, call: () => Promise<T>) => Promise<T>,
): Promise<void> {
  const { name } = service.metadata;
  let tries = 0;
  return r(`create service/${name}`, async () => {
    tries++;
    try {
      await cluster.createService(service);
    } catch (error) {
      if (tries > 1 && error instanceof KubeApiError && error.status === 409) {
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
export function retryingReplicas(replicas: Replicas, ctx: RetryContext): Replicas {
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
