import { buildLabApp } from '../charts/lab-app.ts';
import { loadLabConfig } from '../lib/config/load.ts';
import { reportConfigAndExitOnError } from '../lib/config/report.ts';

// `cdk8s synth` runs this; it sets CDK8S_OUTDIR to the output folder (dist/ by cdk8s.yaml).
const { config } = reportConfigAndExitOnError(() => loadLabConfig());
buildLabApp(config).synth();
