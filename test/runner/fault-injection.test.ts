import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { KubeApiError } from '../../lib/runner/kube-cluster.ts';
import type { Cluster, RunnerDeps } from '../../lib/runner/ports.ts';
import type { StudyStatus } from '../../lib/runner/status.ts';
import type { RunRecord, StudyRecord } from '../../lib/study/results.ts';
import { type Lab, runIn, startLab, stopLabs } from './rehearsal-kit.ts';

/**
 * Issue 25, "done when": the whole default study under faults. Every Kubernetes API call may fail
 * before it reaches the server (500, 503, 429) or lose its answer after the server acted on it, and
 * so may every connection to a replica (reset before or after the replica acted); the
 * API server is down for 5 minutes (fake time); a replica restarts in the middle of a run; and the
 * runner is killed twice, at a random API call, and started again. The study must end with every
 * run valid, every attempt that ended on record with its own client files, and the same measured
 * numbers as the fault-free rehearsal.
 */

/** A small deterministic generator (mulberry32), so a failure can be replayed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SEED = 25;
const ERROR_RATE = 0.04;
const LOST_RATE = 0.04;
/** The API server is down from 30 minutes after the study started (the third runner's time), for 5. */
const OUTAGE = { fromMinutes: 30, minutes: 5 };
/** The runners' API calls at which they die: the first after 400 calls, the second after 1500. */
const KILLS = [400, 1500];

interface Faults {
  replicaFaults: number;
  errors: number;
  lost: number;
  refused: number;
  calls: Record<string, number>;
}

/** A call that never settles: what every port of a dead runner gives. */
const never = () => new Promise<never>(() => undefined);

/**
 * A runner's I/O that dies at its `killAt`-th API call: from then on every call of every port
 * (the API, the replicas, the front ends, the EPPs, the results folder, the clock) never returns,
 * as in a process that is gone, and `dead` resolves.
 */
function mortal(killAt: number | undefined, dead: () => void) {
  let calls = 0;
  let gone = false;
  const die = () => {
    if (!gone) dead();
    gone = true;
  };
  const port = <T extends object>(target: T, counts: boolean): T =>
    new Proxy(target, {
      get(t, prop, receiver) {
        const value = Reflect.get(t, prop, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          if (gone) return never();
          if (counts && killAt !== undefined && ++calls >= killAt) {
            die();
            return never();
          }
          return (value as (...a: unknown[]) => unknown).apply(t, args);
        };
      },
    });
  return (deps: RunnerDeps): RunnerDeps => ({
    ...deps,
    cluster: port(deps.cluster, true),
    replicas: port(deps.replicas, false),
    frontEnds: port(deps.frontEnds, false),
    endpointPickers: port(deps.endpointPickers, false),
    clock: port(deps.clock, false),
    store: new Proxy(deps.store, {
      get(t, prop, receiver) {
        const value = Reflect.get(t, prop, receiver);
        if (typeof value !== 'function') return value;
        if (prop === 'study')
          return (id: string) => port((value as (id: string) => object).call(t, id), false);
        return (...args: unknown[]) =>
          gone ? never() : (value as (...a: unknown[]) => unknown).apply(t, args);
      },
    }),
  });
}

/** The API with random faults on every call kind and an outage window of the lab's clock. */
function faultyApi(
  lab: Lab,
  next: () => number,
  faults: Faults,
  from: number,
): (cluster: Cluster) => Cluster {
  const until = from + OUTAGE.minutes * 60_000;
  return (cluster) =>
    new Proxy(cluster, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          const method = String(prop);
          faults.calls[method] = (faults.calls[method] ?? 0) + 1;
          if (lab.clock.ms >= from && lab.clock.ms < until) {
            faults.refused++;
            throw Object.assign(new Error('connect ECONNREFUSED 10.43.0.1:443'), { code: 'ECONNREFUSED' });
          }
          const roll = next();
          if (roll < ERROR_RATE) {
            faults.errors++;
            const status = [500, 503, 429][Math.floor(next() * 3)];
            throw new KubeApiError(
              'GET',
              `/fault/${method}`,
              status,
              '{"kind":"Status","message":"injected"}',
            );
          }
          const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          if (roll < ERROR_RATE + LOST_RATE) {
            // The server acted; its answer is lost on the way back.
            faults.lost++;
            throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
          }
          return result;
        };
      },
    });
}

/** What a run measured: its clients' numbers and every replica's counter deltas. */
function measured(run: RunRecord) {
  return {
    clients: run.clients.map((c) => ({ id: c.benchmarkId, job: c.job, result: c.result })),
    replicas: run.replicas,
    summary: run.summary,
  };
}

/** The fault-free reference study, and the faulty study with what it went through. */
interface Outcome {
  readonly clean: StudyRecord;
  readonly lab: Lab;
  readonly study: StudyRecord;
  readonly faults: Faults;
  readonly runners: number;
}

