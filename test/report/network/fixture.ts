import { parseLabConfig } from '../../../lib/config/load.ts';
import type { MsDistribution } from '../../../lib/network/probes/stats.ts';
import type {
  CellHostFacts,
  CurlOutcome,
  FortioRunSpec,
  LatencyArm,
  NetworkRun,
  NetworkRunRecord,
  NetworkRunResult,
  NetworkStudyRecord,
} from '../../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { type ScaleStep, serviceScaleCheck } from '../../../lib/network/study/validity-cell.ts';
import { e9Prober } from './fixture-e9.ts';

export { e9Prober, POD_START_MS } from './fixture-e9.ts';

/**
 * Realistic network studies of the three default cells (mesh, dp-iptables, dp-cilium): the runs
 * come from `networkStudyPlan` of the default network configuration, the numbers are in the
 * spirit of an 8-vCPU host at 500 QPS over 16 connections (sub-millisecond plain latency, a
 * sidecar pair adding a fraction of a millisecond). E9's prober samples are the runner's current
 * shape (attempts per sample, first-attempt delay, the method check), made by the prober's own
 * `watchResult` from what a prober probing before each Service existed would see: kube-proxy's
 * REJECT then its next sync a minSyncPeriod later (iptables: about 1 s, growing with the Service
 * count), Cilium forwarding within one 20 ms attempt at any count. Invalid runs, with the runner's reasons:
 * - mesh `e1-plain-r4`: 1 ms resolution, its percentiles on bucket positions;
 * - mesh `e5-mesh-mtls-r2`: the Job failed without a result file;
 * - mesh `e3-fixed-mesh-mtls-r1` attempt 1: rate not reached (attempt 2 is valid and used);
 * - dp-cilium `e9-services-5000`: run in the old order (Services first, the prober's pod 3.8 s
 *   later), so every sample connects on the prober's first attempt: it timed the pod start;
 * - dp-iptables `e10-limit-1024`: conntrack baseline 620, above 500.
 * One valid run is flagged (mesh `e1-mesh-mtls-r3`, repeat spread), and one mTLS case deviates
 * from its expectation (E8 `strict-port-permissive`: dropped instead of answered).
 */

export const NETWORK_CONFIG = parseLabConfig({ lab: 'network', stackName: 'NetworkLab' }, 'fixture');

const HOST: CellHostFacts = {
  instanceType: 'c7i.2xlarge',
  availabilityZone: 'us-west-2a',
  kernel: '6.8.0-1021-aws',
  cpuFlags: ['aes', 'avx2', 'avx512f', 'vaes', 'vpclmulqdq'],
  versions: { k3s: 'v1.33.4+k3s1', fortio: '1.75.2', netshoot: 'v0.16' },
};

/** Fixed-rate mean latency of each arm's repeats (ms), in repeat order. */
export const FIXED_MEANS: Readonly<Record<string, readonly number[]>> = {
  'e1-plain': [0.212, 0.208, 0.215, 0.391, 0.21],
  'e1-mesh-mtls': [0.81, 0.822, 0.852, 0.815, 0.818],
  'e3-fixed-plain': [0.21, 0.214, 0.206, 0.21, 0.21],
  'e3-fixed-mesh-mtls-off': [0.69, 0.694, 0.686, 0.692, 0.688],
  'e3-fixed-mesh-mtls': [0.83, 0.834, 0.826, 0.828, 0.832],
  'e4-plain': [0.211, 0.209, 0.21, 0.212, 0.208],
  'e4-mesh-l4': [0.45, 0.452, 0.448, 0.451, 0.449],
  'e4-mesh-l7': [0.66, 0.662, 0.658, 0.661, 0.659],
  'e5-plain': [0.26, 0.262, 0.258],
  'e5-mesh-mtls': [0.91, 0.92, 0.9],
};

/** Saturation QPS of each arm's repeats. */
export const SATURATION_QPS: Readonly<Record<string, readonly number[]>> = {
  'e1s-plain': [38_100, 37_900, 38_000],
  'e1s-mesh-mtls': [7_600, 7_580, 7_620],
  'e3-saturation-plain': [38_200, 38_000, 37_800],
  'e3-saturation-mesh-mtls-off': [8_400, 8_420, 8_380],
  'e3-saturation-mesh-mtls': [7_500, 7_520, 7_480],
};

/** Calibration means per cell (ms). */
export const CALIBRATION_MEANS: Readonly<Record<string, readonly number[]>> = {
  mesh: [0.212, 0.21, 0.214],
  'dp-iptables': [0.208, 0.206, 0.21],
  'dp-cilium': [0.219, 0.221, 0.217],
};

