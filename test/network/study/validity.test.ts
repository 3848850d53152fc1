import { describe, expect, it } from 'vitest';
import { type ProbeSample, proberResult } from '../../../lib/network/probes/service-prober.ts';
import { type FortioResult, parseFortioResult } from '../../../lib/network/study/fortio-result.ts';
import type {
  CellHostFacts,
  ConntrackResult,
  ConntrackRunSpec,
  DatapathEvidence,
  FortioRunSpec,
  MtlsCaseResult,
  MtlsRunSpec,
  NetworkRun,
  NetworkRunRecord,
  PodMeshEvidence,
  ServiceScaleResult,
  ServiceScaleRunSpec,
} from '../../../lib/network/study/model.ts';
import {
  conntrackCheck,
  datapathCheck,
  downloadCheck,
  fortioResultCheck,
  hostFactsCheck,
  judgeNetworkRun,
  judgeRepeats,
  littlesLawCheck,
  mtlsEvidenceCheck,
  mtlsMatrixCheck,
  mtlsMatrixCompleteCheck,
  mtlsVerdict,
  type NetworkJudgeConfig,
  type NetworkRunEvidence,
  rateReachedCheck,
  repeatSpreadCheck,
  resolutionCheck,
  resultCodesCheck,
  serviceScaleCheck,
  sidecarCheck,
  socketCountCheck,
  sseCheck,
} from '../../../lib/network/study/validity.ts';
import { type FortioFixture, fortioFixture } from './fixtures/fortio.ts';

const fixture = (name: FortioFixture): FortioResult => parseFortioResult(fortioFixture(name));
/** A fixture with some fields changed, as fortio would have written them. */
const changed = (name: FortioFixture, patch: Record<string, unknown>): FortioResult =>
  parseFortioResult(JSON.stringify({ ...JSON.parse(fortioFixture(name)), ...patch }));

const fixedRate: FortioRunSpec = {
  kind: 'fortio',
  arm: 'plain',
  mode: 'fixed-rate',
  clientNamespace: 'plain',
  url: 'http://fortio-server.plain:8080/echo',
  qps: 500,
  seconds: 25,
  connections: 16,
  resolutionSeconds: 0.00001,
};
const saturation: FortioRunSpec = { ...fixedRate, arm: 'mesh-mtls', mode: 'saturation', qps: 0, seconds: 20 };

describe('fortioResultCheck', () => {
  it('fails a missing or unparsable file and passes a fortio result', () => {
    expect(fortioResultCheck(undefined).reasons).toEqual(['the run left no fortio result file']);
    expect(fortioResultCheck('{"RunType":"HTTP"}').reasons).toEqual([
      'fortio result: Labels must be a string, missing',
    ]);
    expect(fortioResultCheck(fortioFixture('http-fixed-rate')).reasons).toEqual([]);
  });
});

describe('resultCodesCheck', () => {
  it('passes all-200 HTTP and all-SERVING gRPC runs', () => {
    expect(resultCodesCheck(fixture('http-fixed-rate'))).toEqual([]);
    expect(resultCodesCheck(fixture('grpc-ping'))).toEqual([]);
  });

  it('fails 503s, socket errors and the error histogram they fill', () => {
    expect(resultCodesCheck(fixture('http-non-200'))).toEqual([
      'fortio RetCodes other than 200: 37 x 503, 3 x -1 (socket error) of 12496 calls',
      '40 calls failed (ErrorsDurationHistogram.Count is 40, must be 0)',
    ]);
  });

  it('fails gRPC calls that were not SERVING and a run fortio reports as failed', () => {
    const grpc = changed('grpc-ping', { RetCodes: { SERVING: 12_490, ERROR: 6 } });
    expect(resultCodesCheck(grpc)).toEqual(['fortio RetCodes other than SERVING: 6 x ERROR of 12496 calls']);
    const aborted = changed('http-fixed-rate', { error: true, message: 'Aborted before even starting' });
    expect(resultCodesCheck(aborted)).toEqual([
      'fortio reports the run failed: Aborted before even starting',
    ]);
  });
});

describe('rateReachedCheck', () => {
  it('passes a fixed-rate run within 1% (ActualQPS 500.6 for 500)', () => {
    expect(rateReachedCheck(fixedRate, fixture('http-fixed-rate'))).toEqual([]);
  });

  it('fails a run that fell behind the requested rate', () => {
    const behind = changed('http-fixed-rate', { ActualQPS: 481.3 });
    expect(rateReachedCheck(fixedRate, behind)).toEqual([
      'the rate was not reached: ActualQPS 481.3 is 3.7% off RequestedQPS 500 (allowed 1.0%); the client or the server fell behind',
    ]);
  });

  it('fails a run at another rate than planned, and saturation against "max"', () => {
    expect(rateReachedCheck({ qps: 1000 }, fixture('http-fixed-rate'))).toEqual([
      "the plan asked -qps 1000 but fortio's RequestedQPS is 500",
    ]);
    expect(rateReachedCheck(fixedRate, fixture('http-saturation'))).toEqual([
      'the plan asked -qps 500 but fortio ran at max (RequestedQPS "max")',
    ]);
    expect(rateReachedCheck(saturation, fixture('http-fixed-rate'))).toEqual([
      'the plan asked -qps 0 (saturation) but fortio ran at RequestedQPS 500',
    ]);
    expect(rateReachedCheck(saturation, fixture('http-saturation'))).toEqual([]);
  });
});