async function faultyStudy(): Promise<Outcome> {
  const faults: Faults = { replicaFaults: 0, errors: 0, lost: 0, refused: 0, calls: {} };
  let runners = 0;
  const reference = await startLab();
  const clean = await runIn(reference);

  const lab = await startLab({
    cluster: {
      outageAtRun: { run: 'arm-router-cache-aware-prefix', replica: 1, afterSeconds: 30, seconds: 60 },
    },
  });
  const next = random(SEED);
  // The replicas' connections fail too: reset before the replica sees a request, or after it acted.
  const network = random(SEED + 1);
  for (const replica of lab.replicas) {
    replica.flaky = () => {
      const roll = network();
      if (roll < ERROR_RATE / 2) {
        faults.replicaFaults++;
        return 'before';
      }
      if (roll < ERROR_RATE) {
        faults.replicaFaults++;
        return 'after';
      }
      return undefined;
    };
  }
  const outageFrom = lab.clock.ms + OUTAGE.fromMinutes * 60_000;
  for (;;) {
    const killAt = KILLS[runners];
    runners++;
    let dead: () => void = () => undefined;
    const died = new Promise<'killed'>((resolve) => {
      dead = () => resolve('killed');
    });
    const ended = await Promise.race([
      runIn(lab, {
        cluster: faultyApi(lab, next, faults, outageFrom),
        deps: mortal(killAt, dead),
        // The runner's own Job poll: the API calls, and so the faults and kills, fall as in a lab.
        options: { jobPollIntervalMs: undefined },
      }),
      died,
    ]);
    if (ended !== 'killed') return { clean, lab, study: ended, faults, runners };
    // A new runner pod starts a little later.
    lab.clock.ms += 60_000;
  }
}

describe('fault injection: the whole default study', () => {
  /**
   * Both studies, made by the first test that reads them, not in `beforeAll`: vitest's per-file
   * times, which test/file-weights.json is written from, leave hooks out, and this file weighed 0
   * (about 9 s of CPU) and so ran last in a suite.
   */
  let made: Promise<Outcome> | undefined;
  const outcome = (): Promise<Outcome> => {
    made ??= faultyStudy();
    return made;
  };

  afterAll(stopLabs);

  it('went through every fault it was given', async () => {
    const { lab, study, faults, runners } = await outcome();
    expect(runners).toBe(3);
    // Every call of the 5 minutes was refused, and the runner rode it out (the study took longer).
    expect(faults.refused).toBeGreaterThan(10);
    expect(lab.clock.ms - Date.parse(study.metadata.startedAt)).toBeGreaterThan(
      (OUTAGE.fromMinutes + OUTAGE.minutes) * 60_000,
    );
    expect(faults.errors).toBeGreaterThan(50);
    expect(faults.lost).toBeGreaterThan(50);
    expect(faults.replicaFaults).toBeGreaterThan(20);
    for (const method of [
      'createJob',
      'getJob',
      'deleteJob',
      'listPods',
      'podLog',
      'getDeployment',
      'restartDeployment',
      'createService',
      'setServiceSelector',
      'deleteService',
      'listJobNames',
    ])
      expect(faults.calls[method], method).toBeGreaterThan(0);
  });

  it('ends with every run valid', async () => {
    const { clean, lab, study } = await outcome();
    expect(study.runs.map((r) => r.id)).toEqual(clean.runs.map((r) => r.id));
    for (const run of study.runs) expect(run.invalidReasons, run.id).toEqual([]);
    expect(study.metadata.finishedAt).toBeDefined();
    const status = JSON.parse(readFileSync(join(lab.dir, 'status.json'), 'utf8')) as StudyStatus;
    expect(status.state).toBe('finished');
  });

  it('measured the same numbers as the fault-free rehearsal', async () => {
    const { clean, study } = await outcome();
    const cleanById = new Map(clean.runs.map((r) => [r.id, r]));
    for (const run of study.runs)
      expect(measured(run), run.id).toEqual(measured(cleanById.get(run.id) as RunRecord));
  });

  it('keeps every attempt on record, each with its own client files', async () => {
    const { lab, study } = await outcome();
    const dir = join(lab.dir, 'studies', study.metadata.studyId as string);
    const restarted = study.runs.find((r) => r.id === 'arm-router-cache-aware-prefix') as RunRecord;
    expect(restarted.attempts?.some((a) => a.retriedBecause === 'a replica restarted during the run')).toBe(
      true,
    );
    let unrecorded = 0;
    for (const run of study.runs) {
      const recorded = [...(run.attempts ?? []), run];
      const numbers = recorded.map((a) => a.attempt);
      expect(new Set(numbers).size, run.id).toBe(numbers.length);
      for (const attempt of recorded) {
        for (const client of attempt.clients) {
          if (!client.result) continue;
          const kept = join(
            dir,
            'attempts',
            run.id,
            String(attempt.attempt),
            client.benchmarkId,
            client.resultFile,
          );
          expect(
            JSON.parse(readFileSync(kept, 'utf8')).completed,
            `${run.id} attempt ${attempt.attempt}`,
          ).toBe(client.result.completed);
        }
      }
      const folder = join(dir, 'attempts', run.id);
      const withFiles = existsSync(folder)
        ? readdirSync(folder).filter((n) => readdirSync(join(folder, n)).length > 0)
        : [];
      unrecorded += withFiles.filter((n) => !numbers.includes(Number(n))).length;
    }
    // Only an attempt that a killed runner never finished has files without a record.
    expect(unrecorded).toBeLessThanOrEqual(KILLS.length);
  });
});
