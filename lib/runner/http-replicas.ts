import type { Replicas } from './ports.ts';
import { HttpStatusError } from './retry.ts';

/**
 * The replicas' HTTP side with Node's fetch. Every call has a timeout, so a hung replica fails
 * the call instead of the study.
 */
export class HttpReplicas implements Replicas {
  constructor(private readonly timeoutMs = 30_000) {}

  async resetPrefixCache(baseUrl: string): Promise<number> {
    const response = await this.call(baseUrl, '/reset_prefix_cache', 'POST');
    await response.arrayBuffer();
    return response.status;
  }

  async metrics(baseUrl: string): Promise<string> {
    const response = await this.call(baseUrl, '/metrics', 'GET');
    const text = await response.text();
    if (response.status !== 200)
      throw new HttpStatusError(`GET ${baseUrl}/metrics answered HTTP ${response.status}`, response.status);
    return text;
  }

  async models(baseUrl: string): Promise<number> {
    const response = await this.call(baseUrl, '/v1/models', 'GET');
    await response.arrayBuffer();
    return response.status;
  }

  private async call(baseUrl: string, path: string, method: 'GET' | 'POST'): Promise<Response> {
    const url = `${baseUrl.replace(/\/+$/, '')}${path}`;
    try {
      return await fetch(url, { method, signal: AbortSignal.timeout(this.timeoutMs) });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      // Keep the code on the error, so the retry can tell a refused connection from a wrong request.
      throw Object.assign(
        new Error(`${method} ${url}: ${cause?.code ?? cause?.message ?? (error as Error).message}`),
        { code: cause?.code, name: (error as Error).name },
      );
    }
  }
}
