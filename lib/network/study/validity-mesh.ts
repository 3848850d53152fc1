import type { Datapath, MeshMode } from '../../config/network.ts';
import type { SseClientResult } from '../probes/sse.ts';
import type {
  DatapathEvidence,
  DownloadResult,
  DownloadRunSpec,
  LatencyArm,
  MtlsCaseResult,
  MtlsMetricEvidence,
  MtlsProof,
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

/** The verdict on a mesh run's encryption, and the reasons a run that is not `proven` is invalid. */
export interface MtlsVerdict {
  readonly proof: MtlsProof;
  readonly reasons: string[];
}

/** Every reason of an `unproven` verdict starts with this: the report shows the run as "mTLS unproven". */
export const MTLS_UNPROVEN = 'mTLS unproven';

const unproven = (why: string): MtlsVerdict => ({ proof: 'unproven', reasons: [`${MTLS_UNPROVEN}: ${why}`] });

/**
 * mTLS as configured, from the destination's counters over the run (docs/facts.md §N3):
 * - `mesh-mtls`, `mesh-l7` on a sidecar cell: `istio_requests_total{connection_security_policy=
 *   "mutual_tls"}` grows by the run's calls; `mesh-mtls-off`: the `none` series does;
 * - the L4 arms, `mesh-l4` (the `tcp-` port, relayed, not parsed) and every arm of an ambient cell
 *   (ztunnel counts connections only): `istio_tcp_connections_opened_total{connection_security_policy=
 *   "mutual_tls"}` grows, and no other policy's series does. A connection count alone proves
 *   nothing about encryption: a plaintext relay counts too.
 * Plain arms and cells without a mesh have no verdict (undefined). A run is valid only when proven;
 * missing evidence makes it `unproven` (named "mTLS unproven"), evidence of the other policy
 * `contradicted`.
 */
export function mtlsVerdict(
  arm: LatencyArm,
  mesh: MeshMode,
  metrics: MtlsMetricEvidence | undefined,
  calls: number,
): MtlsVerdict | undefined {
  if (arm === 'plain' || mesh === 'none') return undefined;
  if (metrics === undefined) return unproven(`no Istio metric evidence was recorded for the ${arm} arm`);
  const requests = metrics.requestsBySecurityPolicy;
  // Whole calls only: a one-request run (a download, a stream) must show its one request.
  const slack = Math.floor(calls * METRIC_TOLERANCE);
  const all = sum(Object.values(requests));
  if (mesh === 'ambient' || arm === 'mesh-l4') {
    const verdict = l4Verdict(arm, metrics);
    if (arm === 'mesh-l4' && mesh === 'sidecar' && all > slack) {
      const parsed = `istio_requests_total grew by ${all} over the L4 run: the sidecar parsed HTTP on the tcp- port, so this is not an L4 relay`;
      return { proof: verdict.proof, reasons: [...verdict.reasons, parsed] };
    }
    return verdict;
  }
  const grew = (policy: string) => requests[policy] ?? 0;
  const [wanted, unwanted] = arm === 'mesh-mtls-off' ? ['none', 'mutual_tls'] : ['mutual_tls', 'none'];
  if (grew(unwanted) > slack) {
    return {
      proof: 'contradicted',
      reasons: [
        `istio_requests_total{connection_security_policy="${unwanted}"} grew by ${grew(unwanted)} over the ${arm} run, which must carry none: its traffic was not ${wanted === 'none' ? 'plaintext' : 'mutual TLS'} as configured`,
      ],
    };
  }
  if (grew(wanted) < calls - slack) {
    return unproven(
      `istio_requests_total{connection_security_policy="${wanted}"} grew by ${grew(wanted)}, not by the run's ${calls} call${calls === 1 ? '' : 's'}`,
    );
  }
  return { proof: 'proven', reasons: [] };
}

/** The key the runner gives a series that came without `connection_security_policy`. */
export const UNLABELLED_POLICY = '(no label)';

/**
 * The policies that show plaintext on an L4 path. A sidecar's destination series says `none` for
 * plaintext (`unknown` is the source side's, Istio standard metrics); ztunnel labels a plaintext
 * passthrough `unknown` and only HBONE `mutual_tls` (istio/ztunnel 1.31.0-rc.0
 * `src/proxy/metrics.rs` `SecurityPolicy`; `inbound.rs`, `inbound_passthrough.rs`).
 */
function plaintextPolicies(reporter: MtlsMetricEvidence['reporter']): readonly string[] {
  return reporter === 'ztunnel' ? ['unknown', 'none'] : ['none'];
}

/** An L4 path's verdict: connections opened under `mutual_tls`, and none in plaintext. */
function l4Verdict(arm: LatencyArm, metrics: MtlsMetricEvidence): MtlsVerdict {
  const counter = `istio_tcp_connections_opened_total${metrics.reporter === 'ztunnel' ? " (ztunnel's)" : ''}`;
  const byPolicy = metrics.tcpConnectionsBySecurityPolicy;
  if (byPolicy === undefined) {
    return unproven(
      `${counter} was recorded without its connection_security_policy, so the ${arm} run's connections may have been plaintext`,
    );
  }
  const mutual = byPolicy.mutual_tls ?? 0;
  const plaintext = plaintextPolicies(metrics.reporter);
  const others = Object.entries(byPolicy).filter(([policy, n]) => plaintext.includes(policy) && n > 0);
  const other = sum(others.map(([, n]) => n));
  // A few connections of another kind (a probe) beside many mTLS ones are noise; more are not.
  if (other > Math.floor(mutual * METRIC_TOLERANCE)) {
    return {
      proof: 'contradicted',
      reasons: [
        `${counter} grew by ${others.map(([p, n]) => `${n} under connection_security_policy="${p}"`).join(', ')} (and ${mutual} under mutual_tls) over the ${arm} run: its connections were not all mutual TLS`,
      ],
    };
  }
  if (mutual === 0) {
    return unproven(
      `${counter}{connection_security_policy="mutual_tls"} did not grow over the ${arm} run (${metrics.tcpConnectionsOpened} connections counted in all)`,
    );
  }
  return { proof: 'proven', reasons: [] };
}

/** The reasons of `mtlsVerdict` (empty when proven or not a mesh arm). */
export function mtlsEvidenceCheck(
  arm: LatencyArm,
  mesh: MeshMode,
  metrics: MtlsMetricEvidence | undefined,
  calls: number,
): string[] {
  return mtlsVerdict(arm, mesh, metrics, calls)?.reasons ?? [];
}

// ---- the mTLS matrix (E2, E8) --------------------------------------------------------------------

/** Every planned case has an observed outcome (a curl that did not run leaves the matrix incomplete). */
export function mtlsMatrixCompleteCheck(spec: MtlsRunSpec, cases: readonly MtlsCaseResult[]): string[] {
  return spec.cases.flatMap((planned) => {
    const found = cases.find((entry) => entry.id === planned.id);
    if (!found) return [`mTLS case ${planned.id} has no result`];
    return found.observed === null
      ? [`mTLS case ${planned.id} was not observed (its curl left no outcome)`]
      : [];
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
