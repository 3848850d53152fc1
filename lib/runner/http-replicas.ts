import { Agent, request } from 'node:http';
import type { Replicas } from './ports.ts';
import { HttpStatusError } from './retry.ts';

/**
 * The replicas' HTTP side with Node's http client. Every call has a timeout, so a hung replica
 * fails the call instead of the study.
 *
 * node:http, not fetch: the runner calls the replicas about 300 times per study (every scrape,
 * reset and readiness check), and a loopback GET cost about 1 ms of CPU more through fetch
 * (undici's streams and AbortSignal) than through node:http, measured on the test VM. The
 * requests are the same (method, path, no body); an error still names the method, the URL and
 * the socket's code, and keeps the code and a `TimeoutError` name for the retry (call-policy.ts
 * `retryable`).
 */
export class HttpReplicas implements Replicas {
  constructor(private readonly timeoutMs = 30_000) {}

  async resetPrefixCache(baseUrl: string): Promise<number> {
    return (await this.call(baseUrl, '/reset_prefix_cache', 'POST')).status;
  }

  async metrics(baseUrl: string): Promise<string> {
    const { status, text } = await this.call(baseUrl, '/metrics', 'GET');
    if (status !== 200) throw new HttpStatusError(`GET ${baseUrl}/metrics answered HTTP ${status}`, status);
    return text;
  }

  async models(baseUrl: string): Promise<number> {
    return (await this.call(baseUrl, '/v1/models', 'GET')).status;
  }

  private async call(baseUrl: string, path: string, method: 'GET' | 'POST'): Promise<HttpAnswer> {
    const url = `${baseUrl.replace(/\/+$/, '')}${path}`;
    try {
      return await exchange(method, url, this.timeoutMs);
    } catch (error) {
      const e = error as NodeJS.ErrnoException;
      throw Object.assign(new Error(`${method} ${url}: ${e.code ?? e.message}`), {
        code: e.code,
        name: e.name,
      });
    }
  }
}

interface HttpAnswer {
  readonly status: number;
  readonly text: string;
}

/**
 * Connections kept open between calls, as fetch keeps them, but closed after 1 s idle: a server
 * that closes an idle connection itself (uvicorn, which serves vLLM, after 5 s by default) should
 * not do so just as a new request is sent on it (docs/facts.md §6.7). The replicas' URLs are
 * plain HTTP (lib/study/topology.ts `replicaUrls`).
 */
const agent = new Agent({ keepAlive: true, timeout: 1_000 });

/**
 * One request without a body; the answer's status and text. The timeout bounds the whole
 * exchange, answer included, as AbortSignal.timeout bounded fetch's; it is cleared when the
 * request closes, which Node does after the answer's end or an error. An error keeps its code
 * (HttpReplicas.call), so the retry can tell a refused connection from a wrong request.
 */
function exchange(method: 'GET' | 'POST', url: string, timeoutMs: number): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent });
    const timer = setTimeout(
      () =>
        req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { name: 'TimeoutError' })),
      timeoutMs,
    );
    req.on('close', () => clearTimeout(timer));
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode as number, text: `${Buffer.concat(chunks)}` }));
    });
    req.end();
  });
}
