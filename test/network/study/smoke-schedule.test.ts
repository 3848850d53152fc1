import { describe, expect, test } from 'vitest';
import { loadLabConfig } from '../../../lib/config/load.ts';
import { networkSmokePlan } from '../../../lib/network/study/smoke.ts';
import {
  conflict,
  mayStart,
  replay,
  runFootprint,
  type ScheduleItem,
  SMOKE_CONCURRENCY,
  scheduleItems,
  scheduleRuns,
  smokeSchedule,
} from '../../../lib/network/study/smoke-schedule.ts';
import { runSeconds } from '../../../lib/network/study/timing.ts';

const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;
const mesh = networkSmokePlan(config, 'mesh');
const items = scheduleItems(mesh.runs, mesh.mesh);
const item = (id: string) => items.find((i) => i.run.id === `smoke-${id}`) as ScheduleItem;
const seconds = mesh.runs.map((run, i) => {
  const t = runSeconds(run, mesh.runs.slice(0, i));
  return t.load + t.overhead;
});

describe("which smoke runs may share a cell (docs/network-study.md, the smoke study's schedule)", () => {
  test('E9 and E10 run alone', () => {
    for (const id of ['e9-services-0', 'e9-new-connection-0', 'e9-services-100', 'e10-limit-1024']) {
      expect(runFootprint(item(id).run, 'sidecar').alone, id).toBeDefined();
      expect(conflict(item(id), item('e2-matrix')), id).toMatch(/runs alone/);
    }
  });

  test("a mesh run's destination gets no other traffic while its counters are read; plain runs share", () => {
    // E4's L4 arm reads fortio.mesh's sidecar; E2's curls reach it.
    expect(conflict(item('e4-mesh-l4-r1'), item('e2-matrix'))).toBe(
      'smoke-e4-mesh-l4-r1 reads the counters of mesh/fortio, which smoke-e2-matrix sends to',
    );
    expect(conflict(item('e5-mesh-mtls-r1'), item('e6-mesh-mtls-r1'))).toMatch(/counters of mesh\/fortio/);
    // E3's mTLS-off arm reads fortio-permissive's; E8's curls reach it.
    expect(conflict(item('e3-fixed-mesh-mtls-off-r1'), item('e8-strict-exceptions'))).toMatch(
      /counters of mesh\/fortio-permissive/,
    );
    // Different destinations, and plain runs whose counters nobody reads.
    expect(conflict(item('e7-mesh-mtls-r1'), item('e2-matrix'))).toBeUndefined();
    expect(conflict(item('e5-plain-r1'), item('e6-plain-r1'))).toBeUndefined();
    expect(conflict(item('e2-matrix'), item('e8-strict-exceptions'))).toBeUndefined();
  });

  test('on an ambient cell the counters are per namespace (ztunnel): any traffic into it conflicts', () => {
    const ambient = scheduleItems(mesh.runs, 'ambient');
    const of = (id: string) => ambient.find((i) => i.run.id === `smoke-${id}`) as ScheduleItem;
    expect(conflict(of('e7-mesh-mtls-r1'), of('e2-matrix'))).toMatch(/reads the counters of mesh,/);
  });

  test('a saturating run runs beside the mTLS curls only', () => {
    expect(conflict(item('e1s-plain-r1'), item('e5-plain-r1'))).toMatch(/saturates the host's vCPUs/);
    expect(conflict(item('e1s-plain-r1'), item('e2-matrix'))).toBeUndefined();
  });

  test("the first run that may restart a namespace's pods shares it with no run", () => {
    expect(item('e1-mesh-mtls-r1').establishes).toEqual(['mesh']);
    expect(item('e2-matrix').establishes).toEqual(['mesh-default']);
    expect(item('e1s-mesh-mtls-r1').establishes).toEqual([]);
    expect(conflict(item('e1-mesh-mtls-r1'), item('e7-mesh-mtls-r1'))).toMatch(
      /may restart the pods of mesh/,
    );
    expect(conflict(item('e1-mesh-mtls-r1'), item('c-r1'))).toBeUndefined();
  });

  test('mayStart: the bound, then every conflict with a run in flight', () => {
    expect(mayStart(item('c-r1'), [], 1)).toBeUndefined();
    expect(mayStart(item('c-r1'), [item('e5-plain-r1')], 1)).toBe('1 run in flight');
    expect(mayStart(item('c-r1'), [item('e5-plain-r1'), item('e6-plain-r1')], 3)).toBeUndefined();
    expect(mayStart(item('e4-mesh-l4-r1'), [item('e5-plain-r1'), item('e2-matrix')], 3)).toMatch(/counters/);
  });
});

describe('the schedule', () => {
  test('one at a time: the plan order, the runs added up', () => {
    const serial = scheduleRuns(items, seconds, 1);
    expect(serial.order.map((r) => r.item.run.id)).toEqual(mesh.runs.map((r) => r.id));
    expect(serial.makespanSeconds).toBeCloseTo(
      seconds.reduce((a, b) => a + b, 0),
      6,
    );
    expect(serial.maxConcurrent).toBe(1);
  });

  test('the mesh cell: at most 3 at once, no conflicting pair overlapping, alone runs fenced in plan order', () => {
    const schedule = smokeSchedule(mesh.runs, mesh.mesh);
    expect(schedule.limit).toBe(SMOKE_CONCURRENCY);
    expect(schedule.maxConcurrent).toBe(3);
    const { order } = schedule;
    for (const a of order)
      for (const b of order)
        if (a !== b && a.startSeconds < b.endSeconds && b.startSeconds < a.endSeconds)
          expect(conflict(a.item, b.item), `${a.item.run.id} / ${b.item.run.id}`).toBeUndefined();
    // A run that must be alone starts after every run before it in the plan ended, and before any after it.
    for (const alone of order.filter((r) => r.item.footprint.alone)) {
      for (const other of order.filter((r) => r !== alone)) {
        if (other.item.index < alone.item.index)
          expect(other.endSeconds).toBeLessThanOrEqual(alone.startSeconds);
        else expect(other.startSeconds).toBeGreaterThanOrEqual(alone.endSeconds);
      }
    }
    // Shorter than one at a time, and the runner's way through the order gives the same times.
    expect(schedule.makespanSeconds).toBeLessThan(scheduleRuns(items, seconds, 1).makespanSeconds - 100);
    const again = replay(
      order.map((r) => r.item),
      seconds,
      SMOKE_CONCURRENCY,
    );
    expect(again.order.map((r) => [r.item.run.id, r.startSeconds])).toEqual(
      order.map((r) => [r.item.run.id, r.startSeconds]),
    );
  });

  test('a limit below 1 is refused, naming it', () => {
    expect(() => replay(items, seconds, 0)).toThrow("the smoke schedule's limit must be at least 1, not 0");
  });
});
