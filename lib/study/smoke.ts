import type { LabConfig } from '../config/schema.ts';
import { studyArms } from './arms.ts';
import { onEveryPair, pairSuffix } from './pairs.ts';
import { onPair, type StudyPlan, type StudyRun, studyPlan } from './plan.ts';

/**
 * The smoke study (docs/first-run.md): every configured arm's whole path with a tiny load, in
 * minutes. It is the full study's own plan built for a tiny workload, so each smoke run is a
 * normal run (the same reset, preflight, staging, scrapes, result file and validity checks); only
 * its load and its ids differ. The full study runs it first, so a broken arm stops the study in
 * its first minutes instead of after many invalid runs.
 */

/** Run and client ids of the smoke study start with this; no full-study id does. */
export const SMOKE_PREFIX = 'smoke-';

/** Requests per smoke run: four per replica of the set, a handful per arm. */
export const SMOKE_PROMPTS_PER_REPLICA = 4;

/**
 * The tiny workload: one prefix per replica (the ideal partition needs one each), four prompts per
 * prefix, two requests at once per replica. The prompt and output lengths stay the study's, so the
 * EPP's prefix indexer (a prompt shorter than one block adds no entry) and the `--ignore-eos`
 * proof (every request runs to its output length) meet what the full study will send.
 */
export function smokeWorkload(config: LabConfig): LabConfig['workload'] {
  const replicas = config.vllm.replicas;
  return {
    ...config.workload,
    prefixes: replicas,
    prompts: SMOKE_PROMPTS_PER_REPLICA * replicas,
    concurrency: Math.min(config.workload.concurrency, 2 * replicas),
  };
}

/**
 * The smoke study's runs: the replicas directly (the partition's path), then one prefix run per
 * arm (every required, completions and optional arm the study runs), then one ShareGPT run when
 * the study has the ShareGPT control (its dataset path is a file of the client's). With two replica
 * pairs, each run whose path exists on both pairs runs on both. Each run is staged behind the one
 * before, as in the full study.
 */
export function smokePlan(config: LabConfig): StudyPlan {
  const tiny: LabConfig = {
    ...config,
    workload: smokeWorkload(config),
    study: {
      ...config.study,
      boundSweepPrefixes: [],
      repeats: 1,
      concurrencySweep: { ...config.study.concurrencySweep, levels: [] },
      parallelism: 1,
    },
  };
  const base = studyPlan(tiny).runs;
  const partition = base.filter((run) => run.group === 'partition');
  const arms = base.filter((run) => run.group === 'arm' && run.dataset === 'prefix');
  const sharegpt = base.find((run) => run.group === 'arm' && run.dataset === 'sharegpt');
  const pair0 = [...partition, ...arms, ...(sharegpt ? [sharegpt] : [])];
  const byId = new Map(studyArms(config).map((arm) => [arm.id, arm]));
  const runs: StudyRun[] = [];
  for (const run of pair0) {
    runs.push(renamed(run));
    // Each pair has its own replicas and core front ends: a broken one would spoil half the study.
    const arm = run.arm === undefined ? undefined : byId.get(run.arm);
    const both = run.group === 'partition' || (arm !== undefined && onEveryPair(arm));
    for (let pair = 1; both && pair < config.study.parallelism; pair++) runs.push(renamed(onPair(run, pair)));
  }
  return { runs };
}

/** Whether a run id belongs to the smoke study. */
export function isSmokeRunId(id: string): boolean {
  return id.startsWith(SMOKE_PREFIX);
}

/** A run of the tiny plan under its smoke id (`smoke-<id>`, `-b` on pair 1), clients too. */
function renamed(run: StudyRun): StudyRun {
  const suffix = pairSuffix(run.reset.pair ?? 0);
  const id = `${SMOKE_PREFIX}${run.id}${suffix}`;
  return {
    ...run,
    id,
    title: `Smoke: ${run.title}${suffix ? ` (pair ${suffix.slice(1)})` : ''}`,
    benchmarks: run.benchmarks.map((spec) => {
      const clientId = `${SMOKE_PREFIX}${spec.id}${suffix}`;
      return { ...spec, id: clientId, resultFile: `${clientId}.json` };
    }),
  };
}
