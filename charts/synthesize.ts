import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LabConfig } from '../lib/config/schema.ts';
import { prerequisites } from '../lib/prereqs/prerequisites.ts';
import { studyPlan } from '../lib/study/plan.ts';
import { buildBenchmarkJobsApp } from './benchmark-job.ts';
import { buildLabApp } from './lab-app.ts';

/**
 * Writes the whole cluster side into `outdir`: the charts in apply order, the study's Jobs in
 * `jobs/` (outside the apply order: they start load on creation) and `prerequisites.json`.
 * `cdk8s synth` and the CDK stack's manifests asset both call this, so they cannot differ.
 */
export function synthesizeCluster(config: LabConfig, outdir: string): void {
  buildLabApp(config, { outdir }).synth();
  buildBenchmarkJobsApp(config, studyPlan(config), join(outdir, 'jobs')).synth();
  writeFileSync(join(outdir, 'prerequisites.json'), `${JSON.stringify(prerequisites(config), null, 2)}\n`);
}