describe('resolutionCheck', () => {
  it('passes -r 0.00001 on sub-millisecond latencies', () => {
    expect(resolutionCheck(0.00001, fixture('http-fixed-rate'))).toEqual([]);
    expect(resolutionCheck(0.00001, fixture('grpc-ping'))).toEqual([]);
    expect(resolutionCheck(0.00001, fixture('http-saturation'))).toEqual([]);
  });

  it("fails fortio's default -r 0.001: too coarse, and p50/p90/p99 are positions in one bucket", () => {
    const reasons = resolutionCheck(0.001, fixture('http-resolution-1ms'));
    expect(reasons[0]).toBe(
      '-r 0.001 s is more than a tenth of the measured p50 0.589 ms: use -r 0.000059 s or finer',
    );
    expect(reasons.slice(1)).toEqual([
      "p50 0.589 ms sits at 0.50 of the bucket 0.179 ms-1.00 ms that holds 100.0% of the calls (from 0.0% to 100.0%): fortio interpolated it between the bucket's edges, a bucket position, not a measurement",
      "p90 0.918 ms sits at 0.90 of the bucket 0.179 ms-1.00 ms that holds 100.0% of the calls (from 0.0% to 100.0%): fortio interpolated it between the bucket's edges, a bucket position, not a measurement",
      "p99 0.992 ms sits at 0.99 of the bucket 0.179 ms-1.00 ms that holds 100.0% of the calls (from 0.0% to 100.0%): fortio interpolated it between the bucket's edges, a bucket position, not a measurement",
    ]);
  });

  it('fails a run whose file says another -r than planned', () => {
    expect(resolutionCheck(0.00001, fixture('http-resolution-1ms'))[0]).toBe(
      'fortio ran with -r 0.001 s (Resolution), not the planned -r 0.00001 s',
    );
  });

  it('fails percentiles exactly at 0.5/0.9/0.99 of a resolution step', () => {
    const json = JSON.parse(fortioFixture('grpc-ping'));
    json.DurationHistogram.Percentiles = [
      { Percentile: 50, Value: 0.000505 },
      { Percentile: 90, Value: 0.000689 },
      { Percentile: 99, Value: 0.00088 },
    ];
    expect(resolutionCheck(0.00001, parseFortioResult(JSON.stringify(json)))).toEqual([
      'p50 0.505 ms sits exactly at 0.5 of a -r 0.00001 s step: a bucket position, not a measurement',
      'p90 0.689 ms sits exactly at 0.9 of a -r 0.00001 s step: a bucket position, not a measurement',
    ]);
  });

  it('fails a result without p50', () => {
    const json = JSON.parse(fortioFixture('http-fixed-rate'));
    json.DurationHistogram.Percentiles = [{ Percentile: 99, Value: 0.000765 }];
    expect(resolutionCheck(0.00001, parseFortioResult(JSON.stringify(json)))).toEqual([
      'the result has no p50 (fortio -p must include 50): the resolution cannot be checked',
    ]);
  });
});

describe('littlesLawCheck', () => {
  it('passes a saturation run whose Avg agrees with connections / ActualQPS', () => {
    expect(littlesLawCheck(saturation, fixture('http-saturation'))).toEqual([]);
  });

  it('fails when the mean latency disagrees with the throughput by more than 10%', () => {
    const json = JSON.parse(fortioFixture('http-saturation'));
    json.DurationHistogram.Avg = 0.00121;
    expect(littlesLawCheck(saturation, parseFortioResult(JSON.stringify(json)))).toEqual([
      "Little's law disagrees: Avg 1.21 ms is 25.7% off 16 connections / 9819.0 QPS = 1.63 ms (allowed 10.0%)",
    ]);
  });

  it('does not apply to fixed-rate runs', () => {
    expect(littlesLawCheck(fixedRate, fixture('http-fixed-rate'))).toEqual([]);
  });
});

describe('socketCountCheck', () => {
  it('passes keep-alive runs with one socket per connection, and keepalive=false with one per call', () => {
    expect(socketCountCheck(fixedRate, fixture('http-fixed-rate'))).toEqual([]);
    expect(
      socketCountCheck({ mode: 'new-connection', connections: 16 }, fixture('http-no-keepalive')),
    ).toEqual([]);
    expect(socketCountCheck({ mode: 'grpc', connections: 16 }, fixture('grpc-ping'))).toEqual([]);
  });

  it('fails connections re-opened mid-run under keep-alive', () => {
    expect(socketCountCheck(fixedRate, fixture('http-non-200'))).toEqual([
      'SocketCount 18 is not the 16 connections: with keep-alive 2 connection(s) were re-opened mid-run (closed by the server or a proxy)',
    ]);
  });

  it('fails the wrong keep-alive setting, reused sockets and fewer connections than planned', () => {
    expect(socketCountCheck({ mode: 'new-connection', connections: 16 }, fixture('http-fixed-rate'))).toEqual(
      [
        'fortio ran with DisableKeepAlive false, but the new-connection run needs keep-alive off (-keepalive=false)',
      ],
    );
    const reused = changed('http-no-keepalive', { SocketCount: 400 });
    expect(socketCountCheck({ mode: 'new-connection', connections: 16 }, reused)).toEqual([
      'SocketCount 400 is below the 992 calls of a -keepalive=false run: connections were reused, so this is not new-connection latency',
    ]);
    expect(socketCountCheck({ ...fixedRate, connections: 32 }, fixture('http-fixed-rate'))[0]).toBe(
      'fortio ran 16 connections (NumThreads), not the planned -c 32',
    );
  });
});

const pod = (
  name: string,
  namespace: string,
  hasSidecar: boolean,
  node = 'ip-10-0-1-23',
): PodMeshEvidence => ({
  pod: name,
  namespace,
  node,
  hasSidecar,
});

