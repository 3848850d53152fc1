import { pollUntil } from '../runner/poll.ts';
import {
  applyObjects,
  applyPrerequisite,
  type InstallDeps,
  InstallStopped,
  minutes,
  POLL_MS,
  rolloutRestart,
} from './apply.ts';
import { type ClusterCheck, clusterChecks, GPU_RESOURCE } from './cluster-checks.ts';
import { readClusterChecks } from './cluster-read.ts';
import type { InstallPlan } from './plan.ts';
import { checkRunnerAccess } from './runner-access.ts';
import { WAIT_LIMITS_MS } from './steps.ts';

export { type InstallDeps, InstallStopped } from './apply.ts';
export type { InstallPlan } from './plan.ts';

/**
 * `lab install`: the prerequisites and the lab's charts onto a cluster the user brings, in order,
 * each waited for as docs/cluster.md's kubectl commands wait, with a line of progress per step and
 * a stop that names the object that did not become ready.
 */

export async function installLab(plan: InstallPlan, deps: InstallDeps): Promise<void> {
  const { api, write, clock } = deps;
  const started = clock.now().getTime();
  const version = await api.version();
  write(`cluster: context ${api.target.context} at ${api.target.server}, Kubernetes ${version}`);

  const checks = await readClusterChecks(plan, api);
  for (const check of checks) write(checkLine(check));
  const failed = checks.filter((c) => c.outcome === 'fail');
  if (failed.length > 0) {
    throw new InstallStopped(
      `the cluster cannot run this configuration (${failed.length} check(s) failed, nothing was applied):\n${failed
        .map((c) => `  - ${c.message}\n    fix: ${c.fix}`)
        .join('\n')}`,
    );
  }
  const gpusAdvertised = checks.some((c) => c.id === 'gpus' && c.outcome === 'pass');

  for (const step of plan.steps) {
    switch (step.kind) {
      case 'manifest':
      case 'helm':
        await applyPrerequisite(step.prerequisite, deps);
        break;
      case 'chart':
        if (step.chart === plan.devicePluginChart && gpusAdvertised) {
          write(
            `${step.chart}: skipped: the GPU nodes already advertise ${GPU_RESOURCE} (a device plugin or the GPU operator runs); a second plugin would register the GPUs twice`,
          );
          break;
        }
        if (step.chart === plan.replicasChart && !gpusAdvertised) await waitForGpus(plan, deps);
        await applyObjects(step.chart, step.objects, deps);
        break;
      case 'after-apply':
        await rolloutRestart(step.step.namespace, step.step.deployment, step.step.title, deps);
        break;
    }
  }
  // Applied: now the API server can say whether the runner may do its work, before any study.
  const access = await checkRunnerAccess(api, plan.runnerAccess, true);
  write(checkLine(access));
  if (access.outcome === 'fail') {
    throw new InstallStopped(
      `the study runner could not do its work on this cluster (everything else is installed):\n  - ${access.message}\n    fix: ${access.fix}`,
    );
  }
  if (access.fix) write(`        ${access.fix}`);
  write(`installed in ${minutes(clock.now().getTime() - started)}`);
}

export function checkLine(check: ClusterCheck): string {
  return `  ${check.outcome.padEnd(4)}  ${check.message}`;
}

/** After the lab's device plugin: the replicas need the GPUs advertised, which takes the plugin's registration. */
async function waitForGpus(plan: InstallPlan, deps: InstallDeps): Promise<void> {
  const outcome = await pollUntil(
    async () => {
      const nodes = await deps.api.list('v1', 'Node');
      const check = clusterChecks(plan.needs, { nodes, runtimeClasses: [], refused: [] }).find(
        (c) => c.id === 'gpus',
      );
      return check?.outcome === 'pass'
        ? { done: check.message }
        : { waiting: check?.message ?? 'no GPU nodes' };
    },
    {
      clock: deps.clock,
      timeoutMs: WAIT_LIMITS_MS.DaemonSet,
      intervalMs: POLL_MS,
      announce: async (waiting) => deps.write(`  waiting for the GPUs to be advertised: ${waiting}`),
    },
  );
  if ('timedOut' in outcome) {
    throw new InstallStopped(
      `the GPU nodes do not advertise enough ${GPU_RESOURCE}: ${outcome.timedOut}. Check the device plugin's pods (kubectl -n kube-system logs daemonset/nvidia-device-plugin) and that the nodes have the NVIDIA driver and container toolkit.`,
    );
  }
  deps.write(`  ${outcome.done}`);
}
