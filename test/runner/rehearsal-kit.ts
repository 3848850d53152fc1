import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { preflightStatusChecks } from '../../charts/study-runner.ts';
import { defaultLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import type { Cluster, ResultStore, RunnerDeps } from '../../lib/runner/ports.ts';
import { type RunnerOptions, runStudy } from '../../lib/runner/run-study.ts';
import {
  type BenchmarkSpec,
  findRun,
  type StudyPlan,
  type StudyRun,
  studyPlan,
} from '../../lib/study/plan.ts';
import type { StudyRecord } from '../../lib/study/results.ts';
import { tempDir } from '../temp.ts';
import {
  type FakeClock,
  FakeCluster,
  type FakeClusterOptions,
  FakeEndpointPickers,
  FakeFrontEnds,
  FakeReplica,
  rehearsalDeps,
} from './fakes.ts';
import { SharedFakeClock } from './network/fake-shared-clock.ts';

/**
 * A lab of one's own for a rehearsal: two loopback replicas, the front ends, the EPPs, a results
 * folder, a fake clock and a fake cluster; and runners to start in it, each one optionally behind
 * a fault-injecting cluster or store (a runner killed mid-study, an API outage).
 */

/** Hit rates the fake replicas serve: the calibration numbers of docs/facts.md §4.1 and made-up arms. */
export const BOUND_RATES: Record<number, number> = { 128: 0.444, 64: 0.776, 16: 0.909, 8: 0.923 };
export const ARM_RATES: Record<string, number> = {
  'kube-proxy': 0.45,
  'router-round-robin': 0.44,
  'router-cache-aware': 0.58,
  'router-cache-aware-tuned': 0.71,
  'router-round-robin-completions': 0.43,
  'router-cache-aware-completions': 0.62,
  'router-cache-aware-tuned-completions': 0.74,
  epp: 0.76,
  'epp-completions': 0.79,
};

/**
 * How often a rehearsal's runner polls a running Job: every 5 s of the fake clock instead of the
 * runner's default 1 s (jobPollIntervalMs). Each poll is a GET of the fake cluster and a
 * status.json written to disk, about 2 ms of CPU: the default study's 27 runs poll about 3,000
 * times at 1 s and 700 at 5 s, with the same physics (each fake client still runs its 120 s and
 * is noticed at most one poll late). rehearsal.test.ts's whole-study run keeps the default.
 */
export const REHEARSAL_JOB_POLL_MS = 5_000;

export function calibratedHitRate(spec: BenchmarkSpec): number {
  if (spec.dataset === 'sharegpt') return 0.05;
  if (spec.target.kind === 'arm') return ARM_RATES[spec.target.arm];
  if (spec.id.startsWith('partition')) return 0.81;
  return BOUND_RATES[spec.prefix?.prefixes ?? 0];
}

export interface Lab {
  readonly config: LabConfig;
  readonly plan: StudyPlan;
  readonly replicas: readonly FakeReplica[];
  readonly frontEnds: FakeFrontEnds;
  readonly pickers: FakeEndpointPickers;
  readonly dir: string;
  readonly clock: FakeClock;
  readonly cluster: FakeCluster;
  /** Every runner's log lines, in order. */
  readonly lines: string[];
}

export interface LabSetup {
  readonly config?: LabConfig;
  /** Run ids of the plan (default: the whole plan). */
  readonly runs?: readonly string[];
  readonly cluster?: Partial<
    Omit<FakeClusterOptions, 'config' | 'plan' | 'replicas' | 'resultsDir' | 'clock'>
  >;
  /** Runs the fake cluster also serves besides the plan's (the smoke study's). */
  readonly alsoServes?: readonly StudyRun[];
}

const servers: { stop(): Promise<void> }[] = [];

/** Stops every lab's loopback servers (afterEach / afterAll). */
export async function stopLabs(): Promise<void> {
  for (const s of servers.splice(0)) await s.stop();
}

export async function startLab(setup: LabSetup = {}): Promise<Lab> {
  const config = setup.config ?? defaultLabConfig();
  const full = studyPlan(config);
  const plan: StudyPlan = setup.runs ? { runs: setup.runs.map((id) => findRun(full, id)) } : full;
  const replicas = [new FakeReplica('qwen3-0'), new FakeReplica('qwen3-1')];
  for (const r of replicas) await r.start();
  const frontEnds = new FakeFrontEnds(replicas);
  await frontEnds.start();
  const pickers = new FakeEndpointPickers();
  await pickers.start();
  servers.push(...replicas, frontEnds, pickers);
  const dir = tempDir('lab-results-');
  const clock = new SharedFakeClock();
  const cluster = new FakeCluster({
    config,
    plan: setup.alsoServes ? { runs: [...plan.runs, ...setup.alsoServes] } : plan,
    replicas,
    resultsDir: dir,
    clock,
    hitRate: calibratedHitRate,
    ...setup.cluster,
  });
  return { config, plan, replicas, frontEnds, pickers, dir, clock, cluster, lines: [] };
}

export interface RunnerSetup {
  /** The runner's view of the cluster (a fault injector around the lab's). */
  readonly cluster?: (cluster: Cluster) => Cluster;
  /** The runner's view of the results folder (a kill after a write). */
  readonly store?: (store: ResultStore) => ResultStore;
  /** The runner's view of all its I/O, after `cluster` and `store` (a runner that can die). */
  readonly deps?: (deps: RunnerDeps) => RunnerDeps;
  readonly options?: RunnerOptions;
}

/** Starts a runner in the lab; it works until the study ends or stops. */
export function runIn(lab: Lab, setup: RunnerSetup = {}): Promise<StudyRecord> {
  const { deps, options } = runnerIn(lab, setup);
  return runStudy(deps, lab.config, lab.plan, options);
}

/** A runner's I/O and options in the lab, for any of the runner's entry points. */
export function runnerIn(lab: Lab, setup: RunnerSetup = {}): { deps: RunnerDeps; options: RunnerOptions } {
  const tokenFile = join(lab.dir, '..', `${lab.dir.split('/').at(-1)}.token`);
  writeFileSync(tokenFile, `${lab.pickers.token}\n`);
  const base = rehearsalDeps(lab.config, {
    cluster: lab.cluster,
    clock: lab.clock,
    dir: lab.dir,
    tokenFile,
    lines: lab.lines,
  });
  const wrapped: RunnerDeps = {
    ...base,
    cluster: setup.cluster ? setup.cluster(lab.cluster) : lab.cluster,
    store: setup.store ? setup.store(base.store) : base.store,
  };
  const deps = setup.deps ? setup.deps(wrapped) : wrapped;
  return {
    deps,
    options: {
      replicaUrls: () => lab.replicas.map((r) => r.url),
      frontEndUrl: (arm) => `${lab.frontEnds.url}/${arm.id}`,
      eppMetricsUrl: (arm) => `${lab.pickers.url}/${arm.id}`,
      statusChecks: preflightStatusChecks(lab.config),
      jobPollIntervalMs: REHEARSAL_JOB_POLL_MS,
      ...setup.options,
    },
  };
}

/** The runner was killed (a test's fault): every call of a killed runner throws it. */
export class RunnerKilled extends Error {
  constructor(at: string) {
    super(`runner killed at ${at}`);
    this.name = 'RunnerKilled';
  }
}

/**
 * A results folder whose study folders throw `RunnerKilled` right after the first write that
 * `when` picks (the write itself happened): a runner killed between two steps.
 */
export function killAfterWrite<S extends { study(id: string): object } = ResultStore>(
  when: (method: string, args: readonly unknown[]) => boolean,
): (store: S) => S {
  let killed = false;
  return (store) =>
    new Proxy(store, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (prop !== 'study' || typeof value !== 'function') return value;
        return (id: string) => {
          const files = (value as (id: string) => object).call(target, id);
          return new Proxy(files, {
            get(t, p, r) {
              const method = Reflect.get(t, p, r);
              if (typeof method !== 'function') return method;
              return async (...args: unknown[]) => {
                if (killed && p !== 'appendLog') throw new RunnerKilled(String(p));
                const result = await (method as (...a: unknown[]) => Promise<unknown>).apply(t, args);
                if (!killed && when(String(p), args)) {
                  killed = true;
                  throw new RunnerKilled(String(p));
                }
                return result;
              };
            },
          });
        };
      },
    });
}