describe('sidecarCheck', () => {
  const meshPods = [pod('fortio-client-x', 'mesh', true), pod('fortio-server-0', 'mesh', true)];
  const plainPods = [pod('fortio-client-y', 'plain', false), pod('fortio-server-1', 'plain', false)];

  it('passes sidecars on mesh arms and none on plain arms, on the cell node', () => {
    expect(sidecarCheck('mesh-mtls', 'sidecar', meshPods, 'ip-10-0-1-23')).toEqual([]);
    expect(sidecarCheck('plain', 'sidecar', plainPods, 'ip-10-0-1-23')).toEqual([]);
    expect(sidecarCheck(undefined, 'none', plainPods, 'ip-10-0-1-23')).toEqual([]);
  });

  it('fails a mesh pod without the sidecar and a plain pod with one', () => {
    expect(
      sidecarCheck(
        'mesh-mtls',
        'sidecar',
        [meshPods[0], pod('fortio-server-0', 'mesh', false)],
        'ip-10-0-1-23',
      ),
    ).toEqual([
      'pod mesh/fortio-server-0 of the mesh-mtls arm has no istio-proxy native sidecar (was it created before the namespace label?)',
    ]);
    expect(sidecarCheck('plain', 'sidecar', [pod('fortio-client-y', 'plain', true)], 'ip-10-0-1-23')).toEqual(
      ['pod plain/fortio-client-y has an istio-proxy sidecar, which the plain arm must not have'],
    );
    expect(sidecarCheck('mesh-mtls', 'ambient', meshPods.slice(0, 1), 'ip-10-0-1-23')).toEqual([
      'pod mesh/fortio-client-x has an istio-proxy sidecar, which the mesh-mtls arm of an ambient cell must not have',
    ]);
  });

  it('fails a pod on another node and a run without pod evidence', () => {
    expect(
      sidecarCheck('plain', 'none', [pod('fortio-client-y', 'plain', false, 'ip-10-0-2-9')], 'ip-10-0-1-23'),
    ).toEqual(["pod plain/fortio-client-y ran on node ip-10-0-2-9, not the cell's node ip-10-0-1-23"]);
    expect(sidecarCheck('plain', 'none', [], 'ip-10-0-1-23')).toEqual([
      'no pod evidence was recorded: sidecars and node placement cannot be checked',
    ]);
  });
});

describe('mtlsEvidenceCheck and mtlsVerdict', () => {
  const calls = 12_496;
  const l4 = (byPolicy: Record<string, number> | undefined, reporter?: 'sidecar' | 'ztunnel') => ({
    requestsBySecurityPolicy: {},
    tcpConnectionsOpened: Object.values(byPolicy ?? {}).reduce((a, b) => a + b, 16),
    ...(byPolicy ? { tcpConnectionsBySecurityPolicy: byPolicy } : {}),
    ...(reporter ? { reporter } : {}),
  });

  it('proves mutual_tls growth for mTLS-on arms, none for mTLS-off, mutual_tls connections for L4', () => {
    const mtls = { requestsBySecurityPolicy: { mutual_tls: calls + 16 }, tcpConnectionsOpened: 16 };
    expect(mtlsVerdict('mesh-mtls', 'sidecar', mtls, calls)).toEqual({ proof: 'proven', reasons: [] });
    expect(mtlsEvidenceCheck('mesh-l7', 'sidecar', mtls, calls)).toEqual([]);
    const off = { requestsBySecurityPolicy: { none: calls + 16 }, tcpConnectionsOpened: 16 };
    expect(mtlsEvidenceCheck('mesh-mtls-off', 'sidecar', off, calls)).toEqual([]);
    expect(mtlsVerdict('mesh-l4', 'sidecar', l4({ mutual_tls: 16 }), calls)).toEqual({
      proof: 'proven',
      reasons: [],
    });
    expect(mtlsVerdict('plain', 'sidecar', undefined, calls)).toBeUndefined();
    expect(mtlsVerdict('mesh-mtls', 'none', undefined, calls)).toBeUndefined();
  });

  it('an L4 arm is unproven without the policy label or without mutual_tls connections, contradicted by plaintext ones', () => {
    // A connection count alone (older records, or a counter without the label) proves nothing.
    const bare = mtlsVerdict('mesh-l4', 'sidecar', l4(undefined), calls);
    expect(bare?.proof).toBe('unproven');
    expect(bare?.reasons).toEqual([
      "mTLS unproven: istio_tcp_connections_opened_total was recorded without its connection_security_policy, so the mesh-l4 run's connections may have been plaintext",
    ]);
    expect(mtlsVerdict('mesh-l4', 'sidecar', l4({ '(no label)': 16 }), calls)).toEqual({
      proof: 'unproven',
      reasons: [
        'mTLS unproven: istio_tcp_connections_opened_total{connection_security_policy="mutual_tls"} did not grow over the mesh-l4 run (32 connections counted in all)',
      ],
    });
    expect(mtlsVerdict('mesh-l4', 'sidecar', l4({ none: 16 }), calls)).toEqual({
      proof: 'contradicted',
      reasons: [
        'istio_tcp_connections_opened_total grew by 16 under connection_security_policy="none" (and 0 under mutual_tls) over the mesh-l4 run: its connections were not all mutual TLS',
      ],
    });
    // One stray plaintext connection beside a thousand mTLS ones is within the tolerance.
    expect(mtlsVerdict('mesh-l4', 'sidecar', l4({ mutual_tls: 1000, none: 1 }), calls)?.proof).toBe('proven');
  });

  it("ambient: ztunnel's mutual_tls connections prove every arm; its unknown (a plaintext passthrough) contradicts", () => {
    expect(mtlsVerdict('mesh-mtls', 'ambient', l4({ mutual_tls: 16 }, 'ztunnel'), calls)?.proof).toBe(
      'proven',
    );
    const passthrough = mtlsVerdict('mesh-mtls', 'ambient', l4({ unknown: 16 }, 'ztunnel'), calls);
    expect(passthrough?.proof).toBe('contradicted');
    expect(passthrough?.reasons[0]).toContain(
      "istio_tcp_connections_opened_total (ztunnel's) grew by 16 under",
    );
    // A sidecar's unknown is the source side's label, not plaintext: no proof, no contradiction.
    expect(mtlsVerdict('mesh-l4', 'sidecar', l4({ unknown: 16 }), calls)?.proof).toBe('unproven');
    expect(mtlsVerdict('mesh-mtls', 'ambient', undefined, calls)).toEqual({
      proof: 'unproven',
      reasons: ['mTLS unproven: no Istio metric evidence was recorded for the mesh-mtls arm'],
    });
  });

  it('contradicts plaintext on an mTLS-on arm and mTLS on an mTLS-off arm', () => {
    const plaintext = { requestsBySecurityPolicy: { none: calls + 16 }, tcpConnectionsOpened: 16 };
    expect(mtlsVerdict('mesh-mtls', 'sidecar', plaintext, calls)).toEqual({
      proof: 'contradicted',
      reasons: [
        'istio_requests_total{connection_security_policy="none"} grew by 12512 over the mesh-mtls run, which must carry none: its traffic was not mutual TLS as configured',
      ],
    });
    const encrypted = { requestsBySecurityPolicy: { mutual_tls: calls + 16 }, tcpConnectionsOpened: 16 };
    expect(mtlsEvidenceCheck('mesh-mtls-off', 'sidecar', encrypted, calls)[0]).toBe(
      'istio_requests_total{connection_security_policy="mutual_tls"} grew by 12512 over the mesh-mtls-off run, which must carry none: its traffic was not plaintext as configured',
    );
  });

  it('a one-request run (a download) whose request the sidecar did not count is unproven', () => {
    const one = { requestsBySecurityPolicy: { mutual_tls: 1 }, tcpConnectionsOpened: 1 };
    expect(mtlsEvidenceCheck('mesh-mtls', 'sidecar', one, 1)).toEqual([]);
    expect(
      mtlsEvidenceCheck('mesh-mtls', 'sidecar', { requestsBySecurityPolicy: {}, tcpConnectionsOpened: 1 }, 1),
    ).toEqual([
      'mTLS unproven: istio_requests_total{connection_security_policy="mutual_tls"} grew by 0, not by the run\'s 1 call',
    ]);
  });

  it('fails an L4 arm whose sidecar parsed HTTP, and missing evidence', () => {
    const parsed = {
      requestsBySecurityPolicy: { mutual_tls: calls },
      tcpConnectionsOpened: 16,
      tcpConnectionsBySecurityPolicy: { mutual_tls: 16 },
    };
    expect(mtlsEvidenceCheck('mesh-l4', 'sidecar', parsed, calls)).toEqual([
      'istio_requests_total grew by 12496 over the L4 run: the sidecar parsed HTTP on the tcp- port, so this is not an L4 relay',
    ]);
    expect(mtlsEvidenceCheck('mesh-mtls', 'sidecar', undefined, calls)).toEqual([
      'mTLS unproven: no Istio metric evidence was recorded for the mesh-mtls arm',
    ]);
  });
});

