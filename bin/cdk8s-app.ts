import { synthesizeLabApp } from '../charts/cdk8s-app.ts';

// `npm run synth:k8s` (bin/synth-k8s.mjs) and `cdk8s synth` run this; they set CDK8S_OUTDIR to the
// output folder (a staging folder that replaces dist/ on success, or dist/ itself).
await synthesizeLabApp();