interface FortioNumbers {
  readonly meanMs: number;
  readonly qps: number;
  readonly resolutionSeconds?: number;
  /** Percentiles (ms); default: the mean's usual shape at this load. */
  readonly percentilesMs?: readonly [p50: number, p90: number, p99: number];
}

const round = (v: number, digits = 9) => Math.round(v * 10 ** digits) / 10 ** digits;

/** A fortio `load -json` result as fortio v1.75.2 writes it (lib/network/study/fortio-result.ts). */
export function fortioJson(spec: FortioRunSpec, n: FortioNumbers): string {
  const seconds = spec.seconds;
  const count = Math.round(n.qps * seconds);
  const [p50, p90, p99] = n.percentilesMs ?? [n.meanMs * 0.88, n.meanMs * 1.38, n.meanMs * 2.45];
  const s = (ms: number) => round(ms / 1000);
  const min = s(n.meanMs * 0.42);
  const max = s(n.meanMs * 9.6);
  const grpc = spec.mode === 'grpc';
  const histogram = {
    Count: count,
    Min: min,
    Max: max,
    Sum: round((n.meanMs / 1000) * count),
    Avg: s(n.meanMs),
    StdDev: s(n.meanMs * 0.61),
    Data: [
      { Start: min, End: s(p50), Percent: 50, Count: Math.round(count * 0.5) },
      { Start: s(p50), End: s(p90), Percent: 90, Count: Math.round(count * 0.4) },
      { Start: s(p90), End: s(p99), Percent: 99, Count: Math.round(count * 0.09) },
      { Start: s(p99), End: max, Percent: 100, Count: count - Math.round(count * 0.99) },
    ],
    Percentiles: [
      { Percentile: 50, Value: s(p50) },
      { Percentile: 90, Value: s(p90) },
      { Percentile: 99, Value: s(p99) },
    ],
  };
  const empty = { Count: 0, Min: 0, Max: 0, Sum: 0, Avg: 0, StdDev: 0, Data: null };
  const common = {
    RunType: grpc ? 'GRPC Ping' : 'HTTP',
    Labels: '',
    StartTime: '2026-11-28T09:14:03.123456789Z',
    RequestedQPS: spec.qps === 0 ? 'max' : String(spec.qps),
    RequestedDuration: `${seconds}s`,
    ActualQPS: n.qps,
    ActualDuration: Math.round(seconds * 1e9 + 1_234_567),
    NumThreads: spec.connections,
    Version: '1.75.2',
    DurationHistogram: histogram,
    ErrorsDurationHistogram: empty,
    Exactly: 0,
    Jitter: false,
    Uniform: false,
    NoCatchUp: false,
  };
  if (grpc) {
    return JSON.stringify({
      ...common,
      RetCodes: { SERVING: count },
      Destination: spec.url,
      Streams: 1,
      Ping: true,
    });
  }
  return JSON.stringify({
    ...common,
    RetCodes: { '200': count },
    URL: spec.url,
    DisableKeepAlive: spec.mode === 'new-connection',
    Resolution: n.resolutionSeconds ?? spec.resolutionSeconds,
    SocketCount: spec.mode === 'new-connection' ? count : spec.connections,
    Sockets: Array.from({ length: spec.connections }, () =>
      spec.mode === 'new-connection' ? Math.round(count / spec.connections) : 1,
    ),
  });
}

const distribution = (count: number, p50: number, p90: number, p99: number, max: number): MsDistribution => ({
  count,
  minMs: round(p50 * 0.8, 3),
  meanMs: round((p50 * 2 + p90) / 3, 3),
  p50Ms: p50,
  p90Ms: p90,
  p99Ms: p99,
  maxMs: max,
});

/** Entries a step counts: iptables-save lines, or Cilium's LB list (frontend + backend per Service). */
const ENTRIES = {
  iptables: (n: number) => 62 + 7 * n,
  cilium: (n: number) => 12 + 2 * n,
};

/** New-connection mean latency (ms, fortio -keepalive=false) per Service count. */
const NEW_CONNECTION_MS: Readonly<Record<string, (n: number) => number>> = {
  iptables: (n) => round(0.31 + n * 0.00006, 4),
  cilium: () => 0.27,
};

