import { FakeCell } from './fake-cell.ts';

/**
 * Cells broken on purpose, as subclasses of the fake cell (its physics unchanged but for the one
 * thing each breaks), for the smoke rehearsal.
 */

/**
 * A mesh cell whose proxies export no Istio standard metrics: the sidecars are injected and carry
 * the traffic, and their stats endpoint (:15020/stats/prometheus) answers, but without
 * `istio_requests_total` or `istio_tcp_connections_opened_total` (what a Telemetry resource that
 * disables the Prometheus provider leaves). No mesh run's mTLS can then be proven; nothing else
 * changes.
 */
export class SilentTelemetryCell extends FakeCell {
  /** Whether the break is in force; a test mends it to show the study resumes. */
  silent = true;

  override async scrape(podIp: string): Promise<string> {
    const text = await super.scrape(podIp);
    if (!this.silent) return text;
    return '# TYPE envoy_server_live gauge\nenvoy_server_live 1\n';
  }
}