const strictCase = {
  id: 'strict-out-of-mesh',
  expected: { httpCode: '000', curlExit: 56 },
  observed: { httpCode: '000', curlExit: 56 },
};
const matrixSpec: MtlsRunSpec = {
  kind: 'mtls',
  cases: [
    {
      id: 'strict-out-of-mesh',
      title: 'STRICT, out-of-mesh plaintext client',
      clientNamespace: 'plain',
      serviceAccount: 'default',
      inMesh: false,
      url: 'http://fortio-server.mesh:8080/echo',
      expected: { httpCode: '000', curlExit: 56 },
    },
  ],
};

describe('mtlsMatrixCheck and mtlsMatrixCompleteCheck', () => {
  it('passes observed outcomes equal to the expected ones', () => {
    expect(mtlsMatrixCheck([strictCase])).toEqual([]);
    expect(mtlsMatrixCompleteCheck(matrixSpec, [strictCase])).toEqual([]);
  });

  it('finds a deviation: STRICT answered 403 instead of dropping the connection', () => {
    const deviation: MtlsCaseResult = { ...strictCase, observed: { httpCode: '403', curlExit: 0 } };
    expect(mtlsMatrixCheck([deviation])).toEqual([
      'mTLS case strict-out-of-mesh: expected HTTP 000 with curl exit 56, observed HTTP 403 with curl exit 0',
    ]);
  });

  it('fails a case that was not observed or has no result', () => {
    expect(mtlsMatrixCompleteCheck(matrixSpec, [{ ...strictCase, observed: null }])).toEqual([
      'mTLS case strict-out-of-mesh was not observed (its curl did not run)',
    ]);
    expect(mtlsMatrixCompleteCheck(matrixSpec, [])).toEqual(['mTLS case strict-out-of-mesh has no result']);
  });
});

describe('downloadCheck and sseCheck', () => {
  const spec = {
    kind: 'download',
    arm: 'plain',
    clientNamespace: 'plain',
    url: 'u',
    bytes: 104_857_600,
  } as const;
  const download = {
    httpCode: '200',
    curlExit: 0,
    sizeDownloadBytes: 104_857_600,
    speedDownloadBytesPerSecond: 1.2e9,
    timeTotalSeconds: 0.087,
  };
  it('passes a complete 200 download and fails a truncated one', () => {
    expect(downloadCheck(spec, download)).toEqual([]);
    expect(downloadCheck(spec, { ...download, curlExit: 18, sizeDownloadBytes: 52_000_000 })).toEqual([
      'the download ended with HTTP 200 and curl exit 18, not 200 and 0',
      'the download delivered 52000000 bytes, not the planned 104857600',
    ]);
  });

  const sseSpec = {
    kind: 'sse',
    arm: 'plain',
    clientNamespace: 'plain',
    url: 'u',
    events: 200,
    intervalMs: 20,
  } as const;
  const gaps = { count: 199, minMs: 19.1, meanMs: 20, p50Ms: 20, p90Ms: 20.4, p99Ms: 21.2, maxMs: 22 };
  const sse = {
    probe: 'sse-client' as const,
    url: 'u',
    status: 200,
    events: 200,
    expectedEvents: 200,
    connectMs: 0.3,
    firstEventMs: 1.1,
    durationMs: 3990,
    gaps,
    errors: [],
  };
  it('passes a full SSE stream and fails a cut-off one', () => {
    expect(sseCheck(sseSpec, sse)).toEqual([]);
    expect(sseCheck(sseSpec, { ...sse, events: 120, errors: ['received 120 of 200 events'] })).toEqual([
      'the SSE client received 120 of 200 events',
      'SSE client: received 120 of 200 events',
    ]);
  });
});

