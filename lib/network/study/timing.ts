import type { MeshMode } from '../../config/network.ts';
import { DEFAULT_RUN_OVERHEADS } from '../../study/duration.ts';
import type { NetworkRun, NetworkRunSpec } from './model.ts';
import { mtlsClientGroups } from './mtls-groups.ts';

/** How long a cell's runs take, for `lab plan` (planner.ts): its full study's and its smoke study's. */

/**
 * Seconds the runner spends around each run's load, and the figures it assumes. None is measured
 * on a cell yet; each says where it comes from, and the runner's status.json ETA replaces them.
 */
export interface NetworkRunOverheads {
  /** Creating a Job until its container runs: images were pulled by the bootstrap (pull_cell_images). */
  readonly jobStartSeconds: number;
  /** The runner's own work per run (polls 5 s apart, result file, record): as the first lab's. */
  readonly runnerSeconds: number;
  /** One curl of the mTLS matrix after its pod started. */
  readonly curlSeconds: number;
  /** Pod-to-pod download speed assumed for E6 (bytes per second); the download is short either way. */
  readonly downloadBytesPerSecond: number;
  /** One Service create or delete through the API (K3s's kine on SQLite). */
  readonly apiCallSeconds: number;
  /**
   * EndpointSlices written per second for new Services: kube-controller-manager's default client
   * rate (--kube-api-qps 20). With one Service per slice this paces a step's readiness.
   */
  readonly endpointSlicesPerSecond: number;
  /** One prober sample: create a Service, wait until its ClusterIP connects, delete it. */
  readonly proberSampleSeconds: number;
  /** Counting the entries with a privileged host-command Job. */
  readonly entriesCountSeconds: number;
  /**
   * Waiting for the conntrack baseline after a step: the closed loopback connections stay in
   * TIME_WAIT for nf_conntrack_tcp_timeout_time_wait (120 s kernel default).
   */
  readonly conntrackSettleSeconds: number;
  /** Labelling the mesh namespace and restarting its pods, once per mesh cell. */
  readonly meshRestartSeconds: number;
}

export const DEFAULT_NETWORK_RUN_OVERHEADS: NetworkRunOverheads = {
  jobStartSeconds: 10,
  runnerSeconds: DEFAULT_RUN_OVERHEADS.runnerSeconds,
  curlSeconds: 2,
  downloadBytesPerSecond: 100 * 1024 * 1024,
  apiCallSeconds: 0.05,
  endpointSlicesPerSecond: 20,
  proberSampleSeconds: 3,
  entriesCountSeconds: 5,
  conntrackSettleSeconds: 120,
  meshRestartSeconds: 60,
};

/** A plan's load and overhead seconds: its runs, the mesh's restart once, the Services' cleanup. */
export function planSeconds(
  runs: readonly NetworkRun[],
  mesh: MeshMode,
  overheads: NetworkRunOverheads,
): { loadSeconds: number; overheadSeconds: number } {
  const timed = runs.map((run, i) => runSeconds(run, runs.slice(0, i), overheads));
  const meshSetup = mesh === 'none' ? 0 : overheads.meshRestartSeconds;
  const cleanup = serviceCleanupSeconds(runs, overheads);
  return {
    loadSeconds: timed.reduce((sum, t) => sum + t.load, 0),
    overheadSeconds: timed.reduce((sum, t) => sum + t.overhead, 0) + meshSetup + cleanup,
  };
}

/**
 * New connections the runs open (E9's `-keepalive=false` runs, E10's drives): each leaves a
 * conntrack entry in TIME_WAIT, which an E10 step after them waits out.
 */
function newConnections(runs: readonly NetworkRun[]): number {
  return runs.reduce((sum, r) => {
    if (r.spec.kind === 'conntrack') return sum + r.spec.connections;
    if (r.spec.kind === 'fortio' && r.spec.mode === 'new-connection')
      return sum + r.spec.qps * r.spec.seconds;
    return sum;
  }, 0);
}

/** A run's load and overhead seconds; an E9 step's creations depend on the steps before it. */
export function runSeconds(
  run: NetworkRun,
  before: readonly NetworkRun[],
  o: NetworkRunOverheads = DEFAULT_NETWORK_RUN_OVERHEADS,
): { load: number; overhead: number } {
  const job = o.jobStartSeconds + o.runnerSeconds;
  const spec: NetworkRunSpec = run.spec;
  switch (spec.kind) {
    case 'fortio':
      return { load: spec.seconds, overhead: job };
    case 'download':
      return { load: spec.bytes / o.downloadBytesPerSecond, overhead: job };
    case 'sse':
      return { load: (spec.events * spec.intervalMs) / 1000, overhead: job };
    case 'mtls':
      // One client pod per source (namespace, service account, in or out of the mesh) runs its
      // cases' curls one after the other (mtls-groups.ts).
      return {
        load: spec.cases.length * o.curlSeconds,
        overhead: mtlsClientGroups(spec.cases).length * o.jobStartSeconds + o.runnerSeconds,
      };
    case 'service-scale': {
      const previous = Math.max(
        0,
        ...before.flatMap((r) => (r.spec.kind === 'service-scale' ? [r.spec.services] : [])),
      );
      const created = Math.max(0, spec.services - previous);
      // Creating through the API and the EndpointSlices appearing overlap: the slower one paces.
      const creation = Math.max(
        (created / spec.createConcurrency) * o.apiCallSeconds,
        created / o.endpointSlicesPerSecond,
      );
      return {
        load: spec.samples * o.proberSampleSeconds,
        overhead: creation + o.entriesCountSeconds + job,
      };
    }
    case 'conntrack': {
      // The baseline wait: only after runs that opened at least the baseline's threshold of new
      // connections (a smoke study's 100 new connections settle at once).
      const settle = newConnections(before) >= spec.baselineMax ? o.conntrackSettleSeconds : 0;
      return { load: spec.connectTimeoutSeconds, overhead: settle + job };
    }
  }
}

/** Deleting the runner's Services after the last E9 step. */
function serviceCleanupSeconds(runs: readonly NetworkRun[], o: NetworkRunOverheads): number {
  return Math.max(
    0,
    ...runs.map((r) =>
      r.spec.kind === 'service-scale' ? (r.spec.services / r.spec.createConcurrency) * o.apiCallSeconds : 0,
    ),
  );
}
