import type { Datapath, MeshMode } from '../../config/network.ts';
import type { ConntrackDriverResult } from '../probes/conntrack-driver.ts';
import { quantizationCheck } from '../probes/service-prober.ts';
import type { SseClientResult } from '../probes/sse.ts';
import {
  type FortioHistogram,
  type FortioResult,
  isGrpcResult,
  meanMs,
  nonOkCodes,
  okCode,
  parseFortioResult,
  requestedQps,
} from './fortio-result.ts';
import type {
  CellHostFacts,
  ConntrackResult,
  ConntrackRunSpec,
  DatapathEvidence,
  DownloadResult,
  DownloadRunSpec,
  FortioRunSpec,
  LatencyArm,
  MtlsCaseResult,
  MtlsMetricEvidence,
  MtlsRunSpec,
  NetworkJobOutcome,
  NetworkRun,
  NetworkRunRecord,
  NetworkRunResult,
  PodMeshEvidence,
  ServiceScaleResult,
  ServiceScaleRunSpec,
  SseRunSpec,
} from './model.ts';

/**
 * The validity checks of docs/facts.md §N5. Each check is a pure function returning the reasons
 * a run is invalid, as sentences naming the numbers (empty when it passes); a run with any reason
 * is invalid and never compared. Two checks do not invalidate and return flags instead (a repeat
 * spread, an mTLS matrix deviation): they are shown beside the run. The runner gathers the
 * evidence, `judgeNetworkRun` judges one run, `judgeRepeats` the spread across an arm's repeats.
 */

// ---- tolerances (docs/facts.md §N5) ----------------------------------------------------------

/** Fixed-rate runs: ActualQPS within this fraction of RequestedQPS. */
export const RATE_TOLERANCE = 0.01;
/** `-r` at most this fraction of the measured p50. */
export const RESOLUTION_FRACTION_OF_P50 = 0.1;
/**
 * A percentile whose bucket holds at least this share of the calls is a bucket position: fortio
 * (v1.75.2 stats/stats.go `CalcPercentile`) interpolates linearly between a bucket's edges, so
 * with nearly all calls in one bucket p50/p90/p99 land at about 0.5/0.9/0.99 of its span,
 * whatever the latencies were.
 */
export const BUCKET_ARTIFACT_SHARE = 0.9;
/** A percentile within this fraction of a resolution step of p/100 of a step is "exactly" on it. */
const GRID_EPSILON = 1e-6;
/** Saturation: Avg within this fraction of connections / ActualQPS (Little's law). */
export const LITTLES_LAW_TOLERANCE = 0.1;
/** Repeats of an arm within this fraction of their mean latency, else flagged. */
export const REPEAT_SPREAD = 0.03;
/**
 * Istio counters: a counter that must grow by the run's calls may fall short of them, and one
 * that must stay still may move, by this fraction of the calls (scrape timing, probes).
 */
export const METRIC_TOLERANCE = 0.01;
/**
 * E10: successes within this fraction of `limit - baseline` (at least `CONNTRACK_MIN_SLACK`
 * entries): the host's own connections come and go during a step, and entries of the previous
 * step may still be expiring.
 */
export const CONNTRACK_TOLERANCE = 0.1;
export const CONNTRACK_MIN_SLACK = 25;

const ms = (seconds: number) => `${(seconds * 1000).toPrecision(3)} ms`;
const pct = (fraction: number) => `${(fraction * 100).toFixed(1)}%`;
const sum = (values: Iterable<number>) => [...values].reduce((total, value) => total + value, 0);

// ---- the Job and the result file ---------------------------------------------------------------

/** The run's Job succeeded (by its succeeded/failed counts, as the first lab). */
export function jobCheck(job: NetworkJobOutcome): string[] {
  if (job === 'succeeded') return [];
  const why = job === 'failed' ? 'failed (status.failed > 0)' : 'did not finish before its timeout';
  return [`the run's Job ${why}`];
}