describe('datapathCheck', () => {
  const cilium: DatapathEvidence = {
    kubeProxyReplacement: true,
    kubeSvcChains: 0,
    nftKubeProxyTable: false,
    ipvsServices: 0,
  };
  const iptables: DatapathEvidence = {
    kubeProxyReplacement: null,
    kubeSvcChains: 4,
    nftKubeProxyTable: false,
    ipvsServices: 0,
  };

  it('passes Cilium with the replacement and no kube-proxy rules, and each kube-proxy mode with its tables', () => {
    expect(datapathCheck('cilium', cilium)).toEqual([]);
    expect(datapathCheck('iptables', iptables)).toEqual([]);
    expect(datapathCheck('nftables', { ...iptables, kubeSvcChains: 0, nftKubeProxyTable: true })).toEqual([]);
    expect(datapathCheck('ipvs', { ...iptables, kubeSvcChains: 0, ipvsServices: 3 })).toEqual([]);
  });

  it('fails Cilium without the replacement or with kube-proxy rules beside it', () => {
    expect(
      datapathCheck('cilium', {
        ...cilium,
        kubeProxyReplacement: false,
        kubeSvcChains: 4,
        nftKubeProxyTable: true,
      }),
    ).toEqual([
      'cilium-dbg status reports KubeProxyReplacement false, not true',
      'iptables-save shows 4 KUBE-SVC chains on a Cilium cell: kube-proxy is running',
      'the kube-proxy nft table exists on a Cilium cell: kube-proxy is running',
    ]);
  });

  it('fails a kube-proxy cell whose mode tables are missing, and a cell never verified', () => {
    expect(datapathCheck('nftables', iptables)).toEqual([
      'no kube-proxy nft table on an nftables cell: kube-proxy is not in nftables mode',
    ]);
    expect(datapathCheck('iptables', { ...iptables, kubeSvcChains: 0 })).toEqual([
      'no KUBE-SVC chains in iptables-save on an iptables cell: kube-proxy is not in iptables mode',
    ]);
    expect(datapathCheck('ipvs', iptables)).toEqual([
      'ipvsadm -Ln lists no virtual services on an ipvs cell: kube-proxy is not in ipvs mode',
    ]);
    expect(datapathCheck('iptables', undefined)).toEqual([
      'the iptables datapath was not verified on the host (no datapath evidence)',
    ]);
  });
});

/** Prober-first samples connected after the given latencies (ms): probing since before the Service. */
function samples(latencies: readonly number[]): ProbeSample[] {
  return latencies.map((latencyMs) => ({
    target: '10.43.0.12:80',
    connected: true,
    latencyMs,
    firstAttemptAfterMs: 7.5,
    attempts: 203,
    attemptsAfterStart: 3,
    resolutionMs: 0.4,
    timeoutStepMs: 20.2,
    refused: 2,
    timedOut: 200,
    otherErrors: {},
  }));
}

/** One E9 step at 1,000 Services, and prober latencies (ms) with no relation to its 20 ms step. */
const scaleSpec: ServiceScaleRunSpec = {
  kind: 'service-scale',
  services: 1000,
  samples: 20,
  attemptTimeoutMs: 20,
  createConcurrency: 50,
  backendsPerService: 1,
};
const spread = [
  3.1, 5.7, 8.2, 11.9, 4.4, 6.3, 9.8, 13.1, 7.7, 2.9, 15.4, 6.6, 10.2, 8.8, 5.1, 12.6, 7.2, 9.1, 4.9, 6.0,
];

describe('serviceScaleCheck', () => {
  const spec = scaleSpec;
  const scale: ServiceScaleResult = {
    servicesReady: 1000,
    entries: 2003,
    entriesCommand: 'cilium-dbg bpf lb list',
    lbMapFull: false,
    prober: proberResult(20, 10_000, samples(spread)),
  };
  const earlier = [
    { services: 0, entries: 3 },
    { services: 100, entries: 203 },
  ];

  it('passes a step with every Service ready, growing entries and unquantized samples', () => {
    expect(serviceScaleCheck(spec, scale, earlier, 'cilium', 65_536)).toEqual([]);
  });

  it('fails a pod-start measurement (first-attempt connects) and samples of the old order without a start', () => {
    const podStart = samples(spread).map((sample) => ({
      ...sample,
      latencyMs: 4_000 + (sample.latencyMs ?? 0),
      firstAttemptAfterMs: 4_000,
      attempts: 1,
      attemptsAfterStart: 1,
      timedOut: 0,
      refused: 0,
      timeoutStepMs: null,
    }));
    const reasons = serviceScaleCheck(
      spec,
      { ...scale, prober: proberResult(20, 10_000, podStart) },
      earlier,
      'cilium',
      65_536,
    );
    expect(reasons[0]).toBe(
      "E9 method: 20 of 20 samples connected on the prober's first attempt: the prober started after the Service was programmed, so the samples time the prober's start, not the datapath",
    );
    const oldOrder = samples(spread).map(
      ({ attemptsAfterStart: _a, resolutionMs: _r, timeoutStepMs: _t, ...old }) => old,
    );
    expect(
      serviceScaleCheck(
        spec,
        { ...scale, prober: proberResult(20, 10_000, oldOrder) },
        earlier,
        'cilium',
        65_536,
      ),
    ).toEqual([
      "the prober's samples were timed from before the prober ran (Services created first): they include the prober's start, not only the datapath",
    ]);
  });

  it('fails Services not ready, entries that did not grow, and an LB map near full', () => {
    const bad = { ...scale, servicesReady: 940, entries: 203, lbMapFull: true };
    expect(serviceScaleCheck(spec, bad, earlier, 'cilium', 150)).toEqual([
      '940 of 1000 Services had a ready endpoint when measuring',
      'entries did not grow with the Services: 203 at 1000 Services, 203 at 100 (cilium-dbg bpf lb list)',
      '203 LB map entries reach bpf.lbMapMax 150: the map is full',
      'the Cilium agent logged "map full" during the step',
    ]);
    expect(serviceScaleCheck(spec, { ...scale, lbMapFull: undefined }, [], 'cilium', 65_536)).toEqual([
      'the Cilium agent\'s log was not checked for "map full"',
    ]);
  });

  it('fails samples that never connected and a missing prober result', () => {
    const failed = samples(spread).map((sample, index) =>
      index < 2 ? { ...sample, connected: false, latencyMs: null } : sample,
    );
    expect(
      serviceScaleCheck(spec, { ...scale, prober: proberResult(20, 10_000, failed) }, [], 'iptables', 0),
    ).toEqual(['2 of 20 prober samples never connected within 10000 ms']);
    expect(serviceScaleCheck(spec, { ...scale, prober: null }, [], 'iptables', 0)).toEqual([
      'the service prober left no result',
    ]);
  });
});

