import type { Datapath, MeshMode } from '../../config/network.ts';
import type { SseClientResult } from '../probes/sse.ts';
import type {
  DatapathEvidence,
  DownloadResult,
  DownloadRunSpec,
  LatencyArm,
  MtlsCaseResult,
  MtlsMetricEvidence,
  MtlsRunSpec,
  PodMeshEvidence,
  SseRunSpec,
} from './model.ts';
import { METRIC_TOLERANCE } from './validity-fortio.ts';

/** The validity checks of the mesh, the mTLS matrix, downloads, SSE and the datapath (docs/facts.md §N5). */

const sum = (values: Iterable<number>) => [...values].reduce((total, value) => total + value, 0);

// ---- pods and mesh -----------------------------------------------------------------------------

/**
 * Mesh arms have `istio-proxy` as a native sidecar on every pod of the run in a sidecar cell;
 * plain arms have none, and an ambient cell has none anywhere (ztunnel carries its traffic; a
 * sidecar there means injection is on as well). Every pod runs on the cell's node.
 */
export function sidecarCheck(
  arm: LatencyArm | undefined,
  mesh: MeshMode,
  pods: readonly PodMeshEvidence[],
  node: string,
): string[] {
  if (pods.length === 0)
    return ['no pod evidence was recorded: sidecars and node placement cannot be checked'];
  const reasons: string[] = [];
  for (const pod of pods) {
    const name = `pod ${pod.namespace}/${pod.pod}`;
    if (pod.node !== node) reasons.push(`${name} ran on node ${pod.node}, not the cell's node ${node}`);
    if (arm === undefined) continue;
    const wantsSidecar = arm !== 'plain' && mesh === 'sidecar';
    if (wantsSidecar && !pod.hasSidecar) {
      reasons.push(
        `${name} of the ${arm} arm has no istio-proxy native sidecar (was it created before the namespace label?)`,
      );
    }
    if (!wantsSidecar && pod.hasSidecar) {
      const why = arm === 'plain' ? 'the plain arm' : `the ${arm} arm of an ${mesh} cell`;
      reasons.push(`${name} has an istio-proxy sidecar, which ${why} must not have`);
    }
  }
  return reasons;
}

/**
 * mTLS as configured, from the server sidecar's counters over the run: for `mesh-mtls` and
 * `mesh-l7`, `istio_requests_total{connection_security_policy="mutual_tls"}` grows by the run's
 * calls; for `mesh-mtls-off` the `none` series does; for `mesh-l4` (relayed, not parsed)
 * `istio_tcp_connections_opened_total` grows while no request is counted. Ambient cells report
 * through ztunnel, which counts TCP connections only: there the connections must grow. Plain arms
 * and cells without a mesh have no evidence to give.
 */
export function mtlsEvidenceCheck(
  arm: LatencyArm,
  mesh: MeshMode,
  metrics: MtlsMetricEvidence | undefined,
  calls: number,
): string[] {
  if (arm === 'plain' || mesh === 'none') return [];
  if (metrics === undefined)
    return [`no Istio metric evidence was recorded for the ${arm} arm: mTLS cannot be confirmed`];
  const requests = metrics.requestsBySecurityPolicy;
  // Whole calls only: a one-request run (a download, a stream) must show its one request.
  const slack = Math.floor(calls * METRIC_TOLERANCE);
  const grew = (policy: string) => requests[policy] ?? 0;
  const all = sum(Object.values(requests));
  if (mesh === 'ambient' || arm === 'mesh-l4') {
    const reasons: string[] = [];
    if (!(metrics.tcpConnectionsOpened > 0)) {
      reasons.push(
        `istio_tcp_connections_opened_total did not grow over the ${arm} run (${metrics.tcpConnectionsOpened})`,
      );
    }
    if (arm === 'mesh-l4' && mesh === 'sidecar' && all > slack) {
      reasons.push(
        `istio_requests_total grew by ${all} over the L4 run: the sidecar parsed HTTP on the tcp- port, so this is not an L4 relay`,
      );
    }
    return reasons;
  }
  const [wanted, unwanted] = arm === 'mesh-mtls-off' ? ['none', 'mutual_tls'] : ['mutual_tls', 'none'];
  const reasons: string[] = [];
  if (grew(wanted) < calls - slack) {
    reasons.push(
      `istio_requests_total{connection_security_policy="${wanted}"} grew by ${grew(wanted)}, not by the run's ${calls} call${calls === 1 ? '' : 's'}: the ${arm} arm's traffic was not ${wanted === 'none' ? 'plaintext' : 'mutual TLS'} as configured`,
    );
  }
  if (grew(unwanted) > slack) {
    reasons.push(
      `istio_requests_total{connection_security_policy="${unwanted}"} grew by ${grew(unwanted)} over the ${arm} run, which must carry none`,
    );
  }
  return reasons;
}

