import { AMBIENT_REDIRECTION_ANNOTATION } from '../../../lib/runner/network/client-steps.ts';
import type { JobObject, NetworkPodState } from '../../../lib/runner/ports.ts';
import type { FakeCell, ServerPod } from './fake-cell.ts';

/**
 * The fake cell's Istio telemetry: what each server's sidecar counts of the requests and TCP
 * connections it served, by their encryption; on an ambient cell what the node's ztunnel counts of
 * the connections it captures; and the Prometheus text a scrape of :15020 returns (docs/facts.md §N3).
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
  if (cell.cell.mesh === 'ambient') {
    countZtunnel(cell, job, serverFor(cell, url, job.metadata.namespace), connections);
    return;
  }
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

/** Whether ztunnel captures a pod's traffic: istio-cni redirected it when it was created. */
function captured(pod: NetworkPodState | undefined): boolean {
  return pod?.annotations[AMBIENT_REDIRECTION_ANNOTATION] === 'enabled';
}

/**
 * ztunnel on an ambient cell: a connection out of a captured pod is counted on the source side;
 * one into a captured pod on the destination side, `mutual_tls` when it came over HBONE from a
 * captured client, `unknown` when it arrived in plaintext (passed through). Nothing else moves it.
 */
function countZtunnel(
  cell: FakeCell,
  job: JobObject,
  server: ServerPod | undefined,
  connections: number,
): void {
  const ztunnel = cell.servers.find((p) => p.ztunnelOpened);
  if (!ztunnel?.ztunnelOpened || !server) return;
  const clientNamespace = job.metadata.namespace;
  const fromMesh = captured([...cell.jobs.values()].find((j) => j.job === job)?.pod);
  const toMesh = captured(server);
  if (!fromMesh && !toMesh) return;
  const hbone = fromMesh && toMesh && cell.tcpTelemetry !== 'plaintext-l4';
  const add = (reporter: string, policy: string) => {
    const key = ztunnelSeries(reporter, clientNamespace, server.namespace, policy);
    ztunnel.ztunnelOpened?.set(key, (ztunnel.ztunnelOpened.get(key) ?? 0) + connections);
  };
  if (fromMesh) add('source', hbone ? 'mutual_tls' : 'unknown');
  if (toMesh) add('destination', hbone ? 'mutual_tls' : 'unknown');
}

/** One ztunnel TCP series' labels (Prometheus text, without the braces). */
function ztunnelSeries(reporter: string, source: string, destination: string, policy: string): string {
  return `reporter="${reporter}",source_workload_namespace="${source}",destination_workload_namespace="${destination}",connection_security_policy="${policy}"`;
}

export async function scrapeProxy(cell: FakeCell, podIp: string): Promise<string> {
  const pod = cell.servers.find((p) => p.podIp === podIp);
  if (pod?.ztunnelOpened) {
    const lines = ['# TYPE istio_tcp_connections_opened_total counter'];
    for (const [labels, n] of pod.ztunnelOpened) {
      const shown =
        cell.tcpTelemetry === 'unlabelled'
          ? labels.replace(/,connection_security_policy="[^"]*"/, '')
          : labels;
      lines.push(`istio_tcp_connections_opened_total{${shown}} ${n}`);
    }
    return `${lines.join('\n')}\n`;
  }
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
