import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type AttemptRun,
  addAttempt,
  type WatchedTarget,
  type WatchProberOutput,
} from '../../../lib/network/probes/service-prober.ts';
import { jobOutputDir } from '../../../lib/runner/network/layout.ts';
import type { JobObject } from '../../../lib/runner/ports.ts';
import type { FakeCell, FakeJob } from './fake-cell.ts';

/**
 * The fake cell's E9 prober in watch mode: when its pod starts probing, and what it sees of each
 * address it watches as the datapath programs the new Services (fake-cell-physics.ts' delays).
 */

/** A prober Job in watch mode: when its pod starts probing, what it watches, its settings. */
export interface FakeProber {
  readonly startMs: number;
  readonly targets: readonly string[];
  readonly attemptTimeoutMs: number;
  readonly giveUpMs: number;
  /** Attempts every this many ms whatever the timeout (a broken prober); undefined: timeout + a loop turn. */
  readonly stepMs?: number;
  readyWritten: boolean;
}

/** The prober pod, once started, writes its ready file (the runner's go signal). */
export function advanceProber(cell: FakeCell, entry: FakeJob, prober: FakeProber): void {
  if (!prober.readyWritten && cell.clock.ms >= prober.startMs) {
    prober.readyWritten = true;
    const dir = join(cell.root, jobOutputDir(entry.job.metadata.name));
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'probing.json'), JSON.stringify({ probingSinceEpochMs: prober.startMs }));
  }
  // It ends once every address connected, or when it gives up.
  const watched = prober.targets.map((t) => watch(cell, prober, t, cell.clock.ms));
  const end = Math.max(...watched.map((w) => w.connectedAtEpochMs ?? Number.POSITIVE_INFINITY));
  entry.durationMs = Math.min(end, prober.startMs + prober.giveUpMs) + 50 - entry.createdAtMs;
}

/**
 * What the prober sees of one address up to `untilMs`: attempts from its start, each timing out
 * (no rule: the SYN is dropped), refused at once (kube-proxy's REJECT while the Service has no
 * endpoints yet), or connecting once the datapath forwards the address.
 */
function watch(cell: FakeCell, prober: FakeProber, target: string, untilMs: number): WatchedTarget {
  const service = cell.serviceAt(target.split(':')[0]);
  const runs: AttemptRun[] = [];
  let attempts = 0;
  let refused = 0;
  let timedOut = 0;
  let connectedAt: number | null = null;
  const stagger = prober.targets.indexOf(target) * 0.05;
  let t = prober.startMs + stagger;
  const limit = Math.min(untilMs, prober.startMs + prober.giveUpMs);
  while (t <= limit) {
    attempts++;
    if (service && t >= service.programmedAtMs) {
      addAttempt(runs, 'connected', t);
      connectedAt = t + 0.08;
      break;
    }
    if (service && t >= service.rejectsFromMs && prober.stepMs === undefined) {
      addAttempt(runs, 'refused', t);
      refused++;
      t += 0.4;
    } else {
      addAttempt(runs, 'timeout', t);
      timedOut++;
      t += prober.stepMs ?? prober.attemptTimeoutMs + 0.2;
    }
  }
  return {
    target,
    probingSinceEpochMs: prober.startMs + stagger,
    connectedAtEpochMs: connectedAt,
    attempts,
    refused,
    timedOut,
    otherErrors: {},
    attemptRuns: runs,
  };
}

export function proberOutput(cell: FakeCell, job: JobObject): WatchProberOutput {
  const entry = cell.jobs.get(`${job.metadata.namespace}/${job.metadata.name}`);
  const prober = entry?.prober;
  if (!prober) throw new Error(`fake cell: job/${job.metadata.name} is not a prober`);
  return {
    probe: 'service-prober',
    mode: 'watch',
    attemptTimeoutMs: prober.attemptTimeoutMs,
    giveUpMs: prober.giveUpMs,
    watched: prober.targets.map((t) => watch(cell, prober, t, cell.clock.ms)),
  };
}
