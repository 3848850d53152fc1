import type { Datapath, MeshMode } from '../../config/network.ts';
import { DEFAULT_RUN_OVERHEADS } from '../../study/duration.ts';
import { type PlannedJob, runJobStarts, studyStartJobs } from './job-starts.ts';
import type { NetworkRun, NetworkRunSpec } from './model.ts';

/** How long a cell's runs take, for `lab plan` (planner.ts): its full study's and its smoke study's. */

/**
 * Seconds the runner spends around each run's load, and the figures it assumes. None is measured
 * on a cell yet; each says where it comes from, and the runner's status.json ETA replaces them.
 */
export interface NetworkRunOverheads {
  /**
   * Creating a Job until its container runs: images were pulled by the bootstrap (pull_cell_images).
   * Paid by every Job the runner starts, clients and host commands alike (job-starts.ts).
   */
  readonly jobStartSeconds: number;
  /** A host-command Job's command once its container runs: reading or writing a /proc/sys file. */
  readonly hostCommandSeconds: number;
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
  /** Counting the entries in a privileged host-command Job once it runs (its start is a Job start). */
  readonly entriesCountSeconds: number;
  /**
   * Waiting for the conntrack baseline after a step: the closed loopback connections stay in
   * TIME_WAIT for nf_conntrack_tcp_timeout_time_wait (120 s kernel default).
   */
  readonly conntrackSettleSeconds: number;
}

export const DEFAULT_NETWORK_RUN_OVERHEADS: NetworkRunOverheads = {
  jobStartSeconds: 10,
  hostCommandSeconds: 1,
  runnerSeconds: DEFAULT_RUN_OVERHEADS.runnerSeconds,
  curlSeconds: 2,
  downloadBytesPerSecond: 100 * 1024 * 1024,
  apiCallSeconds: 0.05,
  endpointSlicesPerSecond: 20,
  proberSampleSeconds: 3,
  entriesCountSeconds: 5,
  conntrackSettleSeconds: 120,
};

/** Whether `lab plan` counts the mesh pods' restart on a cell, and why. */
export interface MeshRestartPlan {
  readonly seconds: number;
  readonly why: string;
}

/**
 * The mesh pods' restart, which a normal bootstrap leaves nothing to do (docs/facts.md §N2).
 * Sidecar mode: istiod's injector webhook (failurePolicy Fail) exists before any pod of a labelled
 * namespace is created, so such a pod is injected or refused, never admitted without its sidecar.
 * Ambient: istio-cni and ztunnel are installed (helm --wait) before the charts, and istio-cni
 * enrols a labelled namespace's pods at creation (its CNI plugin) and reconciles those that existed
 * before it or the label, retrying until ztunnel accepts them. The runner still restarts a pod it
 * finds outside the mesh, and the smoke checklist warns that the plan did not count it.
 */
export function meshRestart(mesh: MeshMode): MeshRestartPlan {
  switch (mesh) {
    case 'none':
      return { seconds: 0, why: 'no mesh' };
    case 'sidecar':
      return {
        seconds: 0,
        why: "not planned: the bootstrap installs istiod's injector (failurePolicy Fail) before any mesh pod, so every mesh pod has its sidecar; the smoke checklist says if one had to be restarted",
      };
    case 'ambient':
      return {
        seconds: 0,
        why: 'not planned: the bootstrap installs istio-cni and ztunnel before any mesh pod, and istio-cni enrols every pod of a labelled namespace, at its creation or later, until ztunnel accepts it; the smoke checklist says if one had to be restarted',
      };
  }
}

/** Seconds of the Jobs a study starts before its first run (the host facts, the datapath proof). */
export function studyStartSeconds(datapath: Datapath, overheads: NetworkRunOverheads): number {
  return jobsSeconds(studyStartJobs(datapath), overheads);
}

/** Each Job's start, and a host command's own time (a load's time is the run's load). */
function jobsSeconds(jobs: readonly PlannedJob[], o: NetworkRunOverheads): number {
  return jobs.reduce((sum, j) => sum + o.jobStartSeconds + (j.kind === 'host' ? o.hostCommandSeconds : 0), 0);
}

/**
 * A plan's load and overhead seconds: the study's start, its runs, the mesh's restart where it can
 * happen (once), the Services' cleanup.
 */
export function planSeconds(
  runs: readonly NetworkRun[],
  cell: { readonly mesh: MeshMode; readonly datapath: Datapath },
  overheads: NetworkRunOverheads,
): { loadSeconds: number; overheadSeconds: number } {
  const timed = runs.map((run, i) => runSeconds(run, runs.slice(0, i), overheads));
  const meshSetup = meshRestart(cell.mesh).seconds;
  const cleanup = serviceCleanupSeconds(runs, overheads);
  return {
    loadSeconds: timed.reduce((sum, t) => sum + t.load, 0),
    overheadSeconds:
      timed.reduce((sum, t) => sum + t.overhead, 0) +
      studyStartSeconds(cell.datapath, overheads) +
      meshSetup +
      cleanup,
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

/**
 * A run's load and overhead seconds: every Job it starts (job-starts.ts) pays its start, and the
 * runner's own work once; an E9 step's creations depend on the steps before it.
 */
export function runSeconds(
  run: NetworkRun,
  before: readonly NetworkRun[],
  o: NetworkRunOverheads = DEFAULT_NETWORK_RUN_OVERHEADS,
): { load: number; overhead: number } {
  const jobs = jobsSeconds(runJobStarts(run), o) + o.runnerSeconds;
  const spec: NetworkRunSpec = run.spec;
  switch (spec.kind) {
    case 'fortio':
      return { load: spec.seconds, overhead: jobs };
    case 'download':
      return { load: spec.bytes / o.downloadBytesPerSecond, overhead: jobs };
    case 'sse':
      return { load: (spec.events * spec.intervalMs) / 1000, overhead: jobs };
    case 'mtls':
      // One client pod per source (namespace, service account, in or out of the mesh) runs its
      // cases' curls one after the other (mtls-groups.ts).
      return { load: spec.cases.length * o.curlSeconds, overhead: jobs };
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
      // The entries Job's host command is the count itself.
      return {
        load: spec.samples * o.proberSampleSeconds,
        overhead: creation + jobs - o.hostCommandSeconds + o.entriesCountSeconds,
      };
    }
    case 'conntrack': {
      // The baseline wait: only after runs that opened at least the baseline's threshold of new
      // connections (a smoke study's 100 new connections settle at once).
      const settle = newConnections(before) >= spec.baselineMax ? o.conntrackSettleSeconds : 0;
      return { load: spec.connectTimeoutSeconds, overhead: settle + jobs };
    }
  }
}

/** Deleting the runner's Services after the last E9 step. */
export function serviceCleanupSeconds(runs: readonly NetworkRun[], o: NetworkRunOverheads): number {
  return Math.max(
    0,
    ...runs.map((r) =>
      r.spec.kind === 'service-scale' ? (r.spec.services / r.spec.createConcurrency) * o.apiCallSeconds : 0,
    ),
  );
}
