import type { Datapath } from '../../config/network.ts';
import type { ConntrackDriverResult } from '../probes/conntrack-driver.ts';
import { methodCheck } from '../probes/service-prober.ts';
import type {
  CellHostFacts,
  ConntrackResult,
  ConntrackRunSpec,
  ServiceScaleResult,
  ServiceScaleRunSpec,
} from './model.ts';
import { CONNTRACK_MIN_SLACK, CONNTRACK_TOLERANCE } from './validity-fortio.ts';

/** The validity checks of E9, E10 and the host (docs/facts.md §N5). */

// ---- E9: Services at scale ------------------------------------------------------------------------

/** An earlier E9 step of the same cell: its Service count and the entries it counted. */
export interface ScaleStep {
  readonly services: number;
  readonly entries: number;
}

/**
 * E9 (docs/facts.md §N5): N Services ready before measuring; entries grow with N (more than at
 * every earlier step with fewer Services); every prober sample connected, and the samples time
 * the datapath (`methodCheck`, recomputed from the samples: no connect on the prober's first
 * attempt, the prober probing when each Service was accepted, attempts as fine as the timeout);
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
    if (prober.samples.some((sample) => sample.attemptsAfterStart === undefined)) {
      reasons.push(
        "the prober's samples were timed from before the prober ran (Services created first): they include the prober's start, not only the datapath",
      );
    } else {
      const method = methodCheck(prober.samples, prober.attemptTimeoutMs);
      for (const reason of method.reasons) reasons.push(`E9 method: ${reason}`);
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
  // Restored to the host default read before the study's first E10 step (records of an older
  // runner: the value found before the step).
  const target = result.restoredTo ?? result.limitBefore;
  const what =
    result.restoredTo === undefined ? '' : " (the host default, read before the study's first E10 step)";
  if (result.limitAfterRestore === null) {
    reasons.push(
      `nf_conntrack_max was not read back after the step: the restore to ${target}${what} is unconfirmed`,
    );
  } else if (result.limitAfterRestore !== target) {
    reasons.push(
      `nf_conntrack_max is ${result.limitAfterRestore} after the step, not restored to ${target}${what}`,
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
