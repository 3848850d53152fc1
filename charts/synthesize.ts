import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LabConfig } from '../lib/config/schema.ts';
import { prerequisites } from '../lib/prereqs/prerequisites.ts';
import { studyPlan } from '../lib/study/plan.ts';
import { RUNNER_ON_DEMAND_DIR, STUDY_RUNNER_CHART } from '../lib/study/topology.ts';
import { buildBenchmarkJobsApp } from './benchmark-job.ts';
import { buildLabApp, LabApp, labLabels } from './lab-app.ts';
import { synthesizeNetworkLab } from './network/cell-app.ts';
import { StudyRunnerChart } from './study-runner.ts';

/**
 * Writes the whole cluster side into `outdir`: the charts in apply order, the study's Jobs in
 * `jobs/` (outside the apply order: they start load on creation), the study runner (last in the
 * apply order when it starts by itself, else in `runner/` for `lab run`) and `prerequisites.json`.
 * `cdk8s synth` and the CDK stack's manifests asset both call this, so they cannot differ.
 * The network lab writes one folder per cell instead (charts/network/cell-app.ts).
 */
export function synthesizeCluster(config: LabConfig, outdir: string): void {
  if (config.lab === 'network') {
    synthesizeNetworkLab(config, outdir);
    return;
  }
  const plan = studyPlan(config);
  buildLabApp(config, { outdir }).synth();
  buildBenchmarkJobsApp(config, plan, join(outdir, 'jobs')).synth();
  const runnerDir = config.runner.autoStart ? outdir : join(outdir, RUNNER_ON_DEMAND_DIR);
  const runnerApp = new LabApp({ outdir: runnerDir, outputFileExtension: '.yaml' });
  new StudyRunnerChart(runnerApp, STUDY_RUNNER_CHART, {
    namespace: config.namespace,
    labels: labLabels(),
    config,
    plan,
  });
  runnerApp.synth();
  writeFileSync(join(outdir, 'prerequisites.json'), `${JSON.stringify(prerequisites(config), null, 2)}\n`);
}
