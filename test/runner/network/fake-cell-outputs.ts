import type { ConntrackDriverResult } from '../../../lib/network/probes/conntrack-driver.ts';
import type { SseClientResult } from '../../../lib/network/probes/sse.ts';
import { msDistribution } from '../../../lib/network/probes/stats.ts';
import type { JobObject } from '../../../lib/runner/ports.ts';
import type { FakeCell } from './fake-cell.ts';
import {
  CONTENTION_PER_POD,
  coarseHistogram,
  flag,
  latencyHistogram,
  SLOW_FORTIO_FACTOR,
  unit,
} from './fake-cell-physics.ts';
import { countServed, serverFor } from './fake-mesh.ts';

/**
 * What the fake cell's client and host Jobs write, as the real tools would: fortio's JSON, curl's
 * write-out, the lab's SSE client and conntrack driver, and the host scripts' lines.
 */

/** fortio's JSON result: Little's law at saturation, sub-millisecond pod-to-pod latencies. */
export function fortioOutput(cell: FakeCell, job: JobObject, args: string[]): string {
  const url = args[args.length - 1];
  const c = Number(flag(args, '-c'));
  const qps = Number(flag(args, '-qps'));
  const seconds = Number((flag(args, '-t') ?? '0s').replace('s', ''));
  const grpc = args.includes('-grpc');
  const keepalive = !args.includes('-keepalive=false');
  const mesh = job.metadata.namespace === 'mesh';
  const server = serverFor(cell, url, job.metadata.namespace);
  let baseMs = grpc ? 0.25 : 0.18;
  if (mesh)
    baseMs = server?.app === 'fortio-permissive' ? 0.55 : url.includes(':8082') ? 0.38 : grpc ? 0.71 : 0.62;
  if (!keepalive) baseMs += 0.09 + (cell.cell.datapath === 'cilium' ? 0 : cell.scaleServices() * 0.000_004);
  if (cell.slowFortio?.test(job.metadata.name)) baseMs *= SLOW_FORTIO_FACTOR;
  baseMs *= 1 + CONTENTION_PER_POD * cell.loadingPodsBesides(job);
  const coarse = cell.coarseFortio?.test(job.metadata.name) ?? false;
  const resolution = coarse ? 0.001 : Number(flag(args, '-r'));
  const shape = latencyHistogram(baseMs / 1000, unit(job.metadata.name), 100_000);
  // At saturation the calls follow from Little's law: c connections, each waiting Avg per call.
  const actualQps = qps > 0 ? qps * 0.9996 : c / shape.avg;
  const histogram = coarse
    ? coarseHistogram(Math.round(actualQps * seconds))
    : latencyHistogram(baseMs / 1000, unit(job.metadata.name), Math.round(actualQps * seconds)).histogram;
  const count = histogram.Count;
  countServed(cell, job, url, count, keepalive ? c : count);
  const common = {
    RunType: grpc ? 'GRPC Ping' : 'HTTP',
    Labels: url,
    StartTime: new Date(cell.clock.ms).toISOString(),
    RequestedQPS: qps > 0 ? String(qps) : 'max',
    RequestedDuration: `${seconds}s`,
    ActualQPS: actualQps,
    ActualDuration: seconds * 1e9,
    NumThreads: c,
    Version: '1.75.2',
    DurationHistogram: histogram,
    ErrorsDurationHistogram: { Count: 0, Min: 0, Max: 0, Sum: 0, Avg: 0, StdDev: 0, Data: null },
    Exactly: 0,
    Jitter: false,
    Uniform: false,
    NoCatchUp: false,
  };
  const result = grpc
    ? { ...common, RetCodes: { SERVING: count }, Destination: url, Streams: 1, Ping: true }
    : {
        ...common,
        RetCodes: { '200': count },
        URL: url,
        DisableKeepAlive: !keepalive,
        Resolution: resolution,
        SocketCount: keepalive ? c : count,
        Sockets: Array.from({ length: c }, () => (keepalive ? 1 : Math.round(count / c))),
      };
  return JSON.stringify(result, null, 2);
}

