/**
 * The files the runner's ConfigMap carries (charts/study-runner.ts) and `main.ts` reads, mounted
 * at `RUNNER_DIR` in the runner pod.
 */

export const RUNNER_DIR = '/opt/lab-runner';
/** Where the results host folder is mounted in the runner pod. */
export const RUNNER_RESULTS_MOUNT = '/results';

export const RUNNER_FILES = {
  /** The runner, bundled by esbuild from lib/runner/main.ts (an ES module). */
  bundle: 'runner.mjs',
  /** The LabConfig, parsed and defaulted at synth. */
  config: 'config.json',
  /** The StudyPlan the runner executes. */
  plan: 'plan.json',
  /** The smoke study's plan (lib/study/smoke.ts): the smoke profile, and the full study's checks. */
  smoke: 'smoke-plan.json',
  /** `benchmarkJob(config, spec)` of every client of both plans, by benchmark id. */
  jobs: 'jobs.json',
  /** The status conditions each arm's preflight requires (`StatusChecks` of preflight.ts), by arm id. */
  preflight: 'preflight.json',
} as const;
