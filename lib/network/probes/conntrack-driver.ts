/**
 * Experiment E10 (docs/facts.md §N3): fill the connection-tracking table. The driver opens N TCP
 * connections at once (4,000 over loopback in the lab), each with a connect timeout (5 s), holds
 * the ones that connected, then closes them all. When the table is full the kernel drops new
 * SYNs, so the symptom is connects that time out; other causes are counted apart so that a
 * process limit (EMFILE) or port exhaustion is never mistaken for conntrack. Pure part.
 */
import { type MsDistribution, msDistribution, roundMs } from './stats.ts';

/**
 * Why a connection failed: `timeout` (no answer within the connect timeout: a dropped SYN),
 * `refused` (ECONNREFUSED), `reset` (ECONNRESET), `emfile` (EMFILE/ENFILE: file descriptors
 * exhausted), `no-local-port` (EADDRNOTAVAIL: ephemeral ports exhausted); any other error code
 * is its own cause, e.g. `EHOSTUNREACH`.
 */
export function failureCause(code: string): string {
  const causes: Record<string, string> = {
    timeout: 'timeout',
    ECONNREFUSED: 'refused',
    ECONNRESET: 'reset',
    EMFILE: 'emfile',
    ENFILE: 'emfile',
    EADDRNOTAVAIL: 'no-local-port',
  };
  return causes[code] ?? code;
}

/** How one connection ended its connect phase (times in ms from its own connect call). */
export type ConnectionOutcome =
  | { readonly ok: true; readonly connectMs: number; readonly droppedDuringHold: boolean }
  | { readonly ok: false; readonly cause: string };

/** The conntrack driver's JSON result (experiment E10). Times in ms. */
export interface ConntrackDriverResult {
  readonly probe: 'conntrack-driver';
  /** `host:port` connected to (the driver's own loopback listener when no port was given). */
  readonly target: string;
  /** Connections attempted, all at once (count). */
  readonly connections: number;
  readonly connectTimeoutMs: number;
  /** How long the connected ones were held open before closing (ms). */
  readonly holdMs: number;
  /** Connections established (count); E10 expects about `limit - baseline` under a small limit. */
  readonly succeeded: number;
  /** Connections that failed (count) and by cause (see `failureCause`; counts). */
  readonly failed: number;
  readonly failures: Record<string, number>;
  /** Connect latency of the established connections (ms). */
  readonly connect: MsDistribution | null;
  /** Established connections the peer closed or reset while held (count). */
  readonly droppedDuringHold: number;
  /** ms from the first connect call to the last one (the driver's own issue time). */
  readonly issuedInMs: number;
  /** This process's soft limit on open files (count); null when unknown or unlimited. */
  readonly openFilesLimit: number | null;
}

export interface DriveSummaryInput {
  readonly target: string;
  readonly connectTimeoutMs: number;
  readonly holdMs: number;
  readonly outcomes: readonly ConnectionOutcome[];
  readonly issuedInMs: number;
  readonly openFilesLimit: number | null;
}

export function driverResult(input: DriveSummaryInput): ConntrackDriverResult {
  const failures: Record<string, number> = {};
  const latencies: number[] = [];
  let dropped = 0;
  for (const outcome of input.outcomes) {
    if (outcome.ok) {
      latencies.push(outcome.connectMs);
      if (outcome.droppedDuringHold) dropped++;
    } else {
      failures[outcome.cause] = (failures[outcome.cause] ?? 0) + 1;
    }
  }
  return {
    probe: 'conntrack-driver',
    target: input.target,
    connections: input.outcomes.length,
    connectTimeoutMs: input.connectTimeoutMs,
    holdMs: input.holdMs,
    succeeded: latencies.length,
    failed: input.outcomes.length - latencies.length,
    failures,
    connect: msDistribution(latencies),
    droppedDuringHold: dropped,
    issuedInMs: roundMs(input.issuedInMs),
    openFilesLimit: input.openFilesLimit,
  };
}

/**
 * The soft "Max open files" limit from /proc/self/limits (proc(5)); null when the line is absent
 * or the limit is unlimited. Printed so that EMFILE failures can be traced to a low ulimit.
 */
export function openFilesLimitOf(procLimits: string): number | null {
  const match = /^Max open files\s+(\S+)/m.exec(procLimits);
  if (!match || match[1] === 'unlimited') return null;
  const limit = Number(match[1]);
  return Number.isInteger(limit) ? limit : null;
}
