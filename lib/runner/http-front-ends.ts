import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Api } from '../study/arms.ts';
import { HttpStatusError } from './call-policy.ts';
import { SERVICE_ACCOUNT_DIR } from './kube-cluster.ts';
import type { EndpointPickers, FrontEndAnswer, FrontEnds } from './ports.ts';

/** A word of text the preflight sends: long enough to be a prompt, too short to fill a cache block. */
export const PREFLIGHT_PROMPT = 'Say OK.';

/** The body of the preflight's request: one token over the arm's API. */
export function preflightBody(api: Api, model: string): Record<string, unknown> {
  return api === 'completions'
    ? { model, prompt: PREFLIGHT_PROMPT, max_tokens: 1 }
    : { model, messages: [{ role: 'user', content: PREFLIGHT_PROMPT }], max_tokens: 1 };
}

/** The OpenAI-compatible path of an API. */
export function apiPath(api: Api): string {
  return api === 'completions' ? '/v1/completions' : '/v1/chat/completions';
}

function joinUrl(baseUrl: string, path: string): string {
  return `${baseUrl.replace(/\/+$/, '')}${path}`;
}

function fetchError(method: string, url: string, error: unknown): Error {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return new Error(`${method} ${url}: ${cause?.code ?? cause?.message ?? (error as Error).message}`);
}

/**
 * Front ends over HTTP with Node's fetch. The timeout is long: the first request through a front
 * end may wait for its picker, and a hung path is exactly what the preflight must report.
 */
export class HttpFrontEnds implements FrontEnds {
  constructor(private readonly timeoutMs = 120_000) {}

  async complete(baseUrl: string, api: Api, model: string): Promise<FrontEndAnswer> {
    const url = joinUrl(baseUrl, apiPath(api));
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(preflightBody(api, model)),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      throw fetchError('POST', url, error);
    }
    const text = await response.text();
    return { status: response.status, body: text.slice(0, 300) };
  }
}

/**
 * The EPPs' metrics endpoint. GAIE v1.0.1 serves it with controller-runtime's
 * `filters.WithAuthenticationAndAuthorization` (cmd/epp/runner/runner.go): plain HTTP (no
 * SecureServing), a bearer token checked by a TokenReview, then a SubjectAccessReview for the
 * non-resource URL `/metrics` with verb `get` (controller-runtime v0.21.0
 * pkg/metrics/filters/filters.go). The runner presents its own ServiceAccount token, re-read for
 * every scrape because the kubelet rotates it; its ClusterRole grants that URL.
 */
export class HttpEndpointPickers implements EndpointPickers {
  constructor(
    private readonly tokenFile = join(SERVICE_ACCOUNT_DIR, 'token'),
    private readonly timeoutMs = 30_000,
  ) {}

  async metrics(baseUrl: string): Promise<string> {
    const url = joinUrl(baseUrl, '/metrics');
    const token = readFileSync(this.tokenFile, 'utf8').trim();
    let response: Response;
    try {
      response = await fetch(url, {
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      throw fetchError('GET', url, error);
    }
    const text = await response.text();
    if (response.status !== 200) {
      const hint =
        response.status === 401 || response.status === 403
          ? ' (the runner ServiceAccount needs a ClusterRole with nonResourceURLs ["/metrics"], verbs ["get"])'
          : '';
      throw new HttpStatusError(
        `GET ${url} answered HTTP ${response.status}${hint}: ${text.trim().slice(0, 200)}`,
        response.status,
      );
    }
    return text;
  }
}
