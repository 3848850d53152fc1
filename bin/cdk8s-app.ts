import { loadLabConfig } from '../lib/config/load.ts';
import { reportConfigAndExitOnError } from '../lib/config/report.ts';

// `npm run synth:k8s` (bin/synth-k8s.mjs) and `cdk8s synth` run this; they set CDK8S_OUTDIR to the
// output folder (a staging folder that replaces dist/ on success, or dist/ itself), which a bare
// cdk8s App resolves for us. A network-lab configuration writes one folder per cell.
const { config } = reportConfigAndExitOnError(() => loadLabConfig());
// cdk8s and the charts load only once the configuration is known good: a bad one is reported sooner.
const [{ App }, { synthesizeCluster }] = await Promise.all([
  import('cdk8s'),
  import('../charts/synthesize.ts'),
]);
synthesizeCluster(config, new App().outdir);
