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
import type { FakeCell, FakeJob, FakeService } from './fake-cell.ts';

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
  /** The attempts on each address so far, by target (watch). */
  watching?: Map<string, Watching>;
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

/** How far the prober got on one address: its attempts so far, and where the next one starts. */
interface Watching {
  /** The Service the attempts were judged against (a later one judges them anew). */
  readonly service: FakeService | undefined;
  readonly runs: AttemptRun[];
  attempts: number;
  refused: number;
  timedOut: number;
  connectedAt: number | null;
  /** When the next attempt starts. */
  t: number;
  /** The time up to which attempts were made. */
  limit: number;
}

/**
 * What the prober sees of one address up to `untilMs`: attempts from its start, each timing out
 * (no rule: the SYN is dropped), refused at once (kube-proxy's REJECT while the Service has no
 * endpoints yet), or connecting once the datapath forwards the address. The runner polls the
 * prober's Job every second of fake time and each poll asks again, so the attempts made so far are
 * kept (FakeProber.watching) and continued from where they stopped: the same attempts, at the same
 * times, as going through them all from the start each time (tens of thousands of refused ones
 * 0.4 ms apart), as long as the address's Service is the same one.
 */
function watch(cell: FakeCell, prober: FakeProber, target: string, untilMs: number): WatchedTarget {
  const service = cell.serviceAt(target.split(':')[0]);
  const stagger = prober.targets.indexOf(target) * 0.05;
  const limit = Math.min(untilMs, prober.startMs + prober.giveUpMs);
  prober.watching ??= new Map();
  let w = prober.watching.get(target);
  if (!w || w.service !== service || limit < w.limit) {
    w = {
      service,
      runs: [],
      attempts: 0,
      refused: 0,
      timedOut: 0,
      connectedAt: null,
      t: prober.startMs + stagger,
      limit,
    };
    prober.watching.set(target, w);
  }
  w.limit = limit;
  while (w.connectedAt === null && w.t <= limit) {
    w.attempts++;
    if (service && w.t >= service.programmedAtMs) {
      addAttempt(w.runs, 'connected', w.t);
      w.connectedAt = w.t + 0.08;
      break;
    }
    if (service && w.t >= service.rejectsFromMs && prober.stepMs === undefined) {
      // Refused until the programming (or the limit), 0.4 ms apart: thousands of attempts a
      // second, one run of them. The same times, step by step, as addAttempt once for each, which
      // made an object per attempt (most of the whole rehearsal's garbage).
      const first = w.t;
      let last = first;
      let count = 0;
      while (w.t <= limit && w.t < service.programmedAtMs) {
        last = w.t;
        count++;
        w.t += 0.4;
      }
      addAttempt(w.runs, 'refused', first);
      const run = w.runs[w.runs.length - 1];
      w.runs[w.runs.length - 1] = { ...run, count: run.count + count - 1, lastStartEpochMs: last };
      w.attempts += count - 1;
      w.refused += count;
    } else {
      addAttempt(w.runs, 'timeout', w.t);
      w.timedOut++;
      w.t += prober.stepMs ?? prober.attemptTimeoutMs + 0.2;
    }
  }
  return {
    target,
    probingSinceEpochMs: prober.startMs + stagger,
    connectedAtEpochMs: w.connectedAt,
    attempts: w.attempts,
    refused: w.refused,
    timedOut: w.timedOut,
    otherErrors: {},
    // addAttempt replaces a run rather than changing it: a copy of the list is a snapshot.
    attemptRuns: [...w.runs],
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