function serviceScaleResult(
  cell: string,
  datapath: 'iptables' | 'cilium',
  services: number,
  order: 'prober-first' | 'pod-start',
): NetworkRunResult {
  return {
    kind: 'service-scale',
    scale: {
      servicesReady: services,
      entries: ENTRIES[datapath](services),
      entriesCommand: datapath === 'cilium' ? 'cilium-dbg bpf lb list' : 'iptables-save -t nat | wc -l',
      ...(datapath === 'cilium' ? { lbMapFull: false } : {}),
      // The mesh cell's kube-proxy also programs the mesh's own Services: its syncs take a little longer.
      prober: e9Prober(datapath, services, order, cell === 'mesh' ? 1.06 : 1),
    },
  };
}

/** Conntrack steps per cell: [limit, baseline, succeeded, connect p99, connect max]. */
const CONNTRACK: Readonly<Record<string, Readonly<Record<string, readonly number[]>>>> = {
  mesh: {
    default: [262_144, 241, 4_000, 0.44, 3.4],
    '2048': [2_048, 236, 1_815, 0.54, 1_003.8],
    '1024': [1_024, 229, 797, 0.57, 1_004.4],
  },
  'dp-iptables': {
    default: [262_144, 183, 4_000, 0.41, 3.2],
    '2048': [2_048, 211, 1_841, 0.52, 1_003.6],
    '1024': [1_024, 620, 402, 0.55, 1_004.1],
  },
  'dp-cilium': {
    default: [262_144, 176, 4_000, 0.39, 2.9],
    '2048': [2_048, 198, 1_853, 0.5, 1_003.2],
    '1024': [1_024, 204, 822, 0.53, 1_003.9],
  },
};

const outcome = (httpCode: string, curlExit = 0): CurlOutcome => ({ httpCode, curlExit });

interface Judged {
  readonly valid: boolean;
  readonly invalidReasons: readonly string[];
  readonly flags?: readonly string[];
  readonly attempt?: number;
  readonly job?: NetworkRunRecord['job'];
}

const VALID: Judged = { valid: true, invalidReasons: [] };

/**
 * E9 steps run in the old order (Services first, then the prober's pod): their reasons come from
 * the study's own check (lib/network/study/validity-cell.ts `serviceScaleCheck`), as every E9 step's.
 */
export const E9_POD_START: Readonly<Record<string, true>> = { 'dp-cilium/e9-services-5000': true };

/**
 * Why connections failed, by the driver's cause (conntrack-driver.ts `failureCause`): a full table
 * drops the SYN, so nearly all are timeouts; the mesh cell's 1,024 step also saw two resets.
 */
function failuresOf(cell: string, limit: number | 'default', failed: number): Record<string, number> {
  if (failed === 0) return {};
  if (cell === 'mesh' && limit === 1024) return { timeout: failed - 2, reset: 2 };
  return { timeout: failed };
}

/** The invalid runs and their reasons, as the runner's checks word them (E9's: `serviceScaleCheck`). */
export const INVALID_REASONS: Readonly<Record<string, readonly string[]>> = {
  'mesh/e1-plain-r4': [
    'histogram resolution -r 0.001 s is coarser than a tenth of the measured p50 0.186 ms',
    'p50, p90 and p99 sit on 0.5, 0.9 and 0.99 of a 1 ms bucket: bucket positions, not measurements',
  ],
  'mesh/e5-mesh-mtls-r2': ['the Job failed (1 failed pod) and left no result file'],
  'mesh/e3-fixed-mesh-mtls-r1#1': ['ActualQPS 489.2 is not within 1% of RequestedQPS 500'],
  'dp-iptables/e10-limit-1024': ['conntrack baseline 620 entries is not below 500 before the step'],
};

function meanOf(runId: string, repeat: number): number {
  const key = runId.replace(/-r\d+$/, '');
  return (FIXED_MEANS[key] ?? [])[repeat - 1];
}

function fortioResult(
  cell: string,
  datapath: 'iptables' | 'cilium',
  run: NetworkRun,
  spec: FortioRunSpec,
): string {
  const repeat = run.repeat ?? 1;
  if (run.experiment === 'C')
    return fortioJson(spec, { meanMs: CALIBRATION_MEANS[cell][repeat - 1], qps: 499.98 });
  if (spec.mode === 'saturation') {
    const qps = SATURATION_QPS[run.id.replace(/-r\d+$/, '')][repeat - 1];
    // Little's law at saturation: mean latency = connections / throughput.
    return fortioJson(spec, { meanMs: (spec.connections / qps) * 1000, qps });
  }
  if (spec.mode === 'new-connection') {
    const services = Number(run.id.replace('e9-new-connection-', ''));
    return fortioJson(spec, { meanMs: NEW_CONNECTION_MS[datapath](services), qps: 499.96 });
  }
  if (run.id === 'e1-plain-r4') {
    // -r 0.001: every percentile is a bucket position of the 1 ms bucket [0, 1 ms).
    return fortioJson(spec, {
      meanMs: 0.391,
      qps: 499.97,
      resolutionSeconds: 0.001,
      percentilesMs: [0.5, 0.9, 0.99],
    });
  }
  return fortioJson(spec, { meanMs: meanOf(run.id, repeat), qps: spec.mode === 'grpc' ? 499.95 : 499.97 });
}