/** A fortio run's result file exists and parses (docs/facts.md §N5, first check). */
export function fortioResultCheck(
  raw: string | undefined,
):
  | { readonly result: FortioResult; readonly reasons: [] }
  | { readonly result?: undefined; readonly reasons: string[] } {
  if (raw === undefined) return { reasons: ['the run left no fortio result file'] };
  try {
    return { result: parseFortioResult(raw), reasons: [] };
  } catch (error) {
    return { reasons: [(error as Error).message] };
  }
}

// ---- fortio runs -------------------------------------------------------------------------------

/** Every call answered 200 (gRPC: SERVING), no error histogram, and fortio did not report a failure. */
export function resultCodesCheck(result: FortioResult): string[] {
  const reasons: string[] = [];
  if (result.error) reasons.push(`fortio reports the run failed: ${result.message ?? '(no message)'}`);
  if (result.DurationHistogram.Count === 0)
    reasons.push('fortio recorded no calls (DurationHistogram.Count 0)');
  const bad = Object.entries(nonOkCodes(result));
  if (bad.length > 0) {
    const listed = bad.map(([code, count]) => `${count} x ${code === '-1' ? '-1 (socket error)' : code}`);
    reasons.push(
      `fortio RetCodes other than ${okCode(result)}: ${listed.join(', ')} of ${result.DurationHistogram.Count} calls`,
    );
  }
  const errors = result.ErrorsDurationHistogram.Count;
  if (errors > 0)
    reasons.push(`${errors} calls failed (ErrorsDurationHistogram.Count is ${errors}, must be 0)`);
  return reasons;
}

/**
 * Fixed-rate runs (any `-qps` above 0) reached the requested rate: `ActualQPS` within 1% of
 * `RequestedQPS`, which must be the plan's `-qps`. Saturation runs must have run at "max".
 */
export function rateReachedCheck(spec: Pick<FortioRunSpec, 'qps'>, result: FortioResult): string[] {
  const requested = requestedQps(result);
  if (spec.qps === 0) {
    return requested === null
      ? []
      : [`the plan asked -qps 0 (saturation) but fortio ran at RequestedQPS ${requested}`];
  }
  if (requested === null)
    return [`the plan asked -qps ${spec.qps} but fortio ran at max (RequestedQPS "max")`];
  if (requested !== spec.qps)
    return [`the plan asked -qps ${spec.qps} but fortio's RequestedQPS is ${requested}`];
  const off = Math.abs(result.ActualQPS - requested) / requested;
  if (off <= RATE_TOLERANCE) return [];
  return [
    `the rate was not reached: ActualQPS ${result.ActualQPS.toFixed(1)} is ${pct(off)} off RequestedQPS ${requested} (allowed ${pct(RATE_TOLERANCE)}); the client or the server fell behind`,
  ];
}

/** The bucket fortio interpolates a percentile in (stats/stats.go `CalcPercentile`), or undefined. */
function bucketOf(histogram: FortioHistogram, percentile: number) {
  let before = 100 / histogram.Count;
  for (const bucket of histogram.Data) {
    if (percentile <= bucket.Percent) return { bucket, before };
    before = bucket.Percent;
  }
  return undefined;
}

/**
 * Histogram resolution (docs/facts.md §N3 and N5): `-r` at most a tenth of the measured p50, the
 * result's own `Resolution` (HTTP runs write it) equal to the planned `-r`, and no percentile on a
 * bucket artifact: exactly p/100 of a resolution step, or interpolated inside a bucket holding
 * nearly every call (see `BUCKET_ARTIFACT_SHARE`).
 */
