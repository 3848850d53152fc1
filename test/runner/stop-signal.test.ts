import { EventEmitter } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { gateSelector } from '../../charts/gate-service.ts';
import { BENCHMARK_JOBS_SELECTOR } from '../../lib/runner/jobs.ts';
import { type Cluster, systemClock } from '../../lib/runner/ports.ts';
import type { StudyStatus } from '../../lib/runner/status.ts';
import {
  RunnerInterruptedError,
  STOP_CLEANUP_MS,
  StopRequest,
  signalExitCode,
  stopOnSignals,
} from '../../lib/runner/stop-signal.ts';
import type { StudyRecord } from '../../lib/study/results.ts';
import { withLoopLag } from '../network/probes/loopback.ts';
import { FakeClock } from './fakes.ts';
import { runIn, startLab, stopLabs } from './rehearsal-kit.ts';

/**
 * The runner told to stop (SIGTERM when its pod is deleted, SIGINT): the study stops at once as
 * `interrupted`, its clients are deleted, and a resumed study runs the cut-short run again.
 */

afterEach(stopLabs);

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

/** A clock whose sleeps end only when `advance` moves it past their end. */
class SteppedClock {
  ms = 0;
  private readonly sleepers: { until: number; wake: () => void }[] = [];
  now(): Date {
    return new Date(this.ms);
  }
  sleep(ms: number): Promise<void> {
    return new Promise((wake) => this.sleepers.push({ until: this.ms + ms, wake }));
  }
  async advance(ms: number): Promise<void> {
    this.ms += ms;
    for (const sleeper of this.sleepers.filter((s) => s.until <= this.ms)) {
      this.sleepers.splice(this.sleepers.indexOf(sleeper), 1);
      sleeper.wake();
    }
    // Let what the wake-ups resolved run.
    for (let i = 0; i < 10; i++) await Promise.resolve();
  }
}

describe('StopRequest', () => {
  it('ends a sleep going on at the request, on the real clock, and every later one at once', async () => {
    const stop = new StopRequest(systemClock);
    const clock = stop.clockOf(systemClock);
    const { value: tookMs, lagMs } = await withLoopLag(async () => {
      const started = performance.now();
      const sleeping = clock.sleep(60_000);
      setTimeout(() => stop.request('SIGTERM'), 20);
      await expect(sleeping).rejects.toThrow(RunnerInterruptedError);
      return performance.now() - started;
    });
    // At the request: 20 ms, plus what a starved process adds. A stall can land in two places
    // (the 20 ms timer fires late; the turn that rejects is preempted), each at most the worst
    // event-loop lag measured meanwhile (a fixed 2 s is what a loaded CI worker could miss).
    expect(tookMs).toBeLessThan(1_000 + 2 * lagMs);
    await expect(clock.sleep(1)).rejects.toThrow(/received SIGTERM/);
    expect(() => stop.throwIfRequested()).toThrow(RunnerInterruptedError);
  });

  it('lets a cleanup section wait after the request, until the cleanup time has passed', async () => {
    const fake = new FakeClock();
    const stop = new StopRequest(fake);
    const clock = stop.clockOf(fake);
    stop.request('SIGINT');
    const start = fake.ms;
    let polls = 0;
    const cleanup = stop.cleanup(async () => {
      for (;;) {
        polls++;
        await clock.sleep(2_000);
      }
    });
    await expect(cleanup).rejects.toThrow(/received SIGINT/);
    // The last sleep is cut to the deadline: the section never outlives it.
    expect(fake.ms - start).toBe(STOP_CLEANUP_MS);
    expect(polls).toBe(Math.ceil(STOP_CLEANUP_MS / 2_000) + 1);
    // Outside the section, the same clock throws at once.
    await expect(clock.sleep(1)).rejects.toThrow(RunnerInterruptedError);
  });

  // A cleanup sleep that had begun before the request went on to its end: a retry's backoff (up to
  // 30 s) outlived the cleanup time and the process's own exit limit, so the cleanup after it (the
  // client Jobs deleted) never ran. A clock whose sleeps end only when the test moves it forces
  // the request to come in the middle of one.
  it('cuts a cleanup sleep that began before the request to the cleanup deadline', async () => {
    const manual = new SteppedClock();
    const stop = new StopRequest(manual);
    const clock = stop.clockOf(manual);
    let woke = false;
    const cleanup = stop.cleanup(async () => {
      await clock.sleep(30_000);
      woke = true;
      await clock.sleep(1);
    });
    await manual.advance(1_000);
    stop.request('SIGTERM');
    await manual.advance(STOP_CLEANUP_MS - 1);
    expect(woke).toBe(false);
    await manual.advance(1);
    expect(woke).toBe(true);
    // Past the deadline the section's next wait throws: it never outlives the cleanup time.
    await expect(cleanup).rejects.toThrow(RunnerInterruptedError);
  });

  it('wraps a clock once, so a nested runner (the smoke checks) shares its stop', () => {
    const stop = new StopRequest(systemClock);
    const clock = stop.clockOf(systemClock);
    expect(stop.clockOf(clock)).toBe(clock);
  });
});

describe('stopOnSignals: the runner entry’s handlers', () => {
  it('requests the stop on SIGTERM, exits at once on a second signal, and after the limit at the latest', async () => {
    const source = new EventEmitter();
    const stop = new StopRequest(systemClock);
    const lines: string[] = [];
    const exits: number[] = [];
    stopOnSignals(source, stop, { log: (l) => lines.push(l), exit: (c) => exits.push(c), exitAfterMs: 30 });
    source.emit('SIGTERM');
    expect(stop.requested?.signal).toBe('SIGTERM');
    expect(lines[0]).toMatch(/^SIGTERM received: stopping the study/);
    expect(exits).toEqual([]);
    source.emit('SIGINT');
    expect(exits).toEqual([130]);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(exits).toEqual([130, 143]);
    expect(lines.at(-1)).toMatch(/did not end within 0.03s of SIGTERM: exiting/);
    expect(signalExitCode('SIGTERM')).toBe(143);
  });
});

