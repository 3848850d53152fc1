import { App } from 'aws-cdk-lib';
import { loadLabConfig } from '../lib/config/load.ts';
import { reportConfigAndExitOnError } from '../lib/config/report.ts';

const app = new App();
// `-c labConfig=<file>` wins over $LAB_CONFIG; with neither, the published lab's defaults.
const file = app.node.tryGetContext('labConfig') as string | undefined;
const { config } = reportConfigAndExitOnError(() => loadLabConfig({ file }));
// The stacks' modules (every AWS construct library the lab uses, cdk8s and the charts) load only
// once the configuration is known good: a bad one is reported about 1.7 s of CPU sooner.
const { LabStack } = await import('../lib/aws/lab-stack.ts');
new LabStack(app, config.stackName, {
  config,
  // Env-agnostic unless the caller's CLI profile names an account and region.
  env:
    process.env.CDK_DEFAULT_ACCOUNT && process.env.CDK_DEFAULT_REGION
      ? { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION }
      : undefined,
  description:
    config.lab === 'network'
      ? 'Network lab: one single-node K3s cell per datapath (kube-proxy modes, Cilium, Istio)'
      : 'LLM-gateway benchmark lab: GPU host with K3s, vLLM replicas and every gateway arm',
});
