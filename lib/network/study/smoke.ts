import type { LabConfig } from '../../config/schema.ts';
import { SMOKE_PREFIX } from '../../study/smoke.ts';
import type { NetworkRun, NetworkStudyPlan } from './model.ts';
import { networkStudyPlan } from './plan.ts';

/**
 * A cell's smoke study (docs/first-run.md): every experiment the cell runs (the calibration, E1-E8
 * on a mesh cell, E9, E10), each arm once with a tiny load, through the same runner and the same
 * validity checks as the full study, so it exercises every run-time proof the full study relies
 * on: the datapath proof, mesh injection and mTLS evidence, the mTLS matrix, E9's prober method,
 * conntrack read, lower and restore, the result files. It is the cell's own plan built from a
 * tiny configuration; only the load and the ids differ. The full study runs it first.
 */

/** Run ids of a smoke study start with this (as the first lab's, lib/study/smoke.ts). */
export const NETWORK_SMOKE_PREFIX = SMOKE_PREFIX;

/** The target per cell: at most this long after the cell's bootstrap (issue 27). */
export const NETWORK_SMOKE_TARGET_MINUTES = 5;

/**
 * How long a smoke study waits for a precondition (mesh pods restarted into the mesh, E9's
 * Services with ready backends, E10's conntrack baseline) before the run fails "not started",
 * against the full study's runner.readyTimeoutMinutes (10). A mesh pod restarted into the mesh
 * (none after a normal bootstrap, docs/facts.md §N2) is ready within a minute; E9's 100 Services
 * are ready in seconds; and a
 * killed study's TIME_WAIT entries (120 s) are gone before E10, the smoke's last run. So a smoke
 * precondition that is not met by then will not be, and the user learns it in minutes.
 */
export const NETWORK_SMOKE_READY_TIMEOUT_MINUTES = 2;

/**
 * The tiny load. fortio: 2 s at 50 QPS per run (enough calls for the histogram, the rate and the
 * sidecar's counters; 100 new connections on E9's run, so the conntrack baseline stays low for
 * E10). E6: 1 MiB. E7: 20 events. E9: 5 samples per step. E10: one lowered limit.
 */
export const NETWORK_SMOKE_LOAD = {
  fortioSeconds: 2,
  qps: 50,
  largeBodyMiB: 1,
  sseEvents: 20,
  proberSamples: 5,
  /** E9's second step, at most: enough Services to see entries grow, created in seconds. */
  maxServices: 100,
} as const;

/** The configuration the smoke plan is built from: one repeat of everything, the tiny load. */
export function networkSmokeConfig(config: LabConfig): LabConfig {
  const { network } = config;
  const { experiments, fortio } = network;
  const steps = [...new Set(experiments.serviceScale.steps)].sort((a, b) => a - b);
  const smokeSteps = [
    ...new Set(steps.slice(0, 2).map((n, i) => (i === 0 ? n : Math.min(n, NETWORK_SMOKE_LOAD.maxServices)))),
  ];
  return {
    ...config,
    network: {
      ...network,
      fortio: {
        ...fortio,
        qps: Math.min(fortio.qps, NETWORK_SMOKE_LOAD.qps),
        fixedRateSeconds: NETWORK_SMOKE_LOAD.fortioSeconds,
        saturationSeconds: NETWORK_SMOKE_LOAD.fortioSeconds,
      },
      experiments: {
        ...experiments,
        repeats: { fixedRate: 1, saturation: 1, protocols: 1, calibration: 1 },
        largeBodyMiB: Math.min(experiments.largeBodyMiB, NETWORK_SMOKE_LOAD.largeBodyMiB),
        sse: { ...experiments.sse, events: Math.min(experiments.sse.events, NETWORK_SMOKE_LOAD.sseEvents) },
        serviceScale: {
          ...experiments.serviceScale,
          steps: smokeSteps,
          samples: Math.min(experiments.serviceScale.samples, NETWORK_SMOKE_LOAD.proberSamples),
        },
        // The lowest limit fills the table: read the host default, lower it, drive, restore.
        conntrack: { ...experiments.conntrack, limits: [Math.min(...experiments.conntrack.limits)] },
      },
    },
  };
}

/**
 * The smoke plan of a cell: the tiny configuration's plan without the runs that prove nothing new
 * (E3's saturation variant repeats E1s's path at E3's arms; E10's step at the host's default limit,
 * since the lowered step reads the default and restores it; a client run whose path and load an
 * earlier smoke run has already had, `samePath`), ids `smoke-<id>`.
 */
export function networkSmokePlan(config: LabConfig, cellName: string): NetworkStudyPlan {
  const plan = networkStudyPlan(networkSmokeConfig(config), cellName);
  const lowered = plan.runs.some((r) => r.spec.kind === 'conntrack' && r.spec.limit !== 'default');
  const paths = new Set<string>();
  const runs = plan.runs
    .filter((run) => !run.id.startsWith('e3-saturation-'))
    .filter((run) => !(lowered && run.spec.kind === 'conntrack' && run.spec.limit === 'default'))
    .filter((run) => {
      const path = samePath(run);
      if (path === undefined) return true;
      if (paths.has(path)) return false;
      paths.add(path);
      return true;
    })
    .map(renamed);
  return { ...plan, runs };
}

/**
 * What a client run exercises: its client, target, tool, mode and load, and the mTLS rule it is
 * judged by. At the smoke's tiny load several runs coincide: E3's and E4's plain arms are E1's
 * plain run (2 s at 50 QPS to the same server), E3's mesh-mtls and E4's mesh-l7 arms are E1's
 * mesh-mtls run (`mesh-l7` is the same path, judged by the same counters: validity-mesh.ts), and
 * E9's new-connection run is the same at every step. The first of them runs and its proofs count
 * for the rest. The full study keeps them all: their loads differ there, and they are measurements.
 * Calibration (to the pod IP), the mTLS matrix, E9's steps and E10 are their own paths (undefined).
 */
export function samePath(run: NetworkRun): string | undefined {
  const { spec } = run;
  if (run.experiment === 'C') return undefined;
  if (spec.kind !== 'fortio' && spec.kind !== 'download' && spec.kind !== 'sse') return undefined;
  const arm = spec.arm === 'mesh-l7' ? 'mesh-mtls' : spec.arm;
  return JSON.stringify({ ...spec, arm });
}

function renamed(run: NetworkRun): NetworkRun {
  return {
    ...run,
    id: `${NETWORK_SMOKE_PREFIX}${run.id}`,
    title: `Smoke: ${run.title}`,
    ...(run.repeatGroup !== undefined ? { repeatGroup: `${NETWORK_SMOKE_PREFIX}${run.repeatGroup}` } : {}),
  };
}
