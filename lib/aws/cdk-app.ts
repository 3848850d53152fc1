import type { App } from 'aws-cdk-lib';
import { loadLabConfig } from '../config/load.ts';
import { reportConfigAndExitOnError } from '../config/report.ts';
import type { LabStack } from './lab-stack.ts';

/**
 * What the CDK app (bin/cdk-app.ts, cdk.json's `app`) builds in its App: the lab's stack, from
 * `-c labConfig=<file>`, else $LAB_CONFIG, else the published lab's defaults. A bad configuration
 * is reported, every problem, and ends the process with exit code 1 before the stacks' modules load.
 * `env` is the environment the app reads ($LAB_CONFIG, CDK_DEFAULT_ACCOUNT and _REGION).
 */
export async function addLabStack(app: App, env: NodeJS.ProcessEnv = process.env): Promise<LabStack> {
  const file = app.node.tryGetContext('labConfig') as string | undefined;
  const { config } = reportConfigAndExitOnError(() => loadLabConfig({ file, env }));
  // The stacks' modules (every AWS construct library the lab uses, cdk8s and the charts) load only
  // once the configuration is known good: a bad one is reported about 1.7 s of CPU sooner.
  const { LabStack } = await import('./lab-stack.ts');
  return new LabStack(app, config.stackName, {
    config,
    // Env-agnostic unless the caller's CLI profile names an account and region.
    env:
      env.CDK_DEFAULT_ACCOUNT && env.CDK_DEFAULT_REGION
        ? { account: env.CDK_DEFAULT_ACCOUNT, region: env.CDK_DEFAULT_REGION }
        : undefined,
    description:
      config.lab === 'network'
        ? 'Network lab: one single-node K3s cell per datapath (kube-proxy modes, Cilium, Istio)'
        : 'LLM-gateway benchmark lab: GPU host with K3s, vLLM replicas and every gateway arm',
  });
}
