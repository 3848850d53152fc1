import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LabConfig } from '../../config/schema.ts';
import type { NetworkStudyPlan } from '../../network/study/model.ts';
import { cellByName } from '../../network/topology.ts';
import { inClusterTransport, KubeNetworkCluster } from '../kube-cluster.ts';
import { type JobObject, type ServiceObject, systemClock } from '../ports.ts';
import { runnerOptionsOf } from '../runner-options.ts';
import type { StopRequest } from '../stop-signal.ts';
import { FileNetworkResultStore } from './file-store.ts';
import { HttpSidecarMetrics } from './http-sidecar.ts';
import { type NetworkJobContext, runJobs } from './jobs.ts';
import { runNetworkLabStudy } from './lab-study.ts';
import { NETWORK_RUNNER_FILES, type NetworkRunnerContext } from './runner-files.ts';

function readJson<T>(path: string): T {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as T;
  } catch (error) {
    throw new Error(`cannot read ${path}: ${(error as Error).message}`);
  }
}

/** Jobs of the plan that jobs.json lacks (it must come from the same plan). */
export function missingPlanJobs(
  ctx: NetworkJobContext,
  plan: NetworkStudyPlan,
  jobs: Readonly<Record<string, JobObject>>,
): string[] {
  return plan.runs.flatMap((run) => Object.keys(runJobs(ctx, run)).filter((name) => !jobs[name]));
}

/**
 * The network runner in its pod (main.ts chooses it when `lab` is `network`): the cell's API
 * through the ServiceAccount, the sidecars over HTTP, the cell's results host folder.
 */
export async function networkMain(
  dir: string,
  results: string,
  config: LabConfig,
  stop?: StopRequest,
): Promise<void> {
  const plan = readJson<NetworkStudyPlan>(join(dir, NETWORK_RUNNER_FILES.plan));
  const smoke = readJson<NetworkStudyPlan>(join(dir, NETWORK_RUNNER_FILES.smoke));
  const jobs = readJson<Record<string, JobObject>>(join(dir, NETWORK_RUNNER_FILES.jobs));
  const context = readJson<NetworkRunnerContext>(join(dir, NETWORK_RUNNER_FILES.context));
  const serviceTemplate = readJson<ServiceObject>(join(dir, NETWORK_RUNNER_FILES.serviceTemplate));
  const ctx: NetworkJobContext = {
    config,
    cell: cellByName(config.network, context.cell),
    probes: context.probes,
  };
  const missing = [...missingPlanJobs(ctx, plan, jobs), ...missingPlanJobs(ctx, smoke, jobs)];
  if (missing.length > 0) throw new Error(`${NETWORK_RUNNER_FILES.jobs} has no Job ${missing.join(', ')}`);
  const done = await runNetworkLabStudy(
    {
      cluster: new KubeNetworkCluster(inClusterTransport()),
      sidecars: new HttpSidecarMetrics(),
      store: new FileNetworkResultStore(results),
      clock: systemClock,
      jobs: ctx,
      planJobs: jobs,
      serviceTemplate,
      log: (line) => console.log(line),
      ...(stop ? { stop } : {}),
    },
    config,
    { full: plan, smoke },
    // The same `runner.*` options as the first lab's runner: the readiness wait, and the error
    // policy with its outage limit (runner.retry.outageMinutes).
    runnerOptionsOf(config),
  );
  if (done.kind === 'smoke') {
    const checklist = done.outcome.checklist;
    console.log(
      `smoke study ${checklist?.studyId ?? ''} of cell ${context.cell}: ${checklist?.passed ? 'every proof passed' : 'FAILED'} (lab status --cell ${context.cell} prints the checklist)`,
    );
    return;
  }
  const { study } = done;
  const invalid = study.runs.filter((run) => !run.valid).length;
  console.log(`results in ${results}: ${study.runs.length} runs of cell ${study.cell}, ${invalid} invalid`);
}