export function resolutionCheck(resolutionSeconds: number, result: FortioResult): string[] {
  const reasons: string[] = [];
  const resolution = isGrpcResult(result) ? resolutionSeconds : result.Resolution;
  if (!isGrpcResult(result) && result.Resolution !== resolutionSeconds) {
    reasons.push(
      `fortio ran with -r ${result.Resolution} s (Resolution), not the planned -r ${resolutionSeconds} s`,
    );
  }
  const histogram = result.DurationHistogram;
  const p50 = histogram.Percentiles.find((entry) => entry.Percentile === 50);
  if (p50 === undefined) {
    reasons.push('the result has no p50 (fortio -p must include 50): the resolution cannot be checked');
  } else if (resolution > p50.Value * RESOLUTION_FRACTION_OF_P50) {
    reasons.push(
      `-r ${resolution} s is more than a tenth of the measured p50 ${ms(p50.Value)}: use -r ${(p50.Value * RESOLUTION_FRACTION_OF_P50).toPrecision(2)} s or finer`,
    );
  }
  for (const { Percentile, Value } of histogram.Percentiles) {
    if (Percentile >= 100 || Value <= 0) continue;
    const steps = Value / resolution;
    const fraction = Percentile / 100;
    if (Math.abs(steps - Math.floor(steps) - fraction) <= GRID_EPSILON) {
      reasons.push(
        `p${Percentile} ${ms(Value)} sits exactly at ${fraction} of a -r ${resolution} s step: a bucket position, not a measurement`,
      );
      continue;
    }
    const found = histogram.Count > 0 ? bucketOf(histogram, Percentile) : undefined;
    if (!found) continue;
    const { bucket, before } = found;
    const share = bucket.Count / histogram.Count;
    if (share < BUCKET_ARTIFACT_SHARE || bucket.End <= bucket.Start) continue;
    const position = (Value - bucket.Start) / (bucket.End - bucket.Start);
    reasons.push(
      `p${Percentile} ${ms(Value)} sits at ${position.toFixed(2)} of the bucket ${ms(bucket.Start)}-${ms(bucket.End)} that holds ${pct(share)} of the calls (from ${before.toFixed(1)}% to ${bucket.Percent.toFixed(1)}%): fortio interpolated it between the bucket's edges, a bucket position, not a measurement`,
    );
  }
  return reasons;
}

/**
 * Little's law at saturation (`-qps 0`): the mean latency `Avg` within 10% of
 * `connections / ActualQPS`. A disagreement means the tool's numbers do not describe the run
 * (time spent outside the measured call, or a histogram that lies).
 */
export function littlesLawCheck(
  spec: Pick<FortioRunSpec, 'qps' | 'connections'>,
  result: FortioResult,
): string[] {
  if (spec.qps !== 0) return [];
  if (!(result.ActualQPS > 0))
    return [`saturation run with ActualQPS ${result.ActualQPS}: Little's law cannot hold`];
  const expected = spec.connections / result.ActualQPS;
  const avg = result.DurationHistogram.Avg;
  const off = Math.abs(avg - expected) / expected;
  if (off <= LITTLES_LAW_TOLERANCE) return [];
  return [
    `Little's law disagrees: Avg ${ms(avg)} is ${pct(off)} off ${spec.connections} connections / ${result.ActualQPS.toFixed(1)} QPS = ${ms(expected)} (allowed ${pct(LITTLES_LAW_TOLERANCE)})`,
  ];
}

/**
 * Connections as planned, and sockets as keep-alive implies: with keep-alive (every mode but
 * `new-connection`) `SocketCount` equals the connections (a larger count means connections were
 * closed and re-opened mid-run); without it (`-keepalive=false`) at least one socket per call.
 * gRPC results carry no socket count.
 */
export function socketCountCheck(
  spec: Pick<FortioRunSpec, 'mode' | 'connections'>,
  result: FortioResult,
): string[] {
  const reasons: string[] = [];
  if (result.NumThreads !== spec.connections) {
    reasons.push(
      `fortio ran ${result.NumThreads} connections (NumThreads), not the planned -c ${spec.connections}`,
    );
  }
  if (isGrpcResult(result)) return reasons;
  const keepAlive = spec.mode !== 'new-connection';
  if (result.DisableKeepAlive === keepAlive) {
    reasons.push(
      `fortio ran with DisableKeepAlive ${result.DisableKeepAlive}, but the ${spec.mode} run needs keep-alive ${keepAlive ? 'on' : 'off (-keepalive=false)'}`,
    );
  } else if (keepAlive && result.SocketCount !== spec.connections) {
    reasons.push(
      `SocketCount ${result.SocketCount} is not the ${spec.connections} connections: with keep-alive ${Math.abs(result.SocketCount - spec.connections)} connection(s) were ${result.SocketCount > spec.connections ? 're-opened mid-run (closed by the server or a proxy)' : 'never opened'}`,
    );
  } else if (!keepAlive && result.SocketCount < result.DurationHistogram.Count) {
    reasons.push(
      `SocketCount ${result.SocketCount} is below the ${result.DurationHistogram.Count} calls of a -keepalive=false run: connections were reused, so this is not new-connection latency`,
    );
  }
  return reasons;
}

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