// ---- the mTLS matrix (E2, E8) --------------------------------------------------------------------

/** Every planned case has an observed outcome (a curl that did not run leaves the matrix incomplete). */
export function mtlsMatrixCompleteCheck(spec: MtlsRunSpec, cases: readonly MtlsCaseResult[]): string[] {
  return spec.cases.flatMap((planned) => {
    const found = cases.find((entry) => entry.id === planned.id);
    if (!found) return [`mTLS case ${planned.id} has no result`];
    return found.observed === null ? [`mTLS case ${planned.id} was not observed (its curl did not run)`] : [];
  });
}

/**
 * Expected against observed: a deviation is a finding about the cluster (a FLAG, shown beside the
 * matrix), not a broken run. STRICT against a plaintext client drops the connection (HTTP 000,
 * curl exit 56); an AuthorizationPolicy denial is 403.
 */
export function mtlsMatrixCheck(cases: readonly MtlsCaseResult[]): string[] {
  return cases.flatMap(({ id, expected, observed }) => {
    if (observed === null) return [];
    if (observed.httpCode === expected.httpCode && observed.curlExit === expected.curlExit) return [];
    return [
      `mTLS case ${id}: expected HTTP ${expected.httpCode} with curl exit ${expected.curlExit}, observed HTTP ${observed.httpCode} with curl exit ${observed.curlExit}`,
    ];
  });
}

// ---- downloads and SSE -----------------------------------------------------------------------

/** E6: the download answered 200, curl exited 0 and every byte arrived. */
export function downloadCheck(spec: DownloadRunSpec, download: DownloadResult): string[] {
  const reasons: string[] = [];
  if (download.httpCode !== '200' || download.curlExit !== 0) {
    reasons.push(
      `the download ended with HTTP ${download.httpCode} and curl exit ${download.curlExit}, not 200 and 0`,
    );
  }
  if (download.sizeDownloadBytes !== spec.bytes) {
    reasons.push(`the download delivered ${download.sizeDownloadBytes} bytes, not the planned ${spec.bytes}`);
  }
  return reasons;
}

/** E7: the stream answered 200, delivered every planned event and the client saw nothing amiss. */
export function sseCheck(spec: SseRunSpec, sse: SseClientResult): string[] {
  const reasons: string[] = [];
  if (sse.status !== 200) reasons.push(`the SSE stream answered HTTP ${sse.status}, not 200`);
  if (sse.events !== spec.events)
    reasons.push(`the SSE client received ${sse.events} of ${spec.events} events`);
  for (const error of sse.errors) reasons.push(`SSE client: ${error}`);
  if (sse.gaps === null) reasons.push('the SSE client measured no gaps (fewer than two events)');
  return reasons;
}

// ---- the datapath -------------------------------------------------------------------------------

/**
 * The datapath is what the cell claims (docs/facts.md §N5): on Cilium `KubeProxyReplacement`
 * true and no kube-proxy rules (no `KUBE-SVC` chains, no `kube-proxy` nft table); on the
 * others the configured kube-proxy mode's own tables are present (the kubernetes Service alone
 * makes some) and no replacement is reported.
 */
export function datapathCheck(datapath: Datapath, evidence: DatapathEvidence | undefined): string[] {
  if (evidence === undefined)
    return [`the ${datapath} datapath was not verified on the host (no datapath evidence)`];
  const reasons: string[] = [];
  if (datapath === 'cilium') {
    if (evidence.kubeProxyReplacement !== true) {
      reasons.push(
        `cilium-dbg status reports KubeProxyReplacement ${evidence.kubeProxyReplacement}, not true`,
      );
    }
    if (evidence.kubeSvcChains > 0) {
      reasons.push(
        `iptables-save shows ${evidence.kubeSvcChains} KUBE-SVC chains on a Cilium cell: kube-proxy is running`,
      );
    }
    if (evidence.nftKubeProxyTable)
      reasons.push('the kube-proxy nft table exists on a Cilium cell: kube-proxy is running');
    return reasons;
  }
  if (evidence.kubeProxyReplacement === true) {
    reasons.push(`Cilium's kube-proxy replacement is active on a ${datapath} cell`);
  }
  if (datapath === 'iptables' && evidence.kubeSvcChains === 0) {
    reasons.push(
      'no KUBE-SVC chains in iptables-save on an iptables cell: kube-proxy is not in iptables mode',
    );
  }
  if (datapath === 'nftables' && !evidence.nftKubeProxyTable) {
    reasons.push('no kube-proxy nft table on an nftables cell: kube-proxy is not in nftables mode');
  }
  if (datapath === 'ipvs' && evidence.ipvsServices === 0) {
    reasons.push('ipvsadm -Ln lists no virtual services on an ipvs cell: kube-proxy is not in ipvs mode');
  }
  return reasons;
}
