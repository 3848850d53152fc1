import type { Datapath, MeshMode } from '../../config/network.ts';
import { serviceOfUrl } from '../topology.ts';
import type { NetworkRun } from './model.ts';
import {
  DEFAULT_NETWORK_RUN_OVERHEADS,
  meshRestart,
  type NetworkRunOverheads,
  runSeconds,
  serviceCleanupSeconds,
  studyStartSeconds,
} from './timing.ts';

/**
 * Which smoke runs may share the cell, and the schedule that runs them: the same pure functions
 * decide the order and the admission of each run in the runner (lib/runner/network/dispatch.ts)
 * and the smoke study's duration in `lab plan` (planner.ts). A smoke run proves a path, not a
 * number, and its load is tiny, so runs that cannot disturb each other's evidence run at the same
 * time, at most SMOKE_CONCURRENCY at once. Each run starts its Jobs one after the other, so that
 * is also the most Jobs of the smoke study alive at once. The full study runs one run at a time.
 */

/** At most this many smoke runs (so Jobs) at once on a cell (its budget: docs/facts.md §N8, test/charts/network/cell-budget.test.ts). */
export const SMOKE_CONCURRENCY = 3;

/** What a run does to the cell that another run could notice, or could do to it. */
export interface RunFootprint {
  /** Why it must have the cell to itself (no run beside it), if it must. */
  readonly alone?: string;
  /** Its load is unbounded (`-qps 0`): it takes the host's vCPUs. */
  readonly saturates: boolean;
  /** Its validity depends on its timing (a rate, a latency, a speed): every run but the mTLS curls. */
  readonly timed: boolean;
  /** Destinations whose Istio counters it reads around its load: no other traffic may reach them meanwhile. */
  readonly reads: readonly string[];
  /** Destinations its traffic reaches (`<namespace>/<service>`, and `<namespace>` for ztunnel's per-namespace counts). */
  readonly sends: readonly string[];
  /** Namespaces it has pods in or sends to. */
  readonly namespaces: readonly string[];
  /** Namespaces whose pods its preconditions may delete (restarted into the mesh). */
  readonly restarts: readonly string[];
}

const destination = (url: string, clientNamespace: string) => {
  const { service, namespace } = serviceOfUrl(url, clientNamespace);
  return { keys: [`${namespace}/${service}`, namespace], namespace, service };
};

/** A run's footprint on a cell of this mesh mode (docs/network-study.md, "the smoke study's schedule"). */
export function runFootprint(run: NetworkRun, mesh: MeshMode): RunFootprint {
  const restarts = run.preconditions.flatMap((p) =>
    p.kind === 'pods-restarted-after-label' ? [p.namespace] : [],
  );
  const { spec } = run;
  const base = { restarts, saturates: false, timed: true, reads: [], sends: [], namespaces: [] };
  switch (spec.kind) {
    case 'service-scale':
      return {
        ...base,
        alone:
          "E9 times a new Service's programming and counts the datapath's entries: another run's pods and connections would be in its figures",
      };
    case 'conntrack':
      return {
        ...base,
        alone: "E10 lowers the host's nf_conntrack_max: every connection on the host counts against it",
      };
    case 'mtls': {
      const targets = spec.cases.map((c) => destination(c.url, c.clientNamespace));
      return {
        ...base,
        // Judged by each curl's outcome, not by its timing or by counters.
        timed: false,
        sends: [...new Set(targets.flatMap((t) => t.keys))],
        namespaces: [
          ...new Set([...spec.cases.map((c) => c.clientNamespace), ...targets.map((t) => t.namespace)]),
        ],
      };
    }
    case 'fortio':
    case 'download':
    case 'sse': {
      if (run.experiment === 'E9')
        return {
          ...base,
          alone: "E9's new-connection run measures the datapath at the step's Service count",
        };
      const target = destination(spec.url, spec.clientNamespace);
      // Mesh arms are judged by the destination's counters over the run: the server's sidecar, or
      // on an ambient cell ztunnel's count of connections into the server's namespace.
      const meshArm = spec.arm !== 'plain' && mesh !== 'none';
      const reads = meshArm ? [mesh === 'ambient' ? target.namespace : target.keys[0]] : [];
      return {
        ...base,
        saturates: spec.kind === 'fortio' && spec.mode === 'saturation',
        reads,
        sends: target.keys,
        namespaces: [...new Set([spec.clientNamespace, target.namespace])],
      };
    }
  }
}

