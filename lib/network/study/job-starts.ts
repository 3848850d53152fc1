import type { Datapath } from '../../config/network.ts';
import type { NetworkRun } from './model.ts';
import { mtlsClientGroups } from './mtls-groups.ts';

/**
 * The Jobs the network runner starts, counted the runner's way so that `lab plan` pays one pod
 * start for each (timing.ts). Pure. Each entry names the runner step that starts it; the
 * rehearsal (test/runner/network/smoke-rehearsal.test.ts) checks these counts against the Jobs the
 * runner really creates on a fake cell, run by run.
 */

/** What a Job does: a load's client, a short host command, E9's prober, or E10's driver. */
export type PlannedJobKind = 'client' | 'host' | 'prober' | 'driver';

export interface PlannedJob {
  readonly kind: PlannedJobKind;
  /** The runner step that starts it (lib/runner/network/...). */
  readonly what: string;
}

const host = (what: string): PlannedJob => ({ kind: 'host', what });

/**
 * Before the first run (lib/runner/network/cell-facts.ts studyFacts): one host Job for the host's
 * kernel and CPU flags and the datapath's rules, and on a Cilium cell `cilium-dbg status` (another
 * container image). A resumed study reads its record instead, and a conntrack limit a killed
 * runner left lowered costs two more: neither is planned.
 */
export function studyStartJobs(datapath: Datapath): PlannedJob[] {
  return [
    host("host facts and the datapath's rules (cell-facts.ts studyFacts)"),
    ...(datapath === 'cilium' ? [host('cilium-dbg status (cell-facts.ts studyFacts)')] : []),
  ];
}

/** The Jobs one run starts. */
export function runJobStarts(run: NetworkRun): PlannedJob[] {
  const { spec } = run;
  switch (spec.kind) {
    case 'fortio':
    case 'download':
    case 'sse':
      return [{ kind: 'client', what: `${spec.kind} client (client-steps.ts clientRun)` }];
    case 'mtls':
      // One curl pod per source of the matrix (mtls-groups.ts).
      return mtlsClientGroups(spec.cases).map((g) => ({
        kind: 'client',
        what: `mTLS curls of ${g.id} (client-steps.ts mtlsRun)`,
      }));
    case 'service-scale':
      return [
        host('entries count (scale-steps.ts scaleRun)'),
        { kind: 'prober', what: 'service prober (new-service-probe.ts)' },
      ];
    case 'conntrack':
      return [
        // At least one read; while the table settles, one per poll (timed as the settle wait).
        // The study's first read also gives the host default (conntrack-steps.ts conntrackBaseline).
        host('conntrack baseline read (conntrack-steps.ts conntrackBaseline)'),
        host('conntrack limit set (conntrack-steps.ts conntrackRun)'),
        { kind: 'driver', what: 'conntrack driver (conntrack-steps.ts conntrackRun)' },
        host('conntrack limit restored and read back (conntrack-steps.ts restoreLimit)'),
      ];
  }
}
