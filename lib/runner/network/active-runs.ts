import { AsyncLocalStorage } from 'node:async_hooks';
import type { NetworkRun } from '../../network/study/model.ts';
import type { ActiveRun } from '../status.ts';

/** A run in flight, as the network runner tracks it. */
export interface NetworkActiveRun extends ActiveRun {
  readonly run: NetworkRun;
}

/**
 * The runs in flight of a cell's runner: one in the full study, up to the smoke schedule's bound
 * in a smoke study (dispatch.ts). A step names its phase without naming its run: the run is the
 * one whose work is calling (an async scope), so concurrent runs keep their own phases.
 */
export class ActiveRuns {
  private readonly runs = new Map<string, NetworkActiveRun>();
  private readonly scope = new AsyncLocalStorage<string>();

  /** Runs `work` as the run in flight `run` (index: its place in the plan, from 1). */
  async within<T>(index: number, run: NetworkRun, startedAt: Date, work: () => Promise<T>): Promise<T> {
    this.runs.set(run.id, { index, run, startedAt, phase: 'starting' });
    try {
      return await this.scope.run(run.id, work);
    } finally {
      this.runs.delete(run.id);
    }
  }

  /** The run of the calling work, else the earliest of the plan in flight (status.json's current run). */
  current(): NetworkActiveRun | undefined {
    const id = this.scope.getStore();
    const own = id === undefined ? undefined : this.runs.get(id);
    if (own) return own;
    let earliest: NetworkActiveRun | undefined;
    for (const entry of this.runs.values()) if (!earliest || entry.index < earliest.index) earliest = entry;
    return earliest;
  }

  /** Sets the calling run's phase; false when no run is in flight. */
  setPhase(phase: string): boolean {
    const entry = this.current();
    if (!entry) return false;
    this.runs.set(entry.run.id, { ...entry, phase });
    return true;
  }

  /** How many runs are in flight. */
  get size(): number {
    return this.runs.size;
  }
}