describe('conntrackCheck', () => {
  const spec: ConntrackRunSpec = {
    kind: 'conntrack',
    limit: 2048,
    connections: 4000,
    connectTimeoutSeconds: 5,
    baselineMax: 500,
  };
  const driver = {
    probe: 'conntrack-driver' as const,
    target: '127.0.0.1:40123',
    connections: 4000,
    connectTimeoutMs: 5000,
    holdMs: 2000,
    succeeded: 1801,
    failed: 2199,
    failures: { timeout: 2199 },
    connect: null,
    droppedDuringHold: 0,
    issuedInMs: 180,
    openFilesLimit: 1_048_576,
  };
  const result: ConntrackResult = {
    limitBefore: 262_144,
    limit: 2048,
    baseline: 231,
    limitAfterRestore: 262_144,
    driver,
  };

  it('passes a step whose successes are about limit - baseline and whose limit was restored', () => {
    // 2048 - 231 = 1817 expected; 1801 is within the tolerance of 182.
    expect(conntrackCheck(spec, result)).toEqual([]);
    const atDefault = {
      ...result,
      limit: 262_144,
      driver: { ...driver, succeeded: 4000, failed: 0, failures: {} },
    };
    expect(conntrackCheck({ ...spec, limit: 'default' }, atDefault)).toEqual([]);
  });

  it('fails a high baseline, a limit not restored and successes far from limit - baseline', () => {
    const bad = { ...result, baseline: 620, limitAfterRestore: 2048, driver: { ...driver, succeeded: 3100 } };
    expect(conntrackCheck(spec, bad)).toEqual([
      '620 conntrack entries existed when the step started, not fewer than 500',
      'nf_conntrack_max is 2048 after the step, not restored to 262144',
      '3100 of 4000 connections succeeded, expected about 1428 (limit 2048 - baseline 620, capped at the connections; allowed +-143)',
    ]);
  });

  it('fails failures of the driver itself, an unconfirmed restore and the wrong limit', () => {
    const emfile = { ...driver, failures: { timeout: 1175, emfile: 1024 } };
    expect(conntrackCheck(spec, { ...result, limit: 4096, limitAfterRestore: null, driver: emfile })).toEqual(
      [
        'nf_conntrack_max was 4096 during the step, not the planned 2048',
        'nf_conntrack_max was not read back after the step: the restore to 262144 is unconfirmed',
        '1024 connections failed with emfile, a limit of the driver (open files 1048576) or of local ports, not of conntrack',
        '1801 of 4000 connections succeeded, expected about 3865 (limit 4096 - baseline 231, capped at the connections; allowed +-387)',
      ],
    );
  });
});

const host: CellHostFacts = {
  instanceType: 'c7i.2xlarge',
  availabilityZone: 'eu-west-1a',
  kernel: '6.8.0-1021-aws',
  cpuFlags: ['aes', 'vaes'],
  versions: { k3s: 'v1.36.4+k3s1', fortio: '1.75.2', netshoot: 'v0.16', istio: '1.31.1' },
};

describe('hostFactsCheck', () => {
  it('passes a host with every fact and version recorded', () => {
    expect(hostFactsCheck(host, ['k3s', 'fortio', 'netshoot', 'istio'])).toEqual([]);
  });

  it('fails missing facts and versions', () => {
    expect(
      hostFactsCheck({ ...host, kernel: '', versions: { k3s: 'v1.36.4+k3s1' } }, ['k3s', 'fortio', 'istio']),
    ).toEqual(["the host's kernel was not recorded", 'no version recorded for fortio, istio']);
    expect(hostFactsCheck(undefined, ['k3s'])).toEqual([
      'the host facts (instance type, AZ, kernel, CPU flags, versions) were not recorded',
    ]);
  });
});

describe('repeatSpreadCheck', () => {
  it('passes repeats within 3% of their mean', () => {
    expect(
      repeatSpreadCheck('E1 plain', [
        { id: 'e1-plain-r1', meanMs: 0.428 },
        { id: 'e1-plain-r2', meanMs: 0.431 },
        { id: 'e1-plain-r3', meanMs: 0.425 },
      ]).size,
    ).toBe(0);
  });

  it('flags a repeat outside +-3%', () => {
    const flags = repeatSpreadCheck('E1 plain', [
      { id: 'e1-plain-r1', meanMs: 0.428 },
      { id: 'e1-plain-r2', meanMs: 0.431 },
      { id: 'e1-plain-r3', meanMs: 0.49 },
    ]);
    expect([...flags]).toEqual([
      [
        'e1-plain-r1',
        "repeat spread: e1-plain-r1 mean 0.428 ms is 4.8% below the 3 repeats' mean 0.450 ms of E1 plain (allowed +-3.0%)",
      ],
      [
        'e1-plain-r2',
        "repeat spread: e1-plain-r2 mean 0.431 ms is 4.2% below the 3 repeats' mean 0.450 ms of E1 plain (allowed +-3.0%)",
      ],
      [
        'e1-plain-r3',
        "repeat spread: e1-plain-r3 mean 0.490 ms is 9.0% above the 3 repeats' mean 0.450 ms of E1 plain (allowed +-3.0%)",
      ],
    ]);
  });
});

// ---- judgeNetworkRun and judgeRepeats ---------------------------------------------------------

