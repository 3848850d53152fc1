import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildBenchmarkJobsApp } from '../charts/benchmark-job.ts';
import { buildLabApp } from '../charts/lab-app.ts';
import { loadLabConfig } from '../lib/config/load.ts';
import { reportConfigAndExitOnError } from '../lib/config/report.ts';
import { prerequisites } from '../lib/prereqs/prerequisites.ts';
import { studyPlan } from '../lib/study/plan.ts';

// `cdk8s synth` runs this; it sets CDK8S_OUTDIR to the output folder (dist/ by cdk8s.yaml).
const { config } = reportConfigAndExitOnError(() => loadLabConfig());
const app = buildLabApp(config);
app.synth();
// The study's Jobs go to their own folder, outside the apply order: they start load on creation.
buildBenchmarkJobsApp(config, studyPlan(config), join(app.outdir, 'jobs')).synth();
writeFileSync(join(app.outdir, 'prerequisites.json'), `${JSON.stringify(prerequisites(config), null, 2)}\n`);