/** A run of the schedule with its footprint and its planned seconds. */
export interface ScheduleItem {
  readonly run: NetworkRun;
  /** Its place in the plan (the checklist's and the records' order). */
  readonly index: number;
  readonly footprint: RunFootprint;
  /**
   * The first run of the plan whose preconditions may restart these namespaces' pods: no run
   * using them starts before it has finished, and none runs beside it.
   */
  readonly establishes: readonly string[];
}

/** Why `a` and `b` must not run at the same time, or undefined when they may. */
export function conflict(a: ScheduleItem, b: ScheduleItem): string | undefined {
  for (const [x, y] of [
    [a, b],
    [b, a],
  ]) {
    if (x.footprint.alone) return `${x.run.id} runs alone: ${x.footprint.alone}`;
    const read = x.footprint.reads.find((d) => y.footprint.sends.includes(d));
    if (read) return `${x.run.id} reads the counters of ${read}, which ${y.run.id} sends to`;
    if (x.footprint.saturates && y.footprint.timed)
      return `${x.run.id} saturates the host's vCPUs, and ${y.run.id} is judged by its timing`;
    const restarted = x.establishes.find((n) => y.footprint.namespaces.includes(n));
    if (restarted) return `${x.run.id} may restart the pods of ${restarted}, which ${y.run.id} uses`;
  }
  return undefined;
}

/** Whether `next` may start beside the runs in flight (`limit` at most); the reason when it may not. */
export function mayStart(
  next: ScheduleItem,
  inFlight: readonly ScheduleItem[],
  limit: number,
): string | undefined {
  if (inFlight.length >= limit) return `${limit} run${limit === 1 ? '' : 's'} in flight`;
  for (const other of inFlight) {
    const why = conflict(next, other);
    if (why) return why;
  }
  return undefined;
}

/** The plan's runs with their footprints and the namespaces each establishes. */
export function scheduleItems(runs: readonly NetworkRun[], mesh: MeshMode): ScheduleItem[] {
  const established = new Set<string>();
  return runs.map((run, index) => {
    const footprint = runFootprint(run, mesh);
    const establishes = footprint.restarts.filter((n) => !established.has(n));
    for (const n of establishes) established.add(n);
    return { run, index, footprint, establishes };
  });
}

/** One run's place in the schedule, in planned seconds from the first run's start. */
export interface ScheduledRun {
  readonly item: ScheduleItem;
  readonly startSeconds: number;
  readonly endSeconds: number;
}

export interface RunSchedule {
  /** The runs in the order they start (the runner starts them in this order). */
  readonly order: readonly ScheduledRun[];
  readonly makespanSeconds: number;
  /** The most runs in flight at once. */
  readonly maxConcurrent: number;
  readonly limit: number;
}

/**
 * The order the runs start in: whenever a run ends, every waiting run that may start (mayStart)
 * starts, earliest in the plan first, with two fences: a run that must be alone starts after every
 * run before it in the plan and before any after it, and a run that restarts a namespace's pods
 * ends before a later run using the namespace starts. `seconds[i]` is run i's planned duration.
 * With `limit` 1, the plan's order.
 */
export function scheduleRuns(
  items: readonly ScheduleItem[],
  seconds: readonly number[],
  limit: number,
): RunSchedule {
  const order = startOrder(items, seconds, limit);
  return replay(order, seconds, limit);
}