// ---- E9: Services at scale ------------------------------------------------------------------------

/** An earlier E9 step of the same cell: its Service count and the entries it counted. */
export interface ScaleStep {
  readonly services: number;
  readonly entries: number;
}

/**
 * E9 (docs/facts.md §N5): N Services ready before measuring; entries grow with N (more than at
 * every earlier step with fewer Services); every prober sample connected and the samples do not
 * cluster on multiples of the attempt timeout (`quantizationCheck`, recomputed from the samples);
 * on Cilium the LB entries stay under `lbMapMax` and the agent's log shows no "map full".
 */
export function serviceScaleCheck(
  spec: ServiceScaleRunSpec,
  scale: ServiceScaleResult,
  earlier: readonly ScaleStep[],
  datapath: Datapath,
  lbMapMax: number,
): string[] {
  const reasons: string[] = [];
  if (scale.servicesReady !== spec.services) {
    reasons.push(`${scale.servicesReady} of ${spec.services} Services had a ready endpoint when measuring`);
  }
  for (const step of earlier) {
    if (step.services < spec.services && scale.entries <= step.entries) {
      reasons.push(
        `entries did not grow with the Services: ${scale.entries} at ${spec.services} Services, ${step.entries} at ${step.services} (${scale.entriesCommand})`,
      );
    }
  }
  const prober = scale.prober;
  if (prober === null) {
    reasons.push('the service prober left no result');
  } else {
    if (prober.failed > 0) {
      reasons.push(
        `${prober.failed} of ${prober.samples.length} prober samples never connected within ${prober.giveUpMs} ms`,
      );
    }
    const latencies = prober.samples.flatMap((sample) =>
      sample.latencyMs === null ? [] : [sample.latencyMs],
    );
    const quantization = quantizationCheck(latencies, prober.attemptTimeoutMs);
    if (quantization.verdict === 'clustered') {
      reasons.push(
        `the prober's latencies cluster on its ${prober.attemptTimeoutMs} ms attempt timeout (${quantization.reason}): they measure the prober, not the datapath`,
      );
    }
  }
  if (datapath === 'cilium') {
    if (scale.entries >= lbMapMax) {
      reasons.push(`${scale.entries} LB map entries reach bpf.lbMapMax ${lbMapMax}: the map is full`);
    }
    if (scale.lbMapFull === true) reasons.push('the Cilium agent logged "map full" during the step');
    if (scale.lbMapFull === undefined) reasons.push('the Cilium agent\'s log was not checked for "map full"');
  }
  return reasons;
}

// ---- E10: conntrack --------------------------------------------------------------------------------

/** Failure causes that are not a full conntrack table (conntrack-driver.ts `failureCause`). */
const NOT_CONNTRACK_CAUSES = ['emfile', 'no-local-port'];

/**
 * E10 (docs/facts.md §N5): the baseline below `baselineMax` before the step; the planned limit in
 * force; the limit restored afterwards (to the one before the step); successes close to
 * `limit - baseline` when that is below the connections (one loopback connection costs about one
 * entry; tolerance `CONNTRACK_TOLERANCE`, at least `CONNTRACK_MIN_SLACK`), all connections
 * otherwise; and no failure of the driver's own making (EMFILE, no local port).
 */
