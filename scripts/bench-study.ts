/**
 * The default study's instance time and cost after the bootstrap (issue 11), and the runner's own
 * overhead per run measured in the rehearsal.
 *
 * 1. Runs the whole default study with the real runner against the rehearsal's fake cluster and
 *    loopback replicas (test/runner/fakes.ts): every Job "runs" 120 s of fake time and every
 *    front-end restart takes 20 s, so what a run takes beyond those is the runner's own overhead
 *    (polls, resets and their log confirmation, scrapes, records). Also the wall-clock time the
 *    runner's code needs per run on this machine.
 * 2. Estimates the study with lib/study/duration.ts: the simulator's load per run plus overheads,
 *    the runner overhead replaced by the one measured in step 1.
 * 3. Prints the estimate as the runner executes it (bound sweep one run per replica at once), with
 *    every run serial, and with `study.parallelism: 2` (two replica pairs, each going through its
 *    own runs: lib/study/plan.ts runPrerequisites), from the same per-run figures.
 *
 * Run: npx tsx scripts/bench-study.ts
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchmarkJob } from '../charts/benchmark-job.ts';
import { defaultLabConfig, parseLabConfig } from '../lib/config/load.ts';
import { FileResultStore } from '../lib/runner/file-store.ts';
import { HttpEndpointPickers, HttpFrontEnds } from '../lib/runner/http-front-ends.ts';
import { HttpReplicas } from '../lib/runner/http-replicas.ts';
import { runStudy } from '../lib/runner/run-study.ts';
import { DEFAULT_RUN_OVERHEADS, estimateStudy, type StudyEstimate } from '../lib/study/duration.ts';
import { studyPlan } from '../lib/study/plan.ts';
import {
  FakeClock,
  FakeCluster,
  FakeEndpointPickers,
  FakeFrontEnds,
  FakeReplica,
} from '../test/runner/fakes.ts';

const JOB_SECONDS = 120;
const ROLLOUT_SECONDS = 20;

const config = defaultLabConfig();
const plan = studyPlan(config);

async function rehearse(): Promise<{ overheadSeconds: number; wallMsPerRun: number }> {
  const replicas = [new FakeReplica('qwen3-0'), new FakeReplica('qwen3-1')];
  for (const r of replicas) await r.start();
  const frontEnds = new FakeFrontEnds(replicas);
  await frontEnds.start();
  const pickers = new FakeEndpointPickers();
  await pickers.start();
  const dir = mkdtempSync(join(tmpdir(), 'lab-bench-'));
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, pickers.token);
  const clock = new FakeClock();
  const cluster = new FakeCluster({
    config,
    plan,
    replicas,
    resultsDir: dir,
    clock,
    jobSeconds: JOB_SECONDS,
    // Lab-spec 4.1's calibration rates for the bound sweep (distinct prefixes), made-up others.
    hitRate: (spec) =>
      spec.dataset === 'sharegpt'
        ? 0.05
        : spec.target.kind === 'arm'
          ? 0.6
          : ({ 128: 0.444, 64: 0.776, 16: 0.909, 8: 0.923 }[spec.prefix?.prefixes ?? 0] ?? 0.81),
  });
  const started = performance.now();
  try {
    const study = await runStudy(
      {
        cluster,
        replicas: new HttpReplicas(5_000),
        frontEnds: new HttpFrontEnds(5_000),
        endpointPickers: new HttpEndpointPickers(tokenFile, 5_000),
        store: new FileResultStore(dir),
        clock,
        jobManifest: (spec, gate) => benchmarkJob(config, spec, gate),
        log: () => {},
      },
      config,
      plan,
      {
        replicaUrls: () => replicas.map((r) => r.url),
        frontEndUrl: (arm) => `${frontEnds.url}/${arm.id}`,
        eppMetricsUrl: (arm) => `${pickers.url}/${arm.id}`,
      },
    );
    const wallMs = performance.now() - started;
    const invalid = study.runs.filter((r) => !r.valid);
    if (invalid.length > 0)
      throw new Error(`rehearsal: ${invalid.length} invalid run(s): ${invalid[0].invalidReasons}`);
    const overheads = study.runs.map((r) => {
      const run = plan.runs.find((p) => p.id === r.id);
      const seconds = (Date.parse(r.finishedAt) - Date.parse(r.startedAt)) / 1000;
      return seconds - JOB_SECONDS - (run?.reset.restartFrontEndOf ? ROLLOUT_SECONDS : 0);
    });
    return {
      overheadSeconds: overheads.reduce((a, b) => a + b, 0) / overheads.length,
      wallMsPerRun: wallMs / study.runs.length,
    };
  } finally {
    for (const r of replicas) await r.stop();
    await frontEnds.stop();
    await pickers.stop();
  }
}

const minutes = (seconds: number) => `${(seconds / 60).toFixed(1)} min`;
const usd = (seconds: number) => `${((seconds / 3600) * config.instance.pricePerHourUsd).toFixed(2)} USD`;

const measured = await rehearse();
const overheads = { ...DEFAULT_RUN_OVERHEADS, runnerSeconds: measured.overheadSeconds };
const estimate = estimateStudy(config, plan, overheads);
const paired = parseLabConfig({ study: { parallelism: 2 } });
const parallel: StudyEstimate = estimateStudy(paired, studyPlan(paired), overheads);
const load = estimate.runs.reduce((sum, r) => sum + r.loadSeconds, 0);
console.log(
  `default study: ${plan.runs.length} runs, ${config.instance.type} at ${config.instance.pricePerHourUsd} USD/h`,
);
console.log(
  `runner overhead per run (rehearsal, fake time beyond the Job and the front-end restart): ${measured.overheadSeconds.toFixed(1)} s; runner code ${measured.wallMsPerRun.toFixed(0)} ms wall per run`,
);
console.log(`benchmark load (simulator): ${minutes(load)} in all runs`);
console.log(
  `overheads per run: Job start ${DEFAULT_RUN_OVERHEADS.jobStartSeconds} s, reset ${DEFAULT_RUN_OVERHEADS.resetSeconds} s, front-end restart ${DEFAULT_RUN_OVERHEADS.frontEndRestartSeconds} s, preflight ${DEFAULT_RUN_OVERHEADS.preflightSeconds} s per arm`,
);
console.log('');
console.log('schedule                                              instance time    cost');
const rows: [string, number][] = [
  ['every run serial', estimate.serialSeconds],
  ['serial, bound sweep one run per replica (the runner)', estimate.totalSeconds],
  ['study.parallelism: 2 (two replica pairs)', parallel.totalSeconds],
];
for (const [name, seconds] of rows) {
  console.log(`${name.padEnd(54)}${minutes(seconds).padStart(12)}${usd(seconds).padStart(10)}`);
}

// Where the serial study's time goes, and what the 75-minute target would leave for overheads.
console.log('');
console.log('where the time goes (serial, as the runner orders it)');
for (const [group, g] of Object.entries(estimate.groups)) {
  console.log(
    `  ${group.padEnd(10)} load ${minutes(g.loadSeconds).padStart(9)}  overhead ${minutes(g.overheadSeconds).padStart(9)}`,
  );
}
const orderedLoad = Object.values(estimate.groups).reduce((sum, g) => sum + g.loadSeconds, 0);
const restarts = plan.runs.filter((run) => run.reset.restartFrontEndOf).length;
console.log(
  `  overheads in all: ${plan.runs.length} Job starts ${minutes(plan.runs.length * overheads.jobStartSeconds)}, ${restarts} front-end restarts ${minutes(restarts * overheads.frontEndRestartSeconds)}, resets ${minutes(plan.runs.length * overheads.resetSeconds)}`,
);
const left = 75 * 60 - orderedLoad;
console.log(
  `75-minute serial target: the load alone takes ${minutes(orderedLoad)}, which leaves ${(left / plan.runs.length).toFixed(1)} s per run for every overhead (the Job start alone is taken as ${overheads.jobStartSeconds} s)`,
);
