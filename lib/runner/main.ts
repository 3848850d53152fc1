import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LabConfig } from '../config/schema.ts';
import { aimAtGate } from '../study/benchmark.ts';
import type { StudyPlan } from '../study/plan.ts';
import { FileResultStore } from './file-store.ts';
import { HttpEndpointPickers, HttpFrontEnds } from './http-front-ends.ts';
import { HttpReplicas } from './http-replicas.ts';
import { inClusterTransport, KubeCluster } from './kube-cluster.ts';
import { runLabStudy } from './lab-study.ts';
import { onRunnerNode, RUNNER_NODE_ENV } from './layout.ts';
import { type JobObject, systemClock } from './ports.ts';
import type { StatusChecks } from './preflight.ts';
import { leaveRunRequest, RUN_REQUEST_ENV } from './run-request.ts';
import { RUNNER_DIR, RUNNER_FILES, RUNNER_RESULTS_MOUNT } from './runner-files.ts';
import { runnerOptionsOf } from './runner-options.ts';
import { RunnerInterruptedError, StopRequest, signalExitCode, stopOnSignals } from './stop-signal.ts';

/**
 * The runner's entry in its pod: the real Kubernetes client (ServiceAccount token and CA), the
 * replicas over HTTP, the results host folder. Bundled into the runner ConfigMap at synth.
 * Exit code 0 when every run of the plan has a record (valid or not), 1 when the study stopped,
 * 143 (SIGTERM) or 130 (SIGINT) when the runner was told to stop (stop-signal.ts).
 * The network lab's cells run their own runner (network/entry.ts); this one refuses their configuration.
 */

function readJson<T>(path: string): T {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as T;
  } catch (error) {
    throw new Error(`cannot read ${path}: ${(error as Error).message}`);
  }
}

// Its pod deleted, the runner stops at once and deletes its clients (docs/runner.md).
const stop = new StopRequest(systemClock);
stopOnSignals(process, stop, { log: (line) => console.log(line), exit: (code) => process.exit(code) });

async function main(): Promise<void> {
  const dir = process.env.LAB_RUNNER_DIR ?? RUNNER_DIR;
  const results = process.env.LAB_RESULTS_DIR ?? RUNNER_RESULTS_MOUNT;
  const config = readJson<LabConfig>(join(dir, RUNNER_FILES.config));
  // Each lab has its own runner bundle; a network configuration here is a wiring mistake.
  if (config.lab === 'network') {
    throw new Error(
      `${join(dir, RUNNER_FILES.config)} is a network-lab configuration: a cell runs the network runner (lib/runner/network/entry.ts, charts/network/study-runner.ts), not this one`,
    );
  }
  const plan = readJson<StudyPlan>(join(dir, RUNNER_FILES.plan));
  const smoke = readJson<StudyPlan>(join(dir, RUNNER_FILES.smoke));
  const jobs = readJson<Record<string, JobObject>>(join(dir, RUNNER_FILES.jobs));
  const statusChecks = readJson<StatusChecks>(join(dir, RUNNER_FILES.preflight));
  const missing = [...plan.runs, ...smoke.runs]
    .flatMap((run) => run.benchmarks)
    .filter((spec) => !jobs[spec.id]);
  if (missing.length > 0) {
    throw new Error(`${RUNNER_FILES.jobs} has no Job for ${missing.map((spec) => spec.id).join(', ')}`);
  }
  // A cluster the user brings passes lab run's request in the env (run-request.ts).
  await leaveRunRequest(results, process.env[RUN_REQUEST_ENV], new Date());
  const done = await runLabStudy(
    {
      cluster: new KubeCluster(inClusterTransport(), config.namespace),
      replicas: new HttpReplicas(),
      frontEnds: new HttpFrontEnds(),
      endpointPickers: new HttpEndpointPickers(),
      store: new FileResultStore(results),
      clock: systemClock,
      // The clients write into this node's results folder (layout.ts).
      jobManifest: (spec, gate) =>
        onRunnerNode(gate ? aimAtGate(jobs[spec.id], gate) : jobs[spec.id], process.env[RUNNER_NODE_ENV]),
      log: (line) => console.log(line),
      stop,
    },
    config,
    { full: plan, smoke },
    { statusChecks, ...runnerOptionsOf(config) },
  );
  if (done.kind === 'smoke') {
    const checklist = done.outcome.checklist;
    console.log(
      `smoke study ${checklist?.studyId ?? ''}: ${checklist?.passed ? 'every proof passed' : 'FAILED'} (lab status prints the checklist)`,
    );
    return;
  }
  const invalid = done.study.runs.filter((run) => !run.valid).length;
  console.log(`results in ${results}: ${done.study.runs.length} runs, ${invalid} invalid`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(`lab study runner: ${(error as Error).message}`);
    process.exit(error instanceof RunnerInterruptedError ? signalExitCode(error.signal) : 1);
  },
);
