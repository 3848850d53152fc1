import type { Datapath } from '../../config/network.ts';
import type {
  CurlOutcome,
  DatapathEvidence,
  DownloadResult,
  MtlsMetricEvidence,
} from '../../network/study/model.ts';
import { UNLABELLED_POLICY } from '../../network/study/validity-mesh.ts';
import { parsePrometheusText } from '../../study/metrics.ts';

/**
 * The shell the host Jobs run and the pure reading of what they print (docs/facts.md §N3, N5):
 * every script prints `key=value` lines, so a missing tool shows as a missing key, named in the
 * error, never as a silent zero.
 */

const NETFILTER = '/proc/sys/net/netfilter';

/** Kernel and CPU flags of the host (a pod sees the host's kernel and /proc/cpuinfo). */
export const HOST_FACTS_SCRIPT = [
  'echo "kernel=$(uname -r)"',
  `echo "cpuFlags=$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2)"`,
].join('; ');

/** What kube-proxy left on the host: KUBE-SVC chains, the kube-proxy nft table, ipvs services. */
export const DATAPATH_SCRIPT = [
  `echo "kubeSvcChains=$(iptables-save -t nat 2>/dev/null | grep -c '^:KUBE-SVC-')"`,
  'if nft list table ip kube-proxy >/dev/null 2>&1; then echo nftKubeProxyTable=true; else echo nftKubeProxyTable=false; fi',
  `echo "ipvsServices=$(ipvsadm -Ln 2>/dev/null | grep -cE '^(TCP|UDP|SCTP) ')"`,
].join('; ');

/** Cilium's own word on the replacement (`cilium-dbg status`, line `KubeProxyReplacement: True ...`). */
export const CILIUM_STATUS_SCRIPT = `echo "kubeProxyReplacement=$(cilium-dbg status | grep -m1 '^KubeProxyReplacement:' | awk '{print $2}')"`;

/**
 * How each datapath's entries are counted (docs/facts.md §N3, "Counting entries"). UNCONFIRMED:
 * the probe image's `iptables-save` must use kube-proxy's backend (nft or legacy); a mismatch
 * counts nothing, which the "entries grow with N" check catches.
 */
export const ENTRIES_COMMANDS: Readonly<Record<Datapath, string>> = {
  iptables: 'iptables-save -t nat | wc -l',
  nftables: 'nft list table ip kube-proxy | wc -l',
  ipvs: 'ipvsadm -Ln | wc -l',
  cilium: 'cilium-dbg bpf lb list | wc -l',
};

export function entriesScript(datapath: Datapath): string {
  return `echo "entries=$(${ENTRIES_COMMANDS[datapath]})"`;
}

/** The conntrack table's fill and limit. */
export const CONNTRACK_READ_SCRIPT = `echo "count=$(cat ${NETFILTER}/nf_conntrack_count)"; echo "max=$(cat ${NETFILTER}/nf_conntrack_max)"`;

/** Sets `nf_conntrack_max`, printing the limit before and the value read back. */
export function conntrackSetScript(limit: number): string {
  if (!Number.isInteger(limit) || limit <= 0)
    throw new Error(`nf_conntrack_max must be a positive integer, got ${limit}`);
  return `echo "before=$(cat ${NETFILTER}/nf_conntrack_max)"; echo ${limit} > ${NETFILTER}/nf_conntrack_max && echo "max=$(cat ${NETFILTER}/nf_conntrack_max)"; echo "count=$(cat ${NETFILTER}/nf_conntrack_count)"`;
}

/** `key=value` lines; later keys win, other lines are ignored. */
export function keyValues(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const at = line.indexOf('=');
    if (at > 0) out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

/** A non-negative integer under `key`, or an error naming the key, the value and the source. */
export function countOf(values: Record<string, string>, key: string, source: string): number {
  const raw = values[key];
  if (raw === undefined || raw === '') throw new Error(`${source} printed no ${key}`);
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${source} printed ${key}=${raw}, not a count`);
  return n;
}

export interface HostFactsOutput {
  readonly kernel: string;
  readonly cpuFlags: string[];
}

/** The CPU flags that make encryption cheap or not (docs/facts.md §N5). */
export const CRYPTO_FLAGS = ['aes', 'vaes', 'pclmulqdq', 'vpclmulqdq', 'avx2', 'avx512f', 'sha_ni'] as const;

export function parseHostFacts(text: string): HostFactsOutput {
  const values = keyValues(text);
  if (!values.kernel) throw new Error('the host facts Job printed no kernel');
  const flags = new Set((values.cpuFlags ?? '').split(/\s+/).filter(Boolean));
  return { kernel: values.kernel, cpuFlags: CRYPTO_FLAGS.filter((f) => flags.has(f)) };
}

export function parseDatapathEvidence(text: string, ciliumText: string | undefined): DatapathEvidence {
  const values = keyValues(text);
  const source = 'the datapath Job';
  let kubeProxyReplacement: boolean | null = null;
  if (ciliumText !== undefined) {
    const kpr = keyValues(ciliumText).kubeProxyReplacement;
    if (!kpr) throw new Error('cilium-dbg status printed no KubeProxyReplacement line');
    kubeProxyReplacement = /^(true|strict)$/i.test(kpr);
  }
  const nft = values.nftKubeProxyTable;
  if (nft !== 'true' && nft !== 'false')
    throw new Error(`${source} printed nftKubeProxyTable=${nft ?? '(nothing)'}`);
  return {
    kubeProxyReplacement,
    kubeSvcChains: countOf(values, 'kubeSvcChains', source),
    nftKubeProxyTable: nft === 'true',
    ipvsServices: countOf(values, 'ipvsServices', source),
  };
}

/** curl's write-out (CURL_WRITE_OUT in jobs.ts) as the download's result. */
export function parseCurlResult(text: string): DownloadResult {
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch (error) {
    throw new Error(`curl's write-out is not JSON (${(error as Error).message}): ${text.slice(0, 200)}`);
  }
  const num = (key: string) => {
    const v = parsed[key];
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw new Error(`curl's write-out has no number ${key}`);
    return v;
  };
  if (typeof parsed.httpCode !== 'string') throw new Error("curl's write-out has no httpCode");
  return {
    httpCode: parsed.httpCode,
    curlExit: num('curlExit'),
    sizeDownloadBytes: num('sizeDownloadBytes'),
    speedDownloadBytesPerSecond: num('speedDownloadBytesPerSecond'),
    timeTotalSeconds: num('timeTotalSeconds'),
  };
}

