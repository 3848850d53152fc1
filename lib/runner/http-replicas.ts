import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
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
      // Keep the code on the error, so the retry can tell a refused connection from a wrong request.
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
 * not do so just as a new request is sent on it (docs/facts.md §6.7).
 */
const IDLE_CLOSE_MS = 1_000;
const agents = {
  'http:': new HttpAgent({ keepAlive: true, timeout: IDLE_CLOSE_MS }),
  'https:': new HttpsAgent({ keepAlive: true, timeout: IDLE_CLOSE_MS }),
};

/** One request without a body; the answer's status and text. Rejects after `timeoutMs` in all. */
function exchange(method: 'GET' | 'POST', url: string, timeoutMs: number): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const secure = target.protocol === 'https:';
    if (!secure && target.protocol !== 'http:') {
      reject(new Error(`not an http(s) URL: ${url}`));
      return;
    }
    const send = secure ? httpsRequest : httpRequest;
    const req = send(target, { method, agent: agents[target.protocol as 'http:' | 'https:'] });
    // The whole exchange, answer included, as AbortSignal.timeout bounded fetch's.
    const timer = setTimeout(() => {
      const timeout = new Error('The operation was aborted due to timeout');
      timeout.name = 'TimeoutError';
      req.destroy(timeout);
    }, timeoutMs);
    const done = () => clearTimeout(timer);
    req.on('error', (error) => {
      done();
      reject(error);
    });
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', (error) => {
        done();
        reject(error);
      });
      res.on('end', () => {
        done();
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
      });
    });
    req.end();
  });
}