function resultOf(cell: string, datapath: 'iptables' | 'cilium', run: NetworkRun): NetworkRunResult {
  const spec = run.spec;
  const repeat = run.repeat ?? 1;
  switch (spec.kind) {
    case 'fortio':
      return { kind: 'fortio', raw: fortioResult(cell, datapath, run, spec) };
    case 'download': {
      const seconds =
        spec.arm === 'plain' ? [0.118, 0.121, 0.115][repeat - 1] : [0.412, 0.405, 0.418][repeat - 1];
      return {
        kind: 'download',
        download: {
          httpCode: '200',
          curlExit: 0,
          sizeDownloadBytes: spec.bytes,
          speedDownloadBytesPerSecond: Math.round(spec.bytes / seconds),
          timeTotalSeconds: seconds,
        },
      };
    }
    case 'sse': {
      const plain = spec.arm === 'plain';
      const p99 = plain ? [21.3, 21.1, 21.5][repeat - 1] : [22.8, 23.0, 22.6][repeat - 1];
      const max = plain ? [24.1, 23.8, 22.9][repeat - 1] : [31.7, 27.4, 28.8][repeat - 1];
      return {
        kind: 'sse',
        sse: {
          probe: 'sse-client',
          url: spec.url,
          status: 200,
          events: spec.events,
          expectedEvents: spec.events,
          connectMs: plain ? 0.31 : 0.92,
          firstEventMs: plain ? 1.2 : 2.4,
          durationMs: spec.events * spec.intervalMs + 3,
          gaps: distribution(spec.events - 1, 20, plain ? 20.4 : 20.9, p99, max),
          errors: [],
        },
      };
    }
    case 'mtls':
      return {
        kind: 'mtls',
        cases: spec.cases.map((c) => ({
          id: c.id,
          expected: c.expected,
          // A finding: the port-level exception did not take, the connection was dropped.
          observed: c.id === 'strict-port-permissive' ? outcome('000', 56) : c.expected,
        })),
      };
    case 'service-scale':
      return serviceScaleResult(
        cell,
        datapath,
        spec.services,
        E9_POD_START[`${cell}/${run.id}`] ? 'pod-start' : 'prober-first',
      );
    case 'conntrack': {
      const [limit, baseline, succeeded, p99, max] = CONNTRACK[cell][String(spec.limit)];
      return {
        kind: 'conntrack',
        conntrack: {
          limitBefore: 262_144,
          limit,
          baseline,
          limitAfterRestore: 262_144,
          restoredTo: 262_144,
          driver: {
            probe: 'conntrack-driver',
            target: '127.0.0.1:40123',
            connections: spec.connections,
            connectTimeoutMs: spec.connectTimeoutSeconds * 1000,
            holdMs: 10_000,
            succeeded,
            failed: spec.connections - succeeded,
            failures: failuresOf(cell, spec.limit, spec.connections - succeeded),
            connect: distribution(succeeded, 0.12, 0.21, p99, max),
            droppedDuringHold: 0,
            issuedInMs: 84,
            openFilesLimit: 1_048_576,
          },
        },
      };
    }
  }
}

function pods(cell: string, arm: LatencyArm | undefined): NetworkRunRecord['pods'] {
  if (!arm) return [];
  const sidecar = arm !== 'plain';
  return [
    {
      pod: 'fortio-client-x7k2p',
      namespace: sidecar ? 'mesh' : 'plain',
      node: `${cell}-node`,
      hasSidecar: sidecar,
    },
  ];
}

function recordOf(
  cell: string,
  datapath: 'iptables' | 'cilium',
  run: NetworkRun,
  index: number,
  judged: Judged,
): NetworkRunRecord {
  const started = new Date(Date.UTC(2026, 10, 28, 9, 0, 0) + index * 60_000);
  const noResult = judged.job === 'failed';
  return {
    id: run.id,
    cell: run.cell,
    experiment: run.experiment,
    title: run.title,
    ...(run.repeat === undefined ? {} : { repeat: run.repeat }),
    spec: run.spec,
    startedAt: started.toISOString(),
    finishedAt: new Date(started.getTime() + 40_000).toISOString(),
    job: judged.job ?? 'succeeded',
    ...(noResult ? {} : { result: resultOf(cell, datapath, run) }),
    pods: pods(cell, 'arm' in run.spec ? run.spec.arm : undefined),
    valid: judged.valid,
    invalidReasons: judged.invalidReasons,
    ...(judged.flags ? { flags: judged.flags } : {}),
    ...(judged.attempt ? { attempt: judged.attempt } : {}),
  };
}

