import type { JobObject } from '../../../lib/runner/ports.ts';
import type { FakeCell, ServerPod } from './fake-cell.ts';

/**
 * The fake cell's Istio telemetry: what each server's sidecar counts of the requests and TCP
 * connections it served, by their encryption, and the Prometheus text a scrape of :15020 returns.
 */

/** The server pod a client URL reaches (`http://<app>[.<namespace>]:<port>/...`). */
export function serverFor(cell: FakeCell, url: string, namespace: string): ServerPod | undefined {
  const host = url.replace(/^[a-z]+:\/\//, '').split(/[:/]/)[0];
  const [app, ns] = host.split('.');
  return cell.servers.find((p) => p.app === app && p.namespace === (ns ?? namespace));
}

/** The sidecar of the server counts what it served, by its encryption (mesh clients only). */
export function countServed(
  cell: FakeCell,
  job: JobObject,
  url: string,
  requests: number,
  connections: number,
): void {
  if (job.metadata.namespace !== 'mesh') return;
  const server = serverFor(cell, url, 'mesh');
  if (!server?.hasSidecar) return;
  const port = Number(/:(\d+)/.exec(url.replace(/^[a-z]+:\/\//, ''))?.[1] ?? 80);
  // fortio-permissive's 8080 gets plaintext (its DestinationRule DISABLE); the rest ISTIO_MUTUAL.
  const plaintext =
    (server.app === 'fortio-permissive' && port === 8080) ||
    (port === 8082 && cell.tcpTelemetry === 'plaintext-l4');
  const policy = plaintext ? 'none' : 'mutual_tls';
  server.tcpOpened[policy] = (server.tcpOpened[policy] ?? 0) + connections;
  if (port === 8082) return; // the tcp- port: relayed at L4, no HTTP request counted
  server.requests[policy] = (server.requests[policy] ?? 0) + requests;
}

export async function scrapeProxy(cell: FakeCell, podIp: string): Promise<string> {
  const pod = cell.servers.find((p) => p.podIp === podIp);
  if (!pod?.hasSidecar) throw new Error(`connect ECONNREFUSED ${podIp}:15020`);
  const lines = ['# TYPE istio_requests_total counter'];
  for (const [policy, n] of Object.entries(pod.requests))
    lines.push(
      `istio_requests_total{reporter="destination",response_code="200",connection_security_policy="${policy}"} ${n}`,
    );
  for (const [policy, n] of Object.entries(pod.tcpOpened)) {
    const security = cell.tcpTelemetry === 'unlabelled' ? '' : `,connection_security_policy="${policy}"`;
    lines.push(`istio_tcp_connections_opened_total{reporter="destination"${security}} ${n}`);
  }
  return `${lines.join('\n')}\n`;
}
