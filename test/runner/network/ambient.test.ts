import { describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../../lib/config/load.ts';
import type { NetworkStudyPlan } from '../../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { FileNetworkResultStore } from '../../../lib/runner/network/file-store.ts';
import { runNetworkStudy } from '../../../lib/runner/network/run-network-study.ts';
import { tempDir } from '../../temp.ts';
import { FAST, FakeCell, type FakeTcpTelemetry, fakeDeps } from './fake-cell.ts';

/**
 * The ambient arm's mTLS evidence end to end: the runner finds the node's ztunnel (istio-system,
 * app=ztunnel), scrapes its :15020 counters around the client Job and judges the destination's
 * connections into the server's namespace by connection_security_policy (docs/facts.md §N3).
 */

const config = parseLabConfig({
  lab: 'network',
  network: { cells: [{ name: 'ambient', datapath: 'iptables', mesh: 'ambient' }] },
});

function planOf(ids: readonly string[]): NetworkStudyPlan {
  const full = networkStudyPlan(config, 'ambient');
  return { ...full, runs: full.runs.filter((r) => ids.includes(r.id)) };
}

async function study(ids: readonly string[], telemetry: FakeTcpTelemetry = 'labelled') {
  const fake = new FakeCell(config, 'ambient', tempDir('network-ambient-'));
  fake.tcpTelemetry = telemetry;
  const deps = fakeDeps(fake, new FileNetworkResultStore(fake.root));
  const result = await runNetworkStudy(deps, config, planOf(ids), FAST);
  return { fake, runs: result.runs };
}

/** The ztunnel's destination-side connections into `namespace`, by policy, straight from its scrape. */
async function ztunnelInbound(fake: FakeCell, namespace: string): Promise<Record<string, number>> {
  const [ztunnel] = await fake.listPods('istio-system', 'app=ztunnel');
  const text = await fake.scrape(ztunnel.podIp);
  const counts: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m =
      /^istio_tcp_connections_opened_total\{reporter="destination",[^}]*destination_workload_namespace="([^"]+)"(?:,connection_security_policy="([^"]+)")?\} (\d+)$/.exec(
        line,
      );
    if (m && m[1] === namespace) counts[m[2] ?? '(none)'] = (counts[m[2] ?? '(none)'] ?? 0) + Number(m[3]);
  }
  return counts;
}

describe('ambient mTLS evidence from the node ztunnel', () => {
  it("proves the ambient arm by ztunnel's mutual_tls connections; the plain arm does not move them", async () => {
    const { fake, runs } = await study(['e1-plain-r1', 'e1-mesh-mtls-r1', 'e6-mesh-mtls-r1']);
    const [plain, fortio, download] = runs;
    expect(plain.valid, plain.invalidReasons.join('; ')).toBe(true);
    expect(plain.mtlsProof).toBeUndefined();
    for (const run of [fortio, download]) {
      expect(run.valid, run.invalidReasons.join('; ')).toBe(true);
      expect(run.mtlsProof).toBe('proven');
      expect(run.mtlsMetrics?.reporter).toBe('ztunnel');
      // ztunnel counts connections only: no HTTP request is seen at L4.
      expect(run.mtlsMetrics?.requestsBySecurityPolicy).toEqual({});
    }
    // fortio's 16 keep-alive connections, the download's one: nothing from the plain run.
    expect(fortio.mtlsMetrics?.tcpConnectionsBySecurityPolicy).toEqual({ mutual_tls: 16 });
    expect(download.mtlsMetrics?.tcpConnectionsBySecurityPolicy).toEqual({ mutual_tls: 1 });
    expect(await ztunnelInbound(fake, 'mesh')).toEqual({ mutual_tls: 17 });
    expect(await ztunnelInbound(fake, 'plain')).toEqual({});
  });

  it('leaves the ambient arm "mTLS unproven" when ztunnel\'s series lack connection_security_policy', async () => {
    const { runs } = await study(['e1-mesh-mtls-r1'], 'unlabelled');
    const [run] = runs;
    expect(run.valid).toBe(false);
    expect(run.mtlsProof).toBe('unproven');
    expect(run.invalidReasons).toEqual([
      expect.stringMatching(/^mTLS unproven: .*connection_security_policy="mutual_tls"\} did not grow/),
    ]);
  });

  it('contradicts the ambient arm when ztunnel took its connections in plaintext', async () => {
    const { fake, runs } = await study(['e1-mesh-mtls-r1'], 'plaintext-l4');
    const [run] = runs;
    expect(run.valid).toBe(false);
    expect(run.mtlsProof).toBe('contradicted');
    expect(run.invalidReasons.join('; ')).toContain('16 under connection_security_policy="unknown"');
    expect(await ztunnelInbound(fake, 'mesh')).toEqual({ unknown: 16 });
  });

  it('without a ztunnel pod the ambient arm is unproven, naming what it looked for', async () => {
    const fake = new FakeCell(config, 'ambient', tempDir('network-ambient-'));
    fake.servers.splice(
      fake.servers.findIndex((p) => p.app === 'ztunnel'),
      1,
    );
    const deps = fakeDeps(fake, new FileNetworkResultStore(fake.root));
    const [run] = (await runNetworkStudy(deps, config, planOf(['e1-mesh-mtls-r1']), FAST)).runs;
    expect(run.valid).toBe(false);
    expect(run.invalidReasons.join('; ')).toContain('no ztunnel pod (istio-system, app=ztunnel)');
  });
});