export function conntrackCheck(spec: ConntrackRunSpec, result: ConntrackResult): string[] {
  const reasons: string[] = [];
  if (result.baseline >= spec.baselineMax) {
    reasons.push(
      `${result.baseline} conntrack entries existed when the step started, not fewer than ${spec.baselineMax}`,
    );
  }
  if (spec.limit !== 'default' && result.limit !== spec.limit) {
    reasons.push(`nf_conntrack_max was ${result.limit} during the step, not the planned ${spec.limit}`);
  }
  if (result.limitAfterRestore === null) {
    reasons.push(
      `nf_conntrack_max was not read back after the step: the restore to ${result.limitBefore} is unconfirmed`,
    );
  } else if (result.limitAfterRestore !== result.limitBefore) {
    reasons.push(
      `nf_conntrack_max is ${result.limitAfterRestore} after the step, not restored to ${result.limitBefore}`,
    );
  }
  const driver: ConntrackDriverResult | null = result.driver;
  if (driver === null) return [...reasons, 'the conntrack driver left no result'];
  for (const cause of NOT_CONNTRACK_CAUSES) {
    const count = driver.failures[cause] ?? 0;
    if (count > 0) {
      reasons.push(
        `${count} connections failed with ${cause}, a limit of the driver (open files ${driver.openFilesLimit ?? 'unknown'}) or of local ports, not of conntrack`,
      );
    }
  }
  const room = result.limit - result.baseline;
  const expected = Math.min(driver.connections, room);
  const slack = Math.max(CONNTRACK_MIN_SLACK, Math.ceil(expected * CONNTRACK_TOLERANCE));
  if (Math.abs(driver.succeeded - expected) > slack) {
    reasons.push(
      `${driver.succeeded} of ${driver.connections} connections succeeded, expected about ${expected} (limit ${result.limit} - baseline ${result.baseline}, capped at the connections; allowed +-${slack})`,
    );
  }
  return reasons;
}

// ---- the host ------------------------------------------------------------------------------------

/**
 * Every run records the host: instance type, AZ, kernel, the encryption-relevant CPU flags (an
 * empty list is a recorded fact: the CPU has none of them) and a version for every component the
 * cell runs (`required`, e.g. k3s, fortio, netshoot, cilium, istio).
 */
export function hostFactsCheck(host: CellHostFacts | undefined, required: readonly string[]): string[] {
  if (host === undefined)
    return ['the host facts (instance type, AZ, kernel, CPU flags, versions) were not recorded'];
  const reasons: string[] = [];
  const named = {
    instanceType: 'instance type',
    availabilityZone: 'availability zone',
    kernel: 'kernel',
  } as const;
  for (const [key, label] of Object.entries(named)) {
    if (host[key as keyof typeof named].trim() === '') reasons.push(`the host's ${label} was not recorded`);
  }
  const missing = required.filter((component) => (host.versions[component] ?? '').trim() === '');
  if (missing.length > 0) reasons.push(`no version recorded for ${missing.join(', ')}`);
  return reasons;
}

// ---- one run -------------------------------------------------------------------------------------

/** What the runner observed about one run (the draft record's fields and the cell's facts). */
export interface NetworkRunEvidence {
  readonly job: NetworkJobOutcome;
  readonly result?: NetworkRunResult;
  readonly pods: readonly PodMeshEvidence[];
  readonly mtlsMetrics?: MtlsMetricEvidence;
  readonly host?: CellHostFacts;
  readonly datapath?: DatapathEvidence;
  /** The cell's records so far (E9 compares a step's entries with the earlier steps'). */
  readonly earlier?: readonly NetworkRunRecord[];
  /** The runner's own findings (a precondition not met, a failed restore), kept as reasons. */
  readonly runnerReasons?: readonly string[];
}

/** The cell's settings the checks judge against. */
export interface NetworkJudgeConfig {
  readonly datapath: Datapath;
  readonly mesh: MeshMode;
  /** The node every pod of the cell must run on. */
  readonly node: string;
  readonly lbMapMax: number;
  /** Components whose version every run must record. */
  readonly requiredVersions: readonly string[];
  /** `-r` of fortio runs without their own spec (E9's new-connection run). */
  readonly resolutionSeconds: number;
  /** `-c` of those runs. */
  readonly connections: number;
}

