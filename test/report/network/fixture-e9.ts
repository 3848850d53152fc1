import {
  type AttemptRun,
  type ServiceProberResult,
  type WatchedTarget,
  watchResult,
} from '../../../lib/network/probes/service-prober.ts';

/**
 * E9 prober results for the network report's fixture, in the runner's current shape: what a
 * prober that was probing before each Service existed records, turned into samples by the
 * prober's own `watchResult` (attempts since acceptance, first-attempt delay, the method check).
 */

const round = (v: number, digits = 9) => Math.round(v * 10 ** digits) / 10 ** digits;

/** When the prober started probing in a sound E9 step, and each Service's acceptance after it (ms since the epoch). */
const PROBER_START_MS = Date.UTC(2026, 10, 28, 10, 0, 0);
const FIRST_ACCEPTANCE_MS = PROBER_START_MS + 1_000;
/** The runner creates the Services 2 s apart (lib/runner/network/new-service-probe.ts). */
const CREATE_SPACING_MS = 2_000;
/** A dropped SYN's attempt lasts the 20 ms timeout plus a loop turn; a refused one 0.4 ms. */
const TIMEOUT_STEP_MS = 20.2;
const REFUSED_STEP_MS = 0.4;
/** The old order's pod start: the prober's pod ran 3.8 s after the last Service was created. */
export const POD_START_MS = 3_800;

/**
 * When a new Service's ClusterIP is rejected and when it is forwarded, after its acceptance (ms),
 * as test/runner/network/fake-cell.ts `programmingDelays` models the datapaths: kube-proxy REJECTs
 * at its first sync and forwards one minSyncPeriod (1 s) later, each sync longer with more
 * Services; Cilium forwards in a few ms at any count. `jitter` in [0, 1).
 */
function delaysOf(datapath: 'iptables' | 'cilium', services: number, jitter: number) {
  if (datapath === 'cilium') {
    const ms = 6 + 8 * jitter + 0.000_2 * services;
    return { rejectMs: ms, programMs: ms };
  }
  const sync = 12 + 0.12 * services + 10 * jitter;
  return { rejectMs: sync, programMs: 1_000 + sync };
}

/** A run of `count` attempts of one outcome, `step` ms apart, from `first`. */
const attemptRun = (
  outcome: AttemptRun['outcome'],
  count: number,
  first: number,
  step: number,
): AttemptRun => ({
  outcome,
  count,
  firstStartEpochMs: round(first, 3),
  lastStartEpochMs: round(first + (count - 1) * step, 3),
});

/**
 * What a prober that was probing before the Service existed sees of one address (the runner's
 * watch mode): attempts timing out every 20.2 ms until the datapath REJECTs the address, refusals
 * every 0.4 ms until it forwards it, then the connect.
 */
function watchedSound(
  target: string,
  probingSince: number,
  accepted: number,
  delays: ReturnType<typeof delaysOf>,
): WatchedTarget {
  const rejectAt = accepted + delays.rejectMs;
  const programAt = accepted + delays.programMs;
  const timeouts = Math.ceil((rejectAt - probingSince) / TIMEOUT_STEP_MS);
  const refusedFrom = probingSince + timeouts * TIMEOUT_STEP_MS;
  const refused = Math.max(0, Math.ceil((programAt - refusedFrom) / REFUSED_STEP_MS));
  const connectAt = refusedFrom + refused * REFUSED_STEP_MS;
  const runs = [
    attemptRun('timeout', timeouts, probingSince, TIMEOUT_STEP_MS),
    ...(refused > 0 ? [attemptRun('refused', refused, refusedFrom, REFUSED_STEP_MS)] : []),
    attemptRun('connected', 1, connectAt, 0),
  ];
  return {
    target,
    probingSinceEpochMs: probingSince,
    connectedAtEpochMs: round(connectAt + 0.08, 3),
    attempts: timeouts + refused + 1,
    refused,
    timedOut: timeouts,
    otherErrors: {},
    attemptRuns: runs,
  };
}

/** The old order: the Services first, the prober's pod 3.8 s later; every address connects on its first attempt. */
function watchedAfterPodStart(target: string, probingSince: number): WatchedTarget {
  return {
    target,
    probingSinceEpochMs: probingSince,
    connectedAtEpochMs: round(probingSince + 0.08, 3),
    attempts: 1,
    refused: 0,
    timedOut: 0,
    otherErrors: {},
    attemptRuns: [attemptRun('connected', 1, probingSince, 0)],
  };
}

/**
 * An E9 step's prober result as the runner records it (lib/network/probes/service-prober.ts
 * `watchResult`: samples, latency, quantization shown, the method check): 20 new Services, 2 s
 * apart. `order: 'pod-start'` is the old order, Services created before the prober started.
 */
export function e9Prober(
  datapath: 'iptables' | 'cilium',
  services: number,
  order: 'prober-first' | 'pod-start' = 'prober-first',
  slowdown = 1,
): ServiceProberResult {
  const samples = 20;
  const accepted = new Map<string, number>();
  // The old order created the Services together (5 ms apart), then started the prober's pod.
  const spacing = order === 'pod-start' ? 5 : CREATE_SPACING_MS;
  const lastAccepted = FIRST_ACCEPTANCE_MS + (samples - 1) * spacing;
  const watched = Array.from({ length: samples }, (_, i) => {
    const target = `10.43.0.${20 + i}:80`;
    const at = FIRST_ACCEPTANCE_MS + i * spacing;
    accepted.set(target, at);
    if (order === 'pod-start') return watchedAfterPodStart(target, lastAccepted + POD_START_MS + i * 0.05);
    // A deterministic spread of the sync's length over the 20 samples.
    const jitter = ((i * 7) % samples) / samples;
    const d = delaysOf(datapath, services, jitter);
    const delays = { rejectMs: d.rejectMs * slowdown, programMs: d.programMs * slowdown };
    return watchedSound(target, PROBER_START_MS + i * 0.05, at, delays);
  });
  return watchResult(
    { probe: 'service-prober', mode: 'watch', attemptTimeoutMs: 20, giveUpMs: 30_000, watched },
    accepted,
  );
}