const config: NetworkJudgeConfig = {
  datapath: 'iptables',
  mesh: 'sidecar',
  node: 'ip-10-0-1-23',
  lbMapMax: 65_536,
  requiredVersions: ['k3s', 'fortio', 'netshoot', 'istio'],
  resolutionSeconds: 0.00001,
  connections: 16,
};
const datapath: DatapathEvidence = {
  kubeProxyReplacement: null,
  kubeSvcChains: 12,
  nftKubeProxyTable: false,
  ipvsServices: 0,
};
const run = (id: string, spec: NetworkRun['spec'], repeat?: number): NetworkRun => ({
  id,
  cell: 'mesh',
  experiment: 'E1',
  title: id,
  ...(repeat === undefined ? {} : { repeat }),
  spec,
  preconditions: [],
});
const plainPods = [pod('fortio-client-a', 'plain', false), pod('fortio-server-0', 'plain', false)];
const evidence = (raw: string, pods = plainPods): NetworkRunEvidence => ({
  job: 'succeeded',
  result: { kind: 'fortio', raw },
  pods,
  host,
  datapath,
});

describe('judgeNetworkRun', () => {
  it('passes a clean plain fixed-rate run', () => {
    expect(
      judgeNetworkRun(run('e1-plain-r1', fixedRate), evidence(fortioFixture('http-fixed-rate')), config),
    ).toEqual({
      valid: true,
      invalidReasons: [],
      flags: [],
    });
  });

  it('marks the 1 ms resolution run invalid with its reasons', () => {
    const judgment = judgeNetworkRun(
      run('c-r1', fixedRate),
      evidence(fortioFixture('http-resolution-1ms')),
      config,
    );
    expect(judgment.valid).toBe(false);
    expect(judgment.invalidReasons[0]).toBe(
      'fortio ran with -r 0.001 s (Resolution), not the planned -r 0.00001 s',
    );
    expect(judgment.invalidReasons).toContain(
      '-r 0.001 s is more than a tenth of the measured p50 0.589 ms: use -r 0.000059 s or finer',
    );
  });

  it('joins the runner findings, the Job, the pods, the mTLS evidence, the datapath and the host', () => {
    const meshSpec: FortioRunSpec = { ...fixedRate, arm: 'mesh-mtls', clientNamespace: 'mesh' };
    const judgment = judgeNetworkRun(
      run('e1-mesh-mtls-r1', meshSpec),
      {
        ...evidence(fortioFixture('http-fixed-rate'), [pod('fortio-client-b', 'mesh', false)]),
        job: 'failed',
        datapath: undefined,
        host: { ...host, versions: {} },
        runnerReasons: ['precondition pods-restarted-after-label (mesh) not met'],
      },
      config,
    );
    expect(judgment.invalidReasons).toEqual([
      'precondition pods-restarted-after-label (mesh) not met',
      "the run's Job failed (status.failed > 0)",
      'mTLS unproven: no Istio metric evidence was recorded for the mesh-mtls arm',
      'pod mesh/fortio-client-b of the mesh-mtls arm has no istio-proxy native sidecar (was it created before the namespace label?)',
      'the iptables datapath was not verified on the host (no datapath evidence)',
      'no version recorded for k3s, fortio, netshoot, istio',
    ]);
    // The record carries the verdict: the report shows this run as "mTLS unproven".
    expect(judgment.mtlsProof).toBe('unproven');
  });

  it('fails a run without a result, and one whose result is of another kind', () => {
    const none = judgeNetworkRun(
      run('e1-plain-r1', fixedRate),
      { job: 'failed', pods: [], runnerReasons: ['precondition conntrack-baseline-below (500) not met'] },
      config,
    );
    expect(none).toEqual({
      valid: false,
      invalidReasons: [
        'precondition conntrack-baseline-below (500) not met',
        "the run's Job failed (status.failed > 0)",
        'the run left no result',
      ],
      flags: [],
    });
    const other = judgeNetworkRun(
      run('e1-plain-r1', fixedRate),
      { ...evidence(''), result: { kind: 'conntrack', conntrack: {} as ConntrackResult } },
      config,
    );
    expect(other.invalidReasons).toEqual(['the run is a fortio run but its result is a conntrack result']);
  });

  it('judges download and conntrack runs by their own checks', () => {
    const downloadSpec = {
      kind: 'download',
      arm: 'mesh-mtls',
      clientNamespace: 'mesh',
      url: 'http://fortio-server.mesh:8080/echo?size=104857600',
      bytes: 104_857_600,
    } as const;
    const download = judgeNetworkRun(
      { ...run('e6-mesh-mtls-r1', downloadSpec), experiment: 'E6' },
      {
        job: 'succeeded',
        result: {
          kind: 'download',
          download: {
            httpCode: '200',
            curlExit: 0,
            sizeDownloadBytes: 104_857_600,
            speedDownloadBytesPerSecond: 4.1e8,
            timeTotalSeconds: 0.26,
          },
        },
        pods: [pod('curl-e6', 'mesh', true), pod('fortio-server-0', 'mesh', true)],
        mtlsMetrics: { requestsBySecurityPolicy: { none: 1 }, tcpConnectionsOpened: 1 },
        host,
        datapath,
      },
      config,
    );
    expect(download.invalidReasons).toEqual([
      'istio_requests_total{connection_security_policy="none"} grew by 1 over the mesh-mtls run, which must carry none: its traffic was not mutual TLS as configured',
    ]);
    const conntrackSpec: ConntrackRunSpec = {
      kind: 'conntrack',
      limit: 1024,
      connections: 4000,
      connectTimeoutSeconds: 5,
      baselineMax: 500,
    };
    const conntrack = judgeNetworkRun(
      { ...run('e10-limit-1024', conntrackSpec), experiment: 'E10' },
      {
        job: 'succeeded',
        result: {
          kind: 'conntrack',
          conntrack: { limitBefore: 2048, limit: 1024, baseline: 180, limitAfterRestore: 2048, driver: null },
        },
        pods: [pod('conntrack-driver', 'probe', false)],
        host,
        datapath,
      },
      config,
    );
    expect(conntrack.invalidReasons).toEqual(['the conntrack driver left no result']);
  });

  it('flags an mTLS matrix deviation without invalidating the run', () => {
    const judgment = judgeNetworkRun(
      { ...run('e2-matrix', matrixSpec), experiment: 'E2' },
      {
        job: 'succeeded',
        result: { kind: 'mtls', cases: [{ ...strictCase, observed: { httpCode: '403', curlExit: 0 } }] },
        pods: [pod('curl-strict-out-of-mesh', 'plain', false)],
        host,
        datapath,
      },
      config,
    );
    expect(judgment).toEqual({
      valid: true,
      invalidReasons: [],
      flags: [
        'mTLS case strict-out-of-mesh: expected HTTP 000 with curl exit 56, observed HTTP 403 with curl exit 0',
      ],
    });
  });

  it("checks an E9 step against the cell's earlier steps and its new-connection run", () => {
    const earlier = {
      id: 'e9-services-100',
      valid: true,
      result: {
        kind: 'service-scale',
        scale: {
          servicesReady: 100,
          entries: 5200,
          entriesCommand: 'iptables-save -t nat | wc -l',
          prober: null,
        },
      },
    } as unknown as NetworkRunRecord;
    const judgment = judgeNetworkRun(
      { ...run('e9-services-1000', scaleSpec), experiment: 'E9' },
      {
        job: 'succeeded',
        result: {
          kind: 'service-scale',
          scale: {
            servicesReady: 1000,
            entries: 5100,
            entriesCommand: 'iptables-save -t nat | wc -l',
            prober: proberResult(20, 10_000, samples(spread.slice(0, 10))),
            newConnection: fortioFixture('http-fixed-rate'),
          },
        },
        pods: [pod('service-prober', 'probe', false)],
        host,
        datapath,
        earlier: [earlier],
      },
      config,
    );
    expect(judgment.invalidReasons).toEqual([
      'entries did not grow with the Services: 5100 at 1000 Services, 5200 at 100 (iptables-save -t nat | wc -l)',
      'new-connection run: fortio ran with DisableKeepAlive false, but the new-connection run needs keep-alive off (-keepalive=false)',
    ]);
  });
});