export function curlOutcome(result: DownloadResult): CurlOutcome {
  return { httpCode: result.httpCode, curlExit: result.curlExit };
}

/** Istio's counters of the server sidecar (docs/facts.md §N3, "mTLS evidence"). */
export const ISTIO_REQUESTS = 'istio_requests_total';
export const ISTIO_TCP_OPENED = 'istio_tcp_connections_opened_total';

/**
 * The destination-side counters of one scrape. `destinationNamespace` keeps only connections into
 * that namespace: a ztunnel serves every pod of its node, a sidecar only its own.
 */
export function mtlsCounters(
  text: string,
  options: { readonly destinationNamespace?: string; readonly reporter?: 'sidecar' | 'ztunnel' } = {},
): MtlsMetricEvidence {
  const requestsBySecurityPolicy: Record<string, number> = {};
  const tcpConnectionsBySecurityPolicy: Record<string, number> = {};
  let tcpConnectionsOpened = 0;
  for (const sample of parsePrometheusText(text)) {
    if (sample.labels.reporter !== 'destination') continue;
    const namespace = options.destinationNamespace;
    if (namespace !== undefined && sample.labels.destination_workload_namespace !== namespace) continue;
    const policy = sample.labels.connection_security_policy ?? UNLABELLED_POLICY;
    if (sample.name === ISTIO_REQUESTS) {
      requestsBySecurityPolicy[policy] = (requestsBySecurityPolicy[policy] ?? 0) + sample.value;
    } else if (sample.name === ISTIO_TCP_OPENED) {
      tcpConnectionsOpened += sample.value;
      tcpConnectionsBySecurityPolicy[policy] = (tcpConnectionsBySecurityPolicy[policy] ?? 0) + sample.value;
    }
  }
  return {
    requestsBySecurityPolicy,
    tcpConnectionsOpened,
    tcpConnectionsBySecurityPolicy,
    ...(options.reporter ? { reporter: options.reporter } : {}),
  };
}

/** Growth of each series between two scrapes (one that went down means a restart: an error). */
function growth(
  before: Readonly<Record<string, number>>,
  after: Readonly<Record<string, number>>,
  metric: string,
): Record<string, number> {
  const grown: Record<string, number> = {};
  for (const p of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const d = (after[p] ?? 0) - (before[p] ?? 0);
    if (d < 0) throw new Error(`${metric}{connection_security_policy="${p}"} went down: the proxy restarted`);
    if (d > 0) grown[p] = d;
  }
  return grown;
}

/** Counter growth between two scrapes (a counter that went down means a restart: an error). */
export function mtlsDelta(before: MtlsMetricEvidence, after: MtlsMetricEvidence): MtlsMetricEvidence {
  const requestsBySecurityPolicy = growth(
    before.requestsBySecurityPolicy,
    after.requestsBySecurityPolicy,
    ISTIO_REQUESTS,
  );
  const tcp = after.tcpConnectionsOpened - before.tcpConnectionsOpened;
  if (tcp < 0) throw new Error(`${ISTIO_TCP_OPENED} went down: the proxy restarted`);
  const byPolicy =
    before.tcpConnectionsBySecurityPolicy && after.tcpConnectionsBySecurityPolicy
      ? growth(before.tcpConnectionsBySecurityPolicy, after.tcpConnectionsBySecurityPolicy, ISTIO_TCP_OPENED)
      : undefined;
  return {
    requestsBySecurityPolicy,
    tcpConnectionsOpened: tcp,
    ...(byPolicy ? { tcpConnectionsBySecurityPolicy: byPolicy } : {}),
    ...(after.reporter ? { reporter: after.reporter } : {}),
  };
}
