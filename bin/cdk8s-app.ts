import { App } from 'cdk8s';
import { synthesizeCluster } from '../charts/synthesize.ts';
import { loadLabConfig } from '../lib/config/load.ts';
import { reportConfigAndExitOnError } from '../lib/config/report.ts';

// `cdk8s synth` runs this; it sets CDK8S_OUTDIR to the output folder (dist/ by cdk8s.yaml), which
// a bare cdk8s App resolves for us. A network-lab configuration writes one folder per cell.
const { config } = reportConfigAndExitOnError(() => loadLabConfig());
synthesizeCluster(config, new App().outdir);