describe('judgeRepeats', () => {
  /** A record of repeat `repeat` of the plan's repeat group `e1-plain`-style: its id without `-rN`. */
  const record = (id: string, repeat: number, raw: string, valid = true): NetworkRunRecord => ({
    ...run(id, fixedRate, repeat),
    repeatGroup: id.replace(/-r\d+$/, ''),
    startedAt: '2026-11-30T10:00:00Z',
    finishedAt: '2026-11-30T10:00:26Z',
    job: 'succeeded',
    result: { kind: 'fortio', raw },
    pods: plainPods,
    valid,
    invalidReasons: valid ? [] : ['x'],
    flags: ['repeat spread: an old verdict'],
  });
  const withAvg = (avg: number) => {
    const json = JSON.parse(fortioFixture('http-fixed-rate'));
    json.DurationHistogram.Avg = avg;
    return JSON.stringify(json);
  };

  it("replaces earlier spread flags with the current verdict on the arm's valid repeats", () => {
    const records = [
      record('e1-plain-r1', 1, withAvg(0.000428)),
      record('e1-plain-r2', 2, withAvg(0.00043)),
      record('e1-plain-r3', 3, withAvg(0.000502)),
      record('e1-plain-r4', 4, withAvg(0.0009), false),
    ];
    const judged = judgeRepeats(records);
    expect(judged.map((r) => r.flags)).toEqual([
      [
        expect.stringMatching(
          /^repeat spread: e1-plain-r1 mean 0.428 ms is 5.6% below the 3 repeats' mean 0.453 ms of E1 plain fixed-rate/,
        ),
      ],
      [expect.stringMatching(/^repeat spread: e1-plain-r2 mean 0.430 ms is 5.1% below/)],
      [expect.stringMatching(/^repeat spread: e1-plain-r3 mean 0.502 ms is 10.7% above/)],
      [],
    ]);
    expect(judged.every((r, i) => r.valid === records[i].valid)).toBe(true);
  });

  it("does not compare E9's new-connection runs across Service counts: the plan marks no repeat", () => {
    // Same experiment, arm and mode (E9 plain new-connection), different steps: 0.43 ms against 0.9 ms.
    const step = (services: number, avg: number): NetworkRunRecord => ({
      ...record(`e9-new-connection-${services}`, 1, withAvg(avg)),
      experiment: 'E9',
      spec: { ...fixedRate, mode: 'new-connection' },
      repeat: undefined,
      repeatGroup: undefined,
      flags: [],
    });
    const judged = judgeRepeats([step(0, 0.00043), step(1000, 0.0009), step(5000, 0.0009)]);
    expect(judged.map((r) => r.flags)).toEqual([[], [], []]);
  });

  it('compares each repeat group on its own, even when groups share experiment, arm and mode', () => {
    // Two repeated runs of one arm at different loads (a variant of the plan): each group agrees
    // within itself, so nothing is flagged; judged together they would spread by about 35%.
    const light = (n: number, avg: number) => ({
      ...record(`e1-light-plain-r${n}`, n, withAvg(avg)),
      spec: { ...fixedRate, qps: 100 },
    });
    const heavy = (n: number, avg: number) => record(`e1-plain-r${n}`, n, withAvg(avg));
    const judged = judgeRepeats([light(1, 0.0003), heavy(1, 0.0006), light(2, 0.000301), heavy(2, 0.000602)]);
    expect(judged.map((r) => r.flags)).toEqual([[], [], [], []]);
    // A spread inside one group is still flagged, and names the group.
    const spread = judgeRepeats([light(1, 0.0003), heavy(1, 0.0006), light(2, 0.00036), heavy(2, 0.000602)]);
    expect(spread.map((r) => r.flags?.length)).toEqual([1, 0, 1, 0]);
    expect(spread[0].flags?.[0]).toMatch(
      /^repeat spread: e1-light-plain-r1 mean 0.300 ms is 9.1% below the 2 repeats' mean 0.330 ms of E1 plain fixed-rate \(repeats of e1-light-plain\)/,
    );
  });

  it('leaves no flag when the repeats agree', () => {
    const judged = judgeRepeats([
      record('e1-plain-r1', 1, withAvg(0.000428)),
      record('e1-plain-r2', 2, withAvg(0.00043)),
    ]);
    expect(judged.map((r) => r.flags)).toEqual([[], []]);
  });
});