/** curl's write-out: a download, or one mTLS case decided the way Istio would. */
export function curlOutput(cell: FakeCell, job: JobObject, url: string, download: boolean): string {
  const template = (job.spec as { template: { spec: { serviceAccountName?: string } } }).template;
  const pod = [...cell.jobs.values()].find((j) => j.job === job)?.pod;
  const server = serverFor(cell, url, job.metadata.namespace);
  let httpCode = '200';
  let curlExit = 0;
  const fromMesh = pod?.hasSidecar ?? false;
  // The policies of charts/network/mesh-policies.ts: mesh is STRICT but for fortio-permissive's
  // port 8080; mesh-default has no PeerAuthentication, so the mesh default (PERMISSIVE) answers.
  if (server?.namespace === 'mesh' && server.hasSidecar) {
    if (server.app === 'fortio' && !fromMesh) {
      // STRICT: the plaintext connection is dropped, not answered with 403.
      httpCode = '000';
      curlExit = 56;
    } else if (server.app === 'fortio-authz' && template.spec.serviceAccountName !== 'good') {
      httpCode = '403';
    }
  }
  const bytes = download ? Number(/size=(\d+)/.exec(url)?.[1] ?? 0) : httpCode === '200' ? 512 : 0;
  const seconds = download ? (job.metadata.namespace === 'mesh' ? 0.412 : 0.187) : 0.004;
  if (download) countServed(cell, job, url, 1, 1);
  return JSON.stringify({
    httpCode,
    curlExit,
    sizeDownloadBytes: bytes,
    speedDownloadBytesPerSecond: Math.round(bytes / seconds),
    timeTotalSeconds: seconds,
  });
}

export function sseOutput(cell: FakeCell, job: JobObject, command: string[]): SseClientResult {
  const url = flag(command, '--url') ?? '';
  const events = Number(flag(command, '--expect-events'));
  const interval = cell.config.network.experiments.sse.intervalMs;
  const extra = job.metadata.namespace === 'mesh' ? 0.4 : 0.1;
  const gaps = Array.from(
    { length: events - 1 },
    (_, i) => interval + extra * unit(`${job.metadata.name}-${i}`),
  );
  countServed(cell, job, url, 1, 1);
  return {
    probe: 'sse-client',
    url,
    status: 200,
    events,
    expectedEvents: events,
    connectMs: 0.4,
    firstEventMs: 1.2,
    durationMs: interval * events + 2,
    gaps: msDistribution(gaps),
    errors: [],
  };
}

export function conntrackDriverOutput(cell: FakeCell, command: string[]): ConntrackDriverResult {
  const connections = Number(flag(command, '--connections'));
  const timeoutMs = Number(flag(command, '--connect-timeout-ms'));
  // One loopback connection costs about one entry: the rest time out against a full table.
  const room = Math.max(0, cell.conntrackMax - cell.conntrackBaseline - 12);
  const succeeded = Math.min(connections, room);
  const connect = Array.from({ length: Math.min(succeeded, 50) }, (_, i) => 0.05 + 0.01 * (i % 7));
  return {
    probe: 'conntrack-driver',
    target: '127.0.0.1:40123',
    connections,
    connectTimeoutMs: timeoutMs,
    holdMs: 2_000,
    succeeded,
    failed: connections - succeeded,
    failures: connections > succeeded ? { 'connect timeout': connections - succeeded } : {},
    connect: msDistribution(connect),
    droppedDuringHold: 0,
    issuedInMs: 41.7,
    openFilesLimit: 1_048_576,
  };
}

/** What the host scripts of host-output.ts print on this cell; undefined when the Job fails. */
export function hostCommandOutput(cell: FakeCell, script: string): string | undefined {
  const services = cell.allServices() + 3; // kubernetes, kube-dns, metrics-server
  const iptables = cell.cell.datapath === 'iptables';
  // The study's host Job prints the host facts and the datapath's rules together (one pod start).
  const facts = script.includes('uname -r')
    ? 'kernel=6.8.0-1016-aws\ncpuFlags= fpu vme de pse tsc msr pae sse2 ssse3 aes avx avx2 avx512f vaes vpclmulqdq pclmulqdq sha_ni\n'
    : '';
  const rules = script.includes('KUBE-SVC-')
    ? `kubeSvcChains=${iptables ? services : 0}\nnftKubeProxyTable=${cell.cell.datapath === 'nftables'}\nipvsServices=${cell.cell.datapath === 'ipvs' ? services : 0}\n`
    : '';
  if (facts || rules) return facts + rules;
  if (script.includes('cilium-dbg status')) return 'kubeProxyReplacement=True\n';
  if (script.includes('entries=$(')) {
    const entries =
      cell.cell.datapath === 'cilium'
        ? 12 + 2 * services
        : cell.cell.datapath === 'iptables'
          ? 64 + 7 * services
          : 40 + 3 * services;
    return `entries=${entries}\n`;
  }
  const write = /echo (\d+) > \/proc\/sys\/net\/netfilter\/nf_conntrack_max/.exec(script);
  if (write) {
    if (cell.failConntrackWrites > 0) {
      cell.failConntrackWrites--;
      return undefined;
    }
    const before = cell.conntrackMax;
    cell.conntrackMax = Number(write[1]);
    cell.conntrackWrites.push(cell.conntrackMax);
    return `before=${before}\nmax=${cell.conntrackMax}\ncount=${cell.conntrackBaseline}\n`;
  }
  if (script.includes('nf_conntrack_count'))
    return `count=${cell.conntrackBaseline}\nmax=${cell.conntrackMax}\n`;
  throw new Error(`fake cell: unknown host script ${script}`);
}
