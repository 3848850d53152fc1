import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { preflightStatusChecks } from '../../charts/study-runner.ts';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import { type RunnerOptions, runStudy } from '../../lib/runner/run-study.ts';
import type { StudyStatus } from '../../lib/runner/status.ts';
import { type BenchmarkSpec, type StudyPlan, studyPlan } from '../../lib/study/plan.ts';
import type { RunRecord, StudyRecord } from '../../lib/study/results.ts';
import { tempDir } from '../temp.ts';
import {
  type ClientBehaviour,
  type FakeClock,
  FakeCluster,
  type FakeClusterOptions,
  FakeEndpointPickers,
  FakeFrontEnds,
  FakeReplica,
  rehearsalDeps,
} from './fakes.ts';
import { SharedFakeClock } from './network/fake-shared-clock.ts';
import { calibratedHitRate, REHEARSAL_JOB_POLL_MS } from './rehearsal-kit.ts';
/**
 * The rehearsals' shared setup (test/runner/rehearsal*.test.ts): the loopback replicas, front
 * ends and EPPs, and `rehearsal()`, a fake cluster and clock with a runner to start in them.
 */
export const config = defaultLabConfig();
export const plan = studyPlan(config);
export const unstaged = parseLabConfig({ runner: { stageNextRun: false } });

export const hitRate = calibratedHitRate;

export interface Rehearsal {
  readonly dir: string;
  readonly clock: FakeClock;
  readonly cluster: FakeCluster;
  readonly lines: string[];
  readonly run: () => Promise<StudyRecord>;
  /** The folder of the study the runner worked on (`studies/<id>`), named by status.json. */
  readonly study: () => string;
}

/** The loopback replicas, front ends and EPPs of the calling test file (set by `useRehearsalServers`). */
export let replicas: FakeReplica[];
export let frontEnds: FakeFrontEnds;
export let pickers: FakeEndpointPickers;
let tokenFile: string;

/**
 * Starts the loopback servers before the calling file's tests and stops them after: each test
 * file calls it once at its top (workers share modules, so hooks here would belong to one file).
 */
export function useRehearsalServers(): void {
  beforeAll(startServers);
  afterAll(stopServers);
}

async function startServers(): Promise<void> {
  replicas = [new FakeReplica('qwen3-0'), new FakeReplica('qwen3-1')];
  for (const r of replicas) await r.start();
  frontEnds = new FakeFrontEnds(replicas);
  await frontEnds.start();
  pickers = new FakeEndpointPickers();
  await pickers.start();
  tokenFile = join(tempDir('lab-sa-'), 'token');
  writeFileSync(tokenFile, `${pickers.token}\n`);
}

async function stopServers(): Promise<void> {
  for (const r of replicas) await r.stop();
  await frontEnds.stop();
  await pickers.stop();
}

/** A rehearsal: a fake cluster and clock over the file's servers, and a runner to start in it. */
export function rehearsal(
  setup: {
    dir?: string;
    plan?: StudyPlan;
    behaviour?: Record<string, ClientBehaviour>;
    hitRate?: (spec: BenchmarkSpec) => number;
    throwAtRun?: string;
    jobDeleteSeconds?: number;
    options?: RunnerOptions;
    config?: LabConfig;
    statuses?: Record<string, Record<string, unknown>>;
    leaveJobAtRun?: string;
    outageAtRun?: FakeClusterOptions['outageAtRun'];
    pollErrorsAfterCreate?: number;
    pollStatus?: number;
    unschedulableAtRun?: string;
    /** Continue on the cluster and clock of an earlier rehearsal (a runner restarted in the same cluster). */
    resume?: Rehearsal;
  } = {},
): Rehearsal {
  for (const r of replicas) {
    r.devMode = true;
    r.blankScrapes = 0;
    r.busyScrapes = 0;
    r.resetBehaviour = 'succeeds';
    r.neverReadyAfterRestart = false;
    r.onReset = undefined;
    r.outage = undefined;
  }
  frontEnds.failing.clear();
  frontEnds.onRequest = undefined;
  frontEnds.blackHoles.clear();
  frontEnds.requests.length = 0;
  pickers.indexerSize = {};
  pickers.llmdWithoutMetrics = false;
  pickers.scraped.length = 0;
  const usedConfig = setup.config ?? config;
  const dir = setup.dir ?? tempDir('lab-results-');
  const clock = setup.resume?.clock ?? new SharedFakeClock();
  const usedPlan = setup.plan ?? plan;
  const cluster =
    setup.resume?.cluster ??
    new FakeCluster({
      config: usedConfig,
      plan: usedPlan,
      statuses: setup.statuses,
      replicas,
      resultsDir: dir,
      clock,
      hitRate: setup.hitRate ?? hitRate,
      behaviour: setup.behaviour,
      throwAtRun: setup.throwAtRun,
      jobDeleteSeconds: setup.jobDeleteSeconds,
      leaveJobAtRun: setup.leaveJobAtRun,
      outageAtRun: setup.outageAtRun,
      pollErrorsAfterCreate: setup.pollErrorsAfterCreate,
      pollStatus: setup.pollStatus,
      unschedulableAtRun: setup.unschedulableAtRun,
    });
  const lines: string[] = [];
  const run = () =>
    runStudy(rehearsalDeps(usedConfig, { cluster, clock, dir, tokenFile, lines }), usedConfig, usedPlan, {
      replicaUrls: () => replicas.map((r) => r.url),
      frontEndUrl: (arm) => `${frontEnds.url}/${arm.id}`,
      eppMetricsUrl: (arm) => `${pickers.url}/${arm.id}`,
      statusChecks: preflightStatusChecks(usedConfig),
      jobPollIntervalMs: REHEARSAL_JOB_POLL_MS,
      ...setup.options,
    });
  const study = () => {
    const { studyId } = readJson<StudyStatus>(join(dir, 'status.json'));
    if (!studyId) throw new Error(`status.json in ${dir} names no study`);
    return join(dir, 'studies', studyId);
  };
  return { dir, clock, cluster, lines, run, study };
}

export function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

export const byId = (study: StudyRecord) => new Map(study.runs.map((r) => [r.id, r]));
export const durationMs = (r: RunRecord) => Date.parse(r.finishedAt) - Date.parse(r.startedAt);
