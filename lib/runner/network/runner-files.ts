import { RUNNER_FILES } from '../runner-files.ts';
import type { ProbesInPod } from './jobs.ts';

/**
 * The files of the network runner's ConfigMap (charts/network/study-runner.ts), mounted at
 * RUNNER_DIR like the first lab's: its own bundle, the configuration, the cell's plan and Jobs.
 */
export const NETWORK_RUNNER_FILES = {
  /** The network runner, bundled by esbuild from lib/runner/network/entry.ts. */
  bundle: 'network-runner.mjs',
  config: RUNNER_FILES.config,
  /** The cell's NetworkStudyPlan. */
  plan: RUNNER_FILES.plan,
  /** The cell's smoke plan (lib/network/study/smoke.ts): the smoke profile, and the full study's checks. */
  smoke: RUNNER_FILES.smoke,
  /** The static Jobs of both plans by name (`planJobs`). */
  jobs: RUNNER_FILES.jobs,
  /** NetworkRunnerContext: the cell and where its probes are. */
  context: 'network-context.json',
  /** The E9 Service manifest the runner copies N times. */
  serviceTemplate: 'service-template.json',
} as const;

export interface NetworkRunnerContext {
  /** The cell this runner works on (a name of network.cells). */
  readonly cell: string;
  readonly probes: ProbesInPod;
}
