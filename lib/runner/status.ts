import type { AnyChecklist } from '../study/smoke-checklist.ts';

/**
 * `status.json`: where the study stands, rewritten on every step of the runner. The laptop's
 * `lab status` reads it; `study.json` stays the source of truth for results.
 */

/**
 * `interrupted`: the Kubernetes API stopped the study (unreachable past `runner.retry.outageMinutes`,
 * or refusing a call); unlike `failed` it never ends the host (runner.terminateWhenDone), and
 * `lab run` resumes the study.
 */
export type StudyState = 'starting' | 'running' | 'finished' | 'failed' | 'interrupted';

export interface CurrentRun {
  /** 1-based position in the plan. */
  readonly index: number;
  readonly id: string;
  /** `resetting prefix caches`, `restarting front end`, `waiting for job`, ... */
  readonly phase: string;
  readonly startedAt: string;
  readonly elapsedSeconds: number;
}

export interface StudyStatus {
  readonly state: StudyState;
  /** The study at work (`studies/<id>/`); absent while the runner has not chosen it yet. */
  readonly studyId?: string;
  /** When the study started (a resumed study keeps its first start). */
  readonly studyStartedAt?: string;
  /** When this runner process started (a resumed study has a later one than study.json). */
  readonly startedAt: string;
  readonly updatedAt: string;
  readonly totalRuns: number;
  /** Runs with a record, valid or not. */
  readonly recordedRuns: number;
  readonly validRuns: number;
  readonly invalidRuns: number;
  /** Ids of the runs recorded invalid so far. */
  readonly invalidRunIds?: readonly string[];
  /** Present while a run is in progress. */
  readonly current?: CurrentRun;
  /** Seconds until the study is done, from the mean duration of recorded runs; absent before one. */
  readonly etaSeconds?: number;
  /** The last progress line. */
  readonly message: string;
  /** Why the runner stopped, when state is `failed`. */
  readonly error?: string;
  /** `smoke` while the runner works on a smoke study (lib/study/smoke.ts), alone or as a full study's checks. */
  readonly profile?: 'smoke';
  /** The latest smoke checklist of this runner: the smoke study's, or the full study's checks. */
  readonly checklist?: AnyChecklist;
}

/** `2m10s`, `45s`, `1h02m03s`. */
export function formatElapsed(ms: number): string {
  const total = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  const pad = (n: number) => String(n).padStart(2, '0');
  if (h > 0) return `${h}h${pad(m)}m${pad(s)}s`;
  if (m > 0) return `${m}m${pad(s)}s`;
  return `${s}s`;
}

/** `41m`, `1h05m`, `<1m`. */
export function formatEta(ms: number): string {
  const minutes = Math.round(ms / 60_000);
  if (minutes < 1) return '<1m';
  const h = Math.floor(minutes / 60);
  const m = minutes % 60;
  return h > 0 ? `${h}h${String(m).padStart(2, '0')}m` : `${m}m`;
}

/**
 * Time left in the study: the current run's expected rest plus one mean duration per run still
 * to do after it. Undefined until a run has finished.
 */
export function studyEtaMs(
  finishedDurationsMs: readonly number[],
  currentElapsedMs: number,
  runsAfterCurrent: number,
): number | undefined {
  if (finishedDurationsMs.length === 0) return undefined;
  const mean = finishedDurationsMs.reduce((a, b) => a + b, 0) / finishedDurationsMs.length;
  return Math.max(0, mean - currentElapsedMs) + mean * runsAfterCurrent;
}

/** `run 7/25 arm-router-cache-aware-prefix: waiting for job (elapsed 2m10s, study ETA 41m)` */
export function progressLine(
  index: number,
  total: number,
  runId: string,
  phase: string,
  elapsedMs: number,
  etaMs: number | undefined,
): string {
  const eta = etaMs === undefined ? 'unknown' : formatEta(etaMs);
  return `run ${index}/${total} ${runId}: ${phase} (elapsed ${formatElapsed(elapsedMs)}, study ETA ${eta})`;
}

/**
 * When both labs' runners log a progress line while they wait: every `everyMs` after the last
 * one, a phase change logging one at once (and restarting the wait).
 */
export class ProgressTimer {
  private lastMs = 0;

  constructor(private readonly everyMs: number) {}

  /** A progress line was just logged (a phase change). */
  logged(nowMs: number): void {
    this.lastMs = nowMs;
  }

  /** Whether a periodic line is due; when it is, it counts as logged now. */
  due(nowMs: number): boolean {
    if (nowMs - this.lastMs < this.everyMs) return false;
    this.lastMs = nowMs;
    return true;
  }
}

/** The run in progress, as a runner tracks it. */
export interface ActiveRun {
  readonly index: number;
  readonly run: { readonly id: string };
  readonly phase: string;
  readonly startedAt: Date;
}

/** What both labs' runners know when they rewrite status.json. */
export interface StatusSnapshot {
  readonly state: StudyState;
  readonly studyId?: string;
  readonly studyStartedAt?: string;
  readonly startedAt: Date;
  readonly now: Date;
  /** The plan's run ids, in plan order. */
  readonly runIds: readonly string[];
  /** The latest record of each recorded run, by run id. */
  readonly records: ReadonlyMap<string, { readonly valid: boolean }>;
  readonly active?: ActiveRun;
  readonly elapsedMs: number;
  readonly etaMs: number | undefined;
  readonly message: string;
  readonly error?: string;
  readonly profile?: 'smoke';
  readonly checklist?: AnyChecklist;
}

/** status.json from a runner's state; one shape for the first lab's runner and the network lab's. */
export function studyStatus(snapshot: StatusSnapshot): StudyStatus {
  const { state, active, etaMs, error, records } = snapshot;
  const recorded = [...records.values()];
  return {
    state,
    ...(snapshot.studyId ? { studyId: snapshot.studyId } : {}),
    ...(snapshot.studyStartedAt ? { studyStartedAt: snapshot.studyStartedAt } : {}),
    startedAt: snapshot.startedAt.toISOString(),
    updatedAt: snapshot.now.toISOString(),
    totalRuns: snapshot.runIds.length,
    recordedRuns: recorded.length,
    validRuns: recorded.filter((r) => r.valid).length,
    invalidRuns: recorded.filter((r) => !r.valid).length,
    invalidRunIds: snapshot.runIds.filter((id) => records.get(id)?.valid === false),
    ...(active && state !== 'finished'
      ? {
          current: {
            index: active.index,
            id: active.run.id,
            phase: active.phase,
            startedAt: active.startedAt.toISOString(),
            elapsedSeconds: Math.round(snapshot.elapsedMs / 1000),
          },
        }
      : {}),
    ...(etaMs !== undefined && state === 'running' ? { etaSeconds: Math.round(etaMs / 1000) } : {}),
    message: snapshot.message,
    ...(error ? { error } : {}),
    ...(snapshot.profile ? { profile: snapshot.profile } : {}),
    ...(snapshot.checklist ? { checklist: snapshot.checklist } : {}),
  };
}
