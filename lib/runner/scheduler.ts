import { runPrerequisites, type StudyRun } from '../study/plan.ts';
import type { RunAttempt, RunRecord } from '../study/results.ts';
import { identicalPrefixStop } from '../study/validity.ts';
import type { StudyRecords } from './records.ts';
import type { RunPipeline } from './run-pipeline.ts';
import type { RunnerContext } from './runner-context.ts';
import { StudyStopError } from './study-stop.ts';

/**
 * Scheduling and attempts: which run starts when (each as soon as the runs it waits for have
 * ended), and how many attempts a run gets. Every attempt is written the moment it ends, and
 * its client files are its own (`attempts/<run-id>/<n>/`, write-once), so a runner killed at
 * any point loses no attempt and no file.
 */

/** What the scheduler needs of the runner around it. */
export interface SchedulerParts {
  readonly ctx: RunnerContext;
  readonly records: StudyRecords;
  readonly pipeline: RunPipeline;
  /** A run starts (status.json shows it) or ends. */
  readonly started: (run: StudyRun, index: number) => void;
  readonly ended: (run: StudyRun) => void;
  /** The runs this process finished (recorded or stopped), for staging's prerequisites. */
  readonly finished: Set<string>;
}

/** Why a resumed run is attempted again. */
export const RESUMED_CAUSE = 'the study was resumed and this run had no valid record';

/** An earlier attempt as kept in the record of the next one. */
export function asAttempt(record: RunRecord, retriedBecause: string): RunAttempt {
  const { attempts: _nested, ...attempt } = record;
  return { ...attempt, retriedBecause };
}

export class Scheduler {
  constructor(private readonly p: SchedulerParts) {}

  /**
   * Every run of the plan, each as soon as the earlier runs it waits for have ended
   * (`runPrerequisites`): the bound sweep one run per replica at once, and with
   * `study.parallelism: 2` each replica pair through its own runs beside the other. Once a run
   * stops the study, no further run starts; the runs already going finish and are recorded, then
   * the stop of the earliest run in plan order is thrown (runs at once may each find it).
   */
  async runInOrder(): Promise<void> {
    const { ctx, records } = this.p;
    const { plan, config } = ctx;
    const position = new Map(plan.runs.map((run, i) => [run.id, i + 1]));
    const after = runPrerequisites(plan);
    const ended = new Map<string, Promise<void>>();
    let stop: { index: number; error: unknown } | undefined;
    const stopAt = (index: number, error: unknown) => {
      if (!stop || index < stop.index) stop = { index, error };
    };
    /** Runs that started in this process, those going now, and which runs ran beside each. */
    const started = new Set<string>();
    const running = new Set<string>();
    const beside = new Map<string, Set<string>>();
    const step = async (run: StudyRun): Promise<void> => {
      const index = position.get(run.id) as number;
      const total = plan.runs.length;
      if (stop) return;
      if (records.valid(run.id)) {
        await ctx.say(`run ${index}/${total} ${run.id}: valid record exists, skipped`);
        return;
      }
      // Told to stop (SIGTERM): no new run starts.
      ctx.deps.stop?.throwIfRequested();
      // Before any await, so that runs starting together see each other.
      const others = [...running];
      running.add(run.id);
      started.add(run.id);
      beside.set(run.id, new Set(others));
      for (const other of others) beside.get(other)?.add(run.id);
      if (others.length > 0)
        await ctx.say(`run ${index}/${total} ${run.id} runs beside ${others.join(', ')}`);
      const overlaps = () => {
        const overlapped = [...(beside.get(run.id) ?? [])];
        return overlapped.length > 0 ? { overlappedWith: overlapped } : {};
      };
      const done = await this.runWithAttempts(index, run, overlaps);
      running.delete(run.id);
      this.p.finished.add(run.id);
      if ('error' in done) {
        stopAt(index, done.error);
        return;
      }
      this.p.ended(run);
      await records.keep({ ...done.record, ...overlaps() });
      const saved = records.records.get(run.id) as RunRecord;
      await ctx.say(
        `run ${index}/${total} ${run.id}: ${saved.valid ? 'valid' : `INVALID: ${saved.invalidReasons.join('; ')}`}`,
      );
      const verdict = identicalPrefixStop(
        [...records.records.values()],
        plan.runs.filter((r) => !started.has(r.id) && !records.valid(r.id)),
        config.benchmark.image,
      );
      if (verdict) stopAt(index, new StudyStopError(verdict));
    };
    for (const run of plan.runs) {
      const waits = (after.get(run.id) ?? []).map((id) => ended.get(id));
      ended.set(
        run.id,
        Promise.all(waits)
          .then(() => step(run))
          .catch((error: unknown) => stopAt(position.get(run.id) as number, error)),
      );
    }
    await Promise.all(ended.values());
    if (stop) throw stop.error;
  }

  /**
   * A run, with the attempts it needs: an invalid record of an earlier runner becomes its first
   * attempt(s), and an attempt that ended invalid for a cause that may pass (`retryCause`) is
   * followed by another, from a fresh, verified reset, up to `runAttempts` in this process. Each
   * attempt that is followed by another is written at once. Never throws: a failure comes back
   * as `error`, so that the runs of the same wave can all be recorded first.
   */
  private async runWithAttempts(
    index: number,
    run: StudyRun,
    overlaps: () => Partial<Pick<RunRecord, 'overlappedWith'>>,
  ): Promise<{ record: RunRecord } | { error: unknown }> {
    const { ctx, records } = this.p;
    const earlier = records.records.get(run.id);
    let history: RunAttempt[] = earlier
      ? [...(earlier.attempts ?? []), asAttempt(earlier, RESUMED_CAUSE)]
      : [];
    for (let tries = 1; ; tries++) {
      try {
        const last = history.at(-1);
        const attempt = await records.studyFiles.claimAttempt(run.id, (last?.attempt ?? history.length) + 1);
        this.p.started(run, index);
        const result = await this.p.pipeline.attempt(run, attempt);
        // An attempt that ended after the runner was told to stop is not kept: what it measured
        // may be cut short, and a resumed study runs it again.
        ctx.deps.stop?.throwIfRequested();
        const record: RunRecord = {
          ...result.record,
          attempt,
          ...(history.length > 0 ? { attempts: history } : {}),
        };
        if (!result.retryBecause || tries >= ctx.options.runAttempts) return { record };
        await ctx.say(
          `run ${index}/${ctx.plan.runs.length} ${run.id}: ${result.retryBecause}; trying again (attempt ${tries + 1} of at most ${ctx.options.runAttempts} in this runner)`,
        );
        // Written now: a runner killed during the next attempt keeps this one.
        const kept = { ...record, ...overlaps() };
        await records.keep(kept);
        history = [...history, asAttempt(kept, result.retryBecause)];
      } catch (error) {
        return { error };
      }
    }
  }
}
