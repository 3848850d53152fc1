import { loadLabConfig } from '../lib/config/load.ts';
import { reportConfigAndExitOnError } from '../lib/config/report.ts';

/**
 * What the cdk8s app (bin/cdk8s-app.ts, cdk8s.yaml's `app`) does: the configuration of $LAB_CONFIG
 * (else the published lab's defaults) synthesized into $CDK8S_OUTDIR, which `npm run synth:k8s`
 * (bin/synth-k8s.mjs) and `cdk8s synth` set to their output folder (unset: cdk8s's `dist`). A
 * network-lab configuration writes one folder per cell. A bad configuration is reported, every
 * problem, and ends the process with exit code 1 before cdk8s and the charts load. `env` is the
 * environment the app reads; returns the output folder.
 */
export async function synthesizeLabApp(env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const { config } = reportConfigAndExitOnError(() => loadLabConfig({ env }));
  // cdk8s and the charts load only once the configuration is known good: a bad one is reported sooner.
  const [{ App }, { synthesizeCluster }] = await Promise.all([import('cdk8s'), import('./synthesize.ts')]);
  // A bare cdk8s App resolves $CDK8S_OUTDIR itself (cdk8s lib/app.js: outdir ?? CDK8S_OUTDIR ?? 'dist').
  const { outdir } = new App({ outdir: env.CDK8S_OUTDIR });
  synthesizeCluster(config, outdir);
  return outdir;
}
