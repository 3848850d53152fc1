import type { SidecarMetrics } from '../ports.ts';
import { HttpStatusError } from '../retry.ts';

/**
 * Istio's merged Prometheus endpoint of a sidecar pod, `:15020/stats/prometheus` (the pilot-agent
 * serves Envoy's and its own metrics there). Reached from the runner in `plain`, outside the mesh:
 * a scrape that fails makes the run's mTLS evidence missing, named in its record.
 */
export const SIDECAR_METRICS_PORT = 15020;
export const SIDECAR_METRICS_PATH = '/stats/prometheus';

export class HttpSidecarMetrics implements SidecarMetrics {
  constructor(
    private readonly timeoutMs = 15_000,
    /** The port; tests point it at a loopback server. */
    private readonly port = SIDECAR_METRICS_PORT,
  ) {}

  async scrape(podIp: string): Promise<string> {
    const url = `http://${podIp}:${this.port}${SIDECAR_METRICS_PATH}`;
    let response: Response;
    try {
      response = await fetch(url, { signal: AbortSignal.timeout(this.timeoutMs) });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      // The code stays on the error: the retry tells a refused connection from a wrong request.
      throw Object.assign(
        new Error(`GET ${url}: ${cause?.code ?? cause?.message ?? (error as Error).message}`),
        {
          code: cause?.code,
          name: (error as Error).name,
        },
      );
    }
    const text = await response.text();
    if (response.status !== 200)
      throw new HttpStatusError(`GET ${url} answered HTTP ${response.status}`, response.status);
    return text;
  }
}