function startOrder(
  items: readonly ScheduleItem[],
  seconds: readonly number[],
  limit: number,
): ScheduleItem[] {
  const waiting = [...items];
  const running: { item: ScheduleItem; end: number }[] = [];
  const ended = new Set<number>();
  const order: ScheduleItem[] = [];
  let now = 0;
  const fenced = (item: ScheduleItem) =>
    waiting.some((w) => w.index < item.index && (w.footprint.alone || item.footprint.alone)) ||
    items.some(
      (e) =>
        e.index < item.index &&
        !ended.has(e.index) &&
        e.establishes.some((n) => item.footprint.namespaces.includes(n)),
    );
  while (waiting.length > 0) {
    for (const item of [...waiting]) {
      if (
        fenced(item) ||
        mayStart(
          item,
          running.map((r) => r.item),
          limit,
        )
      )
        continue;
      waiting.splice(waiting.indexOf(item), 1);
      running.push({ item, end: now + seconds[item.index] });
      order.push(item);
    }
    if (running.length === 0) throw new Error(`internal: no smoke run can start (${waiting[0]?.run.id})`);
    now = Math.min(...running.map((r) => r.end));
    for (const r of running.filter((each) => each.end <= now)) {
      running.splice(running.indexOf(r), 1);
      ended.add(r.item.index);
    }
  }
  return order;
}

/**
 * The runner's way through an order: each run starts once every run before it in the order has
 * started and mayStart lets it (lib/runner/network/dispatch.ts does the same with real ends).
 */
export function replay(
  order: readonly ScheduleItem[],
  seconds: readonly number[],
  limit: number,
): RunSchedule {
  if (!(limit >= 1)) throw new Error(`the smoke schedule's limit must be at least 1, not ${limit}`);
  const done: ScheduledRun[] = [];
  let inFlight: ScheduledRun[] = [];
  let now = 0;
  let maxConcurrent = 0;
  for (const item of order) {
    while (
      mayStart(
        item,
        inFlight.map((r) => r.item),
        limit,
      )
    ) {
      now = Math.max(now, Math.min(...inFlight.map((r) => r.endSeconds)));
      inFlight = inFlight.filter((r) => r.endSeconds > now);
    }
    const scheduled = { item, startSeconds: now, endSeconds: now + seconds[item.index] };
    inFlight.push(scheduled);
    done.push(scheduled);
    maxConcurrent = Math.max(maxConcurrent, inFlight.length);
  }
  return {
    order: done,
    makespanSeconds: Math.max(0, ...done.map((r) => r.endSeconds)),
    maxConcurrent,
    limit,
  };
}

/**
 * The smoke study's schedule on a cell, timed with `lab plan`'s assumptions (timing.ts): each run's
 * planned seconds (runSeconds), at most `limit` at once.
 */
export function smokeSchedule(
  runs: readonly NetworkRun[],
  mesh: MeshMode,
  overheads: NetworkRunOverheads = DEFAULT_NETWORK_RUN_OVERHEADS,
  limit = SMOKE_CONCURRENCY,
): RunSchedule {
  const seconds = runs.map((run, i) => {
    const t = runSeconds(run, runs.slice(0, i), overheads);
    return t.load + t.overhead;
  });
  return scheduleRuns(scheduleItems(runs, mesh), seconds, limit);
}

/**
 * A smoke study's seconds: the study's start (its host Jobs), the mesh pods' restart where it can
 * happen, the schedule's makespan, the Services' cleanup.
 */
export function smokeStudySeconds(
  runs: readonly NetworkRun[],
  cell: { readonly mesh: MeshMode; readonly datapath: Datapath },
  overheads: NetworkRunOverheads = DEFAULT_NETWORK_RUN_OVERHEADS,
): { seconds: number; schedule: RunSchedule } {
  const schedule = smokeSchedule(runs, cell.mesh, overheads);
  const seconds =
    studyStartSeconds(cell.datapath, overheads) +
    meshRestart(cell.mesh).seconds +
    schedule.makespanSeconds +
    serviceCleanupSeconds(runs, overheads);
  return { seconds, schedule };
}