function judge(cell: string, runId: string): Judged {
  const reasons = INVALID_REASONS[`${cell}/${runId}`];
  if (reasons) {
    return {
      valid: false,
      invalidReasons: reasons,
      ...(runId === 'e5-mesh-mtls-r2' ? { job: 'failed' as const } : {}),
    };
  }
  if (cell === 'mesh' && runId === 'e1-mesh-mtls-r3') {
    return {
      ...VALID,
      flags: ['repeat spread: 0.852 ms is 3.5% above the mean of E1 mesh-mtls (0.823 ms), beyond +-3%'],
    };
  }
  return VALID;
}

/** One cell's study record from the default plan, with the fixture's numbers and invalid runs. */
export function fixtureCellStudy(cell: string): NetworkStudyRecord {
  const plan = networkStudyPlan(NETWORK_CONFIG, cell);
  const datapath = plan.datapath === 'cilium' ? 'cilium' : 'iptables';
  const runs: NetworkRunRecord[] = [];
  const steps: ScaleStep[] = [];
  plan.runs.forEach((run, index) => {
    if (cell === 'mesh' && run.id === 'e3-fixed-mesh-mtls-r1') {
      // A resumed run: the first attempt missed the rate, the second is valid.
      const [reason] = INVALID_REASONS['mesh/e3-fixed-mesh-mtls-r1#1'];
      runs.push(recordOf(cell, datapath, run, index, { valid: false, invalidReasons: [reason], attempt: 1 }));
      runs.push(recordOf(cell, datapath, run, index, { ...VALID, attempt: 2 }));
      return;
    }
    if (run.spec.kind === 'service-scale') {
      const result = resultOf(cell, datapath, run);
      if (result.kind !== 'service-scale') throw new Error(`fixture: ${run.id} is an E9 step`);
      const reasons = serviceScaleCheck(
        run.spec,
        result.scale,
        steps,
        plan.datapath,
        NETWORK_CONFIG.network.cilium.lbMapMax,
      );
      steps.push({ services: run.spec.services, entries: result.scale.entries });
      runs.push(
        recordOf(cell, datapath, run, index, { valid: reasons.length === 0, invalidReasons: reasons }),
      );
      return;
    }
    runs.push(recordOf(cell, datapath, run, index, judge(cell, run.id)));
  });
  const versions = {
    ...HOST.versions,
    ...(plan.mesh !== 'none' ? { istio: NETWORK_CONFIG.network.istio.version } : {}),
    ...(plan.datapath === 'cilium' ? { cilium: NETWORK_CONFIG.network.cilium.version } : {}),
  };
  return {
    lab: 'network',
    studyId: `20261128-090000-${cell === 'mesh' ? 'aa11bb22' : cell === 'dp-iptables' ? 'cc33dd44' : 'ee55ff66'}`,
    cell,
    datapath: plan.datapath,
    mesh: plan.mesh,
    host: { ...HOST, versions },
    datapathEvidence:
      plan.datapath === 'cilium'
        ? { kubeProxyReplacement: true, kubeSvcChains: 0, nftKubeProxyTable: false, ipvsServices: 0 }
        : { kubeProxyReplacement: null, kubeSvcChains: 4, nftKubeProxyTable: false, ipvsServices: 0 },
    conntrackHostDefault: 262_144,
    startedAt: '2026-11-28T09:00:00.000Z',
    finishedAt: '2026-11-28T13:42:10.000Z',
    state: 'finished',
    runs,
  };
}

export const FIXTURE_CELLS = ['mesh', 'dp-iptables', 'dp-cilium'] as const;

export function fixtureNetworkStudies(): NetworkStudyRecord[] {
  return FIXTURE_CELLS.map(fixtureCellStudy);
}

/** The report's table sections (lib/report/network/format.ts ids), in reading order. */
export const NETWORK_SECTIONS = [
  'cells',
  'sidecar-cost',
  'attribution',
  'grpc',
  'download',
  'sse',
  'mtls-matrix',
  'services-at-scale',
  'services-entries',
  'conntrack',
  'calibration',
  'invalid',
  'flagged',
] as const;