/** A runner's view of the cluster that asks the runner to stop right after `when` picks a call. */
function signalAfter(stop: StopRequest, when: (method: string, args: readonly unknown[]) => boolean) {
  return (cluster: Cluster): Cluster =>
    new Proxy(cluster, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          if (when(String(prop), args)) stop.request('SIGTERM');
          return result;
        };
      },
    });
}

const RUNS = ['bound-p128', 'bound-p64', 'bound-p16', 'bound-p8'];

describe('the first lab’s runner told to stop mid-run', () => {
  it('stops at once as interrupted, deletes its clients, and a resumed study runs the cut-short runs again', async () => {
    // A deleted Job's pod takes 5 s to go: the runner waits for it within its cleanup time.
    const lab = await startLab({ runs: RUNS, cluster: { jobDeleteSeconds: 5 } });
    const stop = new StopRequest(lab.clock);
    let signalledAt = 0;
    let signalledAtReal = 0;
    const cluster = signalAfter(stop, (method, args) => {
      const name = (args[0] as { metadata?: { name?: string } })?.metadata?.name ?? '';
      const hit = method === 'createJob' && name.includes('bound-p16') && !stop.requested;
      if (hit) {
        signalledAt = lab.clock.ms;
        signalledAtReal = performance.now();
      }
      return hit;
    });
    await expect(runIn(lab, { cluster, deps: (d) => ({ ...d, stop }) })).rejects.toThrow(
      RunnerInterruptedError,
    );
    // Ended within the cleanup time of the signal, on the fake clock (a bound run takes minutes),
    // and on the real one: the runner waits nothing out in real time (its waits are the fake
    // clock's). The real bound is the product's own, not a guess at this machine's speed.
    expect(lab.clock.ms - signalledAt).toBeLessThanOrEqual(STOP_CLEANUP_MS);
    expect(performance.now() - signalledAtReal).toBeLessThan(STOP_CLEANUP_MS);

    const status = readJson<StudyStatus>(join(lab.dir, 'status.json'));
    expect(status.state).toBe('interrupted');
    expect(status.error).toMatch(/received SIGTERM/);
    const folder = join(lab.dir, 'studies', status.studyId as string);
    const study = readJson<StudyRecord>(join(folder, 'study.json'));
    expect(study.metadata.stopped?.reason).toMatch(/received SIGTERM/);
    expect(study.metadata.stopped?.change).toMatch(/lab run resumes the study/);
    expect(study.metadata.finishedAt).toBeUndefined();
    const log = readFileSync(join(folder, 'runner.log'), 'utf8');
    expect(log).toMatch(/study interrupted: the runner received SIGTERM/);
    expect(log).toMatch(/deleting job\/\S*bound-p16\S*, a client of this runner stopped/);
    // The runs cut short have no record; the two before them do.
    expect(existsSync(join(folder, 'runs', 'bound-p128.json'))).toBe(true);
    expect(existsSync(join(folder, 'runs', 'bound-p16.json'))).toBe(false);
    expect(existsSync(join(folder, 'runs', 'bound-p8.json'))).toBe(false);
    // No client Job, pod or gate is left behind.
    expect(await lab.cluster.listJobNames(BENCHMARK_JOBS_SELECTOR)).toEqual([]);
    const created = lab.cluster.created.map((job) => job.metadata.name);
    expect(created.some((name) => name.includes('bound-p16'))).toBe(true);
    for (const name of created) expect(await lab.cluster.listPods(`job-name=${name}`)).toEqual([]);
    expect(await lab.cluster.listServiceNames(gateSelector())).toEqual([]);

    const resumed = await runIn(lab);
    expect(resumed.metadata.studyId).toBe(status.studyId);
    expect(resumed.runs.map((r) => [r.id, r.valid])).toEqual(RUNS.map((id) => [id, true]));
    expect(lab.lines.join('\n')).toMatch(/resuming study .*: 2 of 4 runs have a valid record/);
  });

  it('a signal before the first run starts no client at all', async () => {
    const lab = await startLab({ runs: RUNS });
    const stop = new StopRequest(lab.clock);
    stop.request('SIGINT');
    const created: string[] = [];
    const cluster = (c: Cluster): Cluster => ({
      ...bind(c),
      createJob: async (job) => {
        created.push(job.metadata.name);
        await c.createJob(job);
      },
    });
    await expect(runIn(lab, { cluster, deps: (d) => ({ ...d, stop }) })).rejects.toThrow(/received SIGINT/);
    expect(created).toEqual([]);
    expect(readJson<StudyStatus>(join(lab.dir, 'status.json')).state).toBe('interrupted');
  });
});

/** Every method of a cluster bound to it, to override one. */
function bind(cluster: Cluster): Cluster {
  const out: Record<string, unknown> = {};
  let proto: object | null = cluster;
  while (proto && proto !== Object.prototype) {
    for (const key of Object.getOwnPropertyNames(proto)) {
      const value = (cluster as unknown as Record<string, unknown>)[key];
      if (key !== 'constructor' && typeof value === 'function' && !(key in out))
        out[key] = (value as (...a: unknown[]) => unknown).bind(cluster);
    }
    proto = Object.getPrototypeOf(proto);
  }
  return out as unknown as Cluster;
}
