import type { LabConfig } from '../config/schema.ts';
import { KubeApiError } from './kube-cluster.ts';
import type { Clock } from './ports.ts';
import { formatElapsed } from './status.ts';
import { RunnerInterruptedError } from './stop-signal.ts';

/**
 * The runner's error policy for every call it makes to the Kubernetes API and the replicas (the
 * table in docs/runner.md, "The error policy"): what a failed call means is decided here, once,
 * not at each call site.
 *
 * - an answer (a 4xx other than 429) is handed back at once: the request was wrong, and the
 *   caller knows what a 404 or a 409 means for it;
 * - a transient fault (429, 5xx, a refused or reset connection, a timeout) is tried again with
 *   capped exponential backoff, at least `attempts` times, and for the Kubernetes API for as long
 *   as `outageMs` since the call's first failure: a K3s server restart takes longer than a
 *   few seconds, and a study must ride it out, not stop;
 * - a transient fault that outlasts the outage limit becomes `ApiUnreachableError`, which stops
 *   the study as `interrupted` (recorded in study.json, never a reason to terminate the host).
 */

export interface RetryPolicy {
  /** Tries in all, the first included, whatever the outage limit. */
  readonly attempts: number;
  /** Delay before the second try; each later delay doubles. */
  readonly initialDelayMs: number;
  /** No delay is longer than this. */
  readonly maxDelayMs: number;
  /**
   * How long a call keeps being tried after its first failure, when the failure is transient.
   * The Kubernetes API's calls use `runner.retry.outageMinutes`; the replicas' calls 0 (their
   * outages are ridden out by the readiness wait before each run).
   * @default 0
   */
  readonly outageMs?: number;
}

/** Short retries, no outage riding: the replicas' calls and the sidecar scrapes; the API's add `outageMs`. */
export const DEFAULT_RETRY_POLICY: RetryPolicy = { attempts: 5, initialDelayMs: 1_000, maxDelayMs: 30_000 };

/** How long the first lab's runner rides out a Kubernetes API outage by default (`runner.retry.outageMinutes`). */
export const DEFAULT_API_OUTAGE_MS = 15 * 60_000;

/**
 * The policy of `runner.retry` (seconds in the configuration, ms here); both labs' runners use
 * it, with the outage limit `apiOutageMsOf` added for their Kubernetes API calls
 * (`runnerOptionsOf`).
 */
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

/** `runner.retry.outageMinutes` in ms: how long a Kubernetes API call keeps being tried. */
export function apiOutageMsOf(config: {
  readonly runner: { readonly retry: LabConfig['runner']['retry'] };
}): number {
  return config.runner.retry.outageMinutes * 60_000;
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
 * The Kubernetes API failed every try for longer than the outage limit. The study stops as
 * `interrupted`: `lab run` resumes it once the API answers.
 */
export class ApiUnreachableError extends Error {
  constructor(
    readonly what: string,
    readonly failingForMs: number,
    readonly tries: number,
    readonly lastError: unknown,
  ) {
    super(
      `the Kubernetes API did not answer ${what} for ${formatElapsed(failingForMs)} (${tries} tries): ${(lastError as Error).message}`,
    );
    this.name = 'ApiUnreachableError';
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
  return Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.min(failedTries - 1, 30));
}

export interface RetryContext {
  readonly policy: RetryPolicy;
  readonly clock: Clock;
  /**
   * Told about every retry, with what failed and when the next try is; during an outage this is
   * the status line (the runner writes it to status.json too).
   */
  readonly log: (line: string) => void | Promise<void>;
}

/**
 * Runs `call` (given its try number, from 1) under the policy: an answer is thrown as it is; a
 * transient fault is retried with capped backoff while fewer than `attempts` tries were made or
 * the call has failed for less than `outageMs`. Every retry is logged. Then the last error is
 * thrown as it was, or, when the outage limit ran out, as `ApiUnreachableError`.
 */
export async function withRetry<T>(
  what: string,
  call: (tryNumber: number) => Promise<T>,
  ctx: RetryContext,
): Promise<T> {
  const outageMs = ctx.policy.outageMs ?? 0;
  let firstFailure: number | undefined;
  for (let tries = 1; ; tries++) {
    try {
      return await call(tries);
    } catch (error) {
      if (!retryable(error)) throw error;
      const now = ctx.clock.now().getTime();
      firstFailure ??= now;
      const failingFor = now - firstFailure;
      if (tries >= ctx.policy.attempts && failingFor >= outageMs) {
        if (outageMs > 0) throw new ApiUnreachableError(what, failingFor, tries, error);
        throw error;
      }
      const delay = backoffDelayMs(ctx.policy, tries);
      const count = outageMs > 0 ? `${tries}` : `${tries}/${ctx.policy.attempts - 1}`;
      const outage =
        outageMs > 0
          ? ` (failing for ${formatElapsed(failingFor)}, waiting up to ${formatElapsed(outageMs)})`
          : '';
      await ctx.log(`retry ${count} of ${what} in ${delay / 1000}s${outage}: ${(error as Error).message}`);
      await ctx.clock.sleep(delay);
    }
  }
}

/** Whether a study stop came from the Kubernetes API (unreachable, or refusing): the host must stay up. */
export function stoppedByApi(error: unknown): boolean {
  return error instanceof ApiUnreachableError || error instanceof KubeApiError;
}

/**
 * Whether a study stop leaves the study `interrupted` (resumed by `lab run`, the host kept): the
 * API stopped it, or the runner was told to stop (SIGTERM, SIGINT: stop-signal.ts).
 */
export function interruption(error: unknown): boolean {
  return stoppedByApi(error) || error instanceof RunnerInterruptedError;
}

/**
 * For the call sites that turn a failure into a recorded problem: an API outage that outlasted
 * the limit, or the runner told to stop, is not one call's problem but the study's, so it goes on up.
 */
export function rethrowOutage(error: unknown): void {
  if (error instanceof ApiUnreachableError || error instanceof RunnerInterruptedError) throw error;
}
