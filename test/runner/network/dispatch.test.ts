import { describe, expect, it } from 'vitest';
import { loadLabConfig } from '../../../lib/config/load.ts';
import { networkSmokePlan } from '../../../lib/network/study/smoke.ts';
import type { ScheduleItem } from '../../../lib/network/study/smoke-schedule.ts';
import { dispatchRuns, runOrder } from '../../../lib/runner/network/dispatch.ts';

/** The runner's way through a smoke schedule, with runs that end when the test says. */

const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;
const plan = networkSmokePlan(config, 'mesh');

function gatedRuns() {
  const started: string[] = [];
  const ends = new Map<string, { resolve: () => void; reject: (e: unknown) => void }>();
  const execute = (item: ScheduleItem) =>
    new Promise<void>((resolve, reject) => {
      started.push(item.run.id);
      ends.set(item.run.id, { resolve, reject });
    });
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  return { started, ends, execute, settle };
}

describe('dispatchRuns (lib/runner/network/dispatch.ts)', () => {
  it("starts the schedule's runs in its order, a run that must wait only once those in flight let it", async () => {
    const order = runOrder(plan, true);
    const { started, ends, execute, settle } = gatedRuns();
    const waited: string[] = [];
    const done = dispatchRuns(order, {
      skip: async () => false,
      beforeStart: () => {},
      execute,
      waiting: async (item, why) => {
        waited.push(`${item.run.id}: ${why}`);
      },
    });
    await settle();
    // Three at once: calibration and E1's two arms; E1s' plain run saturates, so it waits.
    expect(started).toEqual(['smoke-c-r1', 'smoke-e1-plain-r1', 'smoke-e1-mesh-mtls-r1']);
    expect(waited).toEqual(['smoke-e1s-plain-r1: 3 runs in flight']);
    ends.get('smoke-c-r1')?.resolve();
    await settle();
    // A slot is free, but the saturating run must not run beside E1's timed runs.
    expect(started).toHaveLength(3);
    ends.get('smoke-e1-plain-r1')?.resolve();
    ends.get('smoke-e1-mesh-mtls-r1')?.resolve();
    await settle();
    expect(started.slice(3)).toEqual(['smoke-e1s-plain-r1', 'smoke-e2-matrix', 'smoke-e8-strict-exceptions']);
    // Let every run end as soon as it starts.
    for (const [, end] of ends) end.resolve();
    while (started.length < order.items.length) {
      await settle();
      for (const [, end] of ends) end.resolve();
    }
    await done;
    expect(started).toEqual(order.items.map((i) => i.run.id));
  });

  it('after a run fails, starts nothing more, waits for the runs in flight, then throws the first error', async () => {
    const order = runOrder(plan, true);
    const { started, ends, execute, settle } = gatedRuns();
    let failure: unknown;
    const done = dispatchRuns(order, { skip: async () => false, beforeStart: () => {}, execute }).catch(
      (error: unknown) => {
        failure = error;
      },
    );
    await settle();
    ends.get('smoke-e1-plain-r1')?.reject(new Error('API unreachable'));
    await settle();
    expect(failure).toBeUndefined(); // two runs are still in flight
    expect(started).toHaveLength(3);
    ends.get('smoke-c-r1')?.resolve();
    ends.get('smoke-e1-mesh-mtls-r1')?.reject(new Error('second'));
    await done;
    expect((failure as Error).message).toBe('API unreachable');
    expect(started).toHaveLength(3);
  });

  it('the full study: one run at a time, in the plan order; a stop before a start starts nothing', async () => {
    const order = runOrder(plan, false);
    expect(order.limit).toBe(1);
    expect(order.items.map((i) => i.run.id)).toEqual(plan.runs.map((r) => r.id));
    const { started, execute } = gatedRuns();
    await expect(
      dispatchRuns(order, {
        skip: async () => false,
        beforeStart: () => {
          throw new Error('stop requested');
        },
        execute,
      }),
    ).rejects.toThrow('stop requested');
    expect(started).toEqual([]);
  });
});
