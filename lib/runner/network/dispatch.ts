import type { NetworkStudyPlan } from '../../network/study/model.ts';
import {
  mayStart,
  type ScheduleItem,
  scheduleItems,
  smokeSchedule,
} from '../../network/study/smoke-schedule.ts';

/**
 * How a cell's runner goes through its runs: the full study one at a time in the plan's order; a
 * smoke study in the order of its schedule (lib/network/study/smoke-schedule.ts, the one `lab plan`
 * times), each run starting once every run before it in that order has started and `mayStart`
 * lets it beside the runs in flight. Ends, waits and records stay the runner's.
 */

/** The order and the bound the runner follows. */
export interface RunOrder {
  readonly items: readonly ScheduleItem[];
  readonly limit: number;
}

/** The full study: the plan's order, one run at a time. The smoke study: its schedule's. */
export function runOrder(plan: NetworkStudyPlan, smoke: boolean): RunOrder {
  if (!smoke) return { items: scheduleItems(plan.runs, plan.mesh), limit: 1 };
  const schedule = smokeSchedule(plan.runs, plan.mesh);
  return { items: schedule.order.map((r) => r.item), limit: schedule.limit };
}

export interface DispatchSteps {
  /** True when the run needs no start (recorded earlier); the runner says so. */
  readonly skip: (item: ScheduleItem) => Promise<boolean>;
  /** Before a run starts: throws when the runner was told to stop. */
  readonly beforeStart: () => void;
  /** Runs, judges and records one run. */
  readonly execute: (item: ScheduleItem) => Promise<void>;
  /** Said when a run waits for a slot or for a run it must not overlap. */
  readonly waiting?: (item: ScheduleItem, why: string) => Promise<void>;
}

/**
 * Starts the runs in order, at most `limit` at once and never two that conflict. The first error
 * (a stop, an outage past its limit) starts no further run; the runs in flight are awaited (a stop
 * ends their waits), and then the error is thrown.
 */
export async function dispatchRuns(order: RunOrder, steps: DispatchSteps): Promise<void> {
  const inFlight = new Map<number, { item: ScheduleItem; done: Promise<void> }>();
  let failure: { error: unknown } | undefined;
  const running = () => [...inFlight.values()].map((f) => f.item);
  for (const item of order.items) {
    if (failure) break;
    if (await steps.skip(item)) continue;
    let why = mayStart(item, running(), order.limit);
    if (why !== undefined) await steps.waiting?.(item, why);
    while (why !== undefined && !failure) {
      await Promise.race([...inFlight.values()].map((f) => f.done));
      why = mayStart(item, running(), order.limit);
    }
    if (failure) break;
    try {
      steps.beforeStart();
    } catch (error) {
      failure = { error };
      break;
    }
    const done = steps
      .execute(item)
      .catch((error: unknown) => {
        failure ??= { error };
      })
      .finally(() => inFlight.delete(item.index));
    inFlight.set(item.index, { item, done });
  }
  await Promise.all([...inFlight.values()].map((f) => f.done));
  if (failure) throw failure.error;
}