export interface NetworkJudgment {
  readonly valid: boolean;
  readonly invalidReasons: string[];
  /** Findings that do not invalidate (an mTLS matrix deviation). */
  readonly flags: string[];
}

/** Every check of a fortio result against its spec. */
export function fortioReasons(spec: FortioRunSpec, result: FortioResult): string[] {
  return [
    ...resultCodesCheck(result),
    ...rateReachedCheck(spec, result),
    ...resolutionCheck(spec.resolutionSeconds, result),
    ...littlesLawCheck(spec, result),
    ...socketCountCheck(spec, result),
  ];
}

/** The calls a run's server sidecar must have counted. */
function callsOf(result: NetworkRunResult, fortio: FortioResult | undefined): number {
  if (result.kind === 'fortio') return fortio?.DurationHistogram.Count ?? 0;
  return 1;
}

function scaleStepsBefore(earlier: readonly NetworkRunRecord[], id: string): ScaleStep[] {
  return earlier.flatMap((record) =>
    record.id !== id && record.valid && record.result?.kind === 'service-scale'
      ? [{ services: record.result.scale.servicesReady, entries: record.result.scale.entries }]
      : [],
  );
}

function kindReasons(run: NetworkRun, evidence: NetworkRunEvidence, config: NetworkJudgeConfig): string[] {
  const { spec } = run;
  const result = evidence.result;
  if (result === undefined) return [];
  if (result.kind !== spec.kind)
    return [`the run is a ${spec.kind} run but its result is a ${result.kind} result`];
  switch (spec.kind) {
    case 'fortio': {
      const read = fortioResultCheck(result.kind === 'fortio' ? result.raw : undefined);
      if (!read.result) return read.reasons;
      return [
        ...fortioReasons(spec, read.result),
        ...mtlsEvidenceCheck(spec.arm, config.mesh, evidence.mtlsMetrics, callsOf(result, read.result)),
      ];
    }
    case 'download':
      return result.kind === 'download'
        ? [
            ...downloadCheck(spec, result.download),
            ...mtlsEvidenceCheck(spec.arm, config.mesh, evidence.mtlsMetrics, 1),
          ]
        : [];
    case 'sse':
      return result.kind === 'sse'
        ? [
            ...sseCheck(spec, result.sse),
            ...mtlsEvidenceCheck(spec.arm, config.mesh, evidence.mtlsMetrics, 1),
          ]
        : [];
    case 'mtls':
      return result.kind === 'mtls' ? mtlsMatrixCompleteCheck(spec, result.cases) : [];
    case 'service-scale': {
      if (result.kind !== 'service-scale') return [];
      const steps = scaleStepsBefore(evidence.earlier ?? [], run.id);
      const reasons = serviceScaleCheck(spec, result.scale, steps, config.datapath, config.lbMapMax);
      const raw = result.scale.newConnection;
      if (raw === undefined) return reasons;
      const read = fortioResultCheck(raw);
      if (!read.result) return [...reasons, ...read.reasons.map((reason) => `new-connection run: ${reason}`)];
      const newConnection = { mode: 'new-connection' as const, connections: config.connections };
      const checks = [
        ...resultCodesCheck(read.result),
        ...resolutionCheck(config.resolutionSeconds, read.result),
        ...socketCountCheck(newConnection, read.result),
      ];
      return [...reasons, ...checks.map((reason) => `new-connection run: ${reason}`)];
    }
    case 'conntrack':
      return result.kind === 'conntrack' ? conntrackCheck(spec, result.conntrack) : [];
  }
}

/**
 * Judges one run: the Job, the result against its spec, the pods (sidecars by arm; every kind on
 * the cell's node), the mesh evidence, the datapath and the host. The runner calls it before
 * writing the record. `runnerReasons` come first; a run without a result is judged on that alone.
 */
export function judgeNetworkRun(
  run: NetworkRun,
  evidence: NetworkRunEvidence,
  config: NetworkJudgeConfig,
): NetworkJudgment {
  const arm = 'arm' in run.spec ? run.spec.arm : undefined;
  const first = [...(evidence.runnerReasons ?? []), ...jobCheck(evidence.job)];
  // A run that left nothing to judge (it failed or never started) is invalid for that alone.
  if (evidence.result === undefined) {
    return { valid: false, invalidReasons: [...first, 'the run left no result'], flags: [] };
  }
  const invalidReasons = [
    ...first,
    ...kindReasons(run, evidence, config),
    ...sidecarCheck(arm, config.mesh, evidence.pods, config.node),
    ...datapathCheck(config.datapath, evidence.datapath),
    ...hostFactsCheck(evidence.host, config.requiredVersions),
  ];
  const flags = evidence.result?.kind === 'mtls' ? mtlsMatrixCheck(evidence.result.cases) : [];
  return { valid: invalidReasons.length === 0, invalidReasons, flags };
}

// ---- across repeats ---------------------------------------------------------------------------------

/** Every repeat-spread flag starts with this, so a re-judgement can replace the previous ones. */
export const REPEAT_SPREAD_FLAG = 'repeat spread';

/** One repeat of an arm: its run id and its mean latency (ms). */
export interface RepeatLatency {
  readonly id: string;
  readonly meanMs: number;
}

/**
 * The repeats of one run (`label` names them in the flag) within +-3% of their mean latency, else
 * each repeat outside is FLAGGED (shown, not hidden, not invalid). Fewer than two repeats cannot
 * spread.
 */
export function repeatSpreadCheck(label: string, repeats: readonly RepeatLatency[]): Map<string, string> {
  const flags = new Map<string, string>();
  if (repeats.length < 2) return flags;
  const mean = sum(repeats.map((repeat) => repeat.meanMs)) / repeats.length;
  for (const repeat of repeats) {
    const off = (repeat.meanMs - mean) / mean;
    if (Math.abs(off) <= REPEAT_SPREAD) continue;
    flags.set(
      repeat.id,
      `${REPEAT_SPREAD_FLAG}: ${repeat.id} mean ${repeat.meanMs.toFixed(3)} ms is ${pct(Math.abs(off))} ${off > 0 ? 'above' : 'below'} the ${repeats.length} repeats' mean ${mean.toFixed(3)} ms of ${label} (allowed +-${pct(REPEAT_SPREAD)})`,
    );
  }
  return flags;
}

/**
 * The repeat-spread check over a cell's records: valid fortio runs grouped by the plan's repeat
 * group (`repeatGroup`), each group's repeats compared with their mean. Runs of one experiment,
 * arm and mode that the plan does not mark as repeats of one run (E9's new-connection runs at
 * different Service counts, or repeated runs at different loads) are never compared. Takes every
 * record of the cell and returns them with previous spread flags replaced by the current ones.
 */
export function judgeRepeats(records: readonly NetworkRunRecord[]): NetworkRunRecord[] {
  const groups = new Map<string, { readonly label: string; readonly repeats: RepeatLatency[] }>();
  for (const record of records) {
    const group = record.repeatGroup;
    if (group === undefined || !record.valid) continue;
    if (record.spec.kind !== 'fortio' || record.result?.kind !== 'fortio') continue;
    const read = fortioResultCheck(record.result.raw);
    if (!read.result) continue;
    const label = `${record.experiment} ${record.spec.arm} ${record.spec.mode} (repeats of ${group})`;
    const entry = groups.get(group) ?? { label, repeats: [] };
    entry.repeats.push({ id: record.id, meanMs: meanMs(read.result) });
    groups.set(group, entry);
  }
  const flags = new Map<string, string>();
  for (const { label, repeats } of groups.values())
    for (const [id, flag] of repeatSpreadCheck(label, repeats)) flags.set(id, flag);
  return records.map((record) => {
    const kept = (record.flags ?? []).filter((flag) => !flag.startsWith(REPEAT_SPREAD_FLAG));
    const flag = flags.get(record.id);
    const next = flag === undefined ? kept : [...kept, flag];
    // A record that never had a flag stays without the field (E9, E10 and the others judged here).
    return next.length === 0 && record.flags === undefined ? record : { ...record, flags: next };
  });
}
