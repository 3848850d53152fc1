/**
 * The default study's instance time and cost after the bootstrap (issue 11), and the runner's own
 * overhead per run measured in the rehearsal.
 *
 * 1. Runs the whole default study with the real runner against the rehearsal's fake cluster and
 *    loopback replicas (test/runner/fakes.ts): every Job "runs" 120.5 s of fake time and every
 *    front-end restart takes 20 s, so what a run takes beyond those is the runner's own overhead
 *    (polls, resets and their log confirmation, scrapes, records). Staging is off for this
 *    measurement (`runner.stageNextRun: false`): it would hide the fake restarts and client
 *    starts, which step 2 models from the plan instead. Also the wall-clock time the runner's
 *    code needs per run on this machine.
 * 2. Estimates the study with lib/study/duration.ts: the simulator's load per run plus overheads,
 *    the runner overhead replaced by the one measured in step 1 (the default, 5 s, if the
 *    rehearsal fails, which the output then says).
 * 3. Prints the estimate as the runner executes it (bound sweep one run per replica at once):
 *    serial with staging (`runner.stageNextRun`, the default: the next run's clients start and
 *    its front end restarts during the current run's load, lib/study/staging.ts), serial without
 *    staging, and `study.parallelism: 2` with staging (two replica pairs, each going through its
 *    own runs: lib/study/plan.ts runPrerequisites); each broken down per run group and per
 *    overhead, and checked against issue 11's targets (75 minutes serial, 45 with two pairs).
 *
 * Run: npx tsx scripts/bench-study.ts
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchmarkJob } from '../charts/benchmark-job.ts';
import { defaultLabConfig, parseLabConfig } from '../lib/config/load.ts';
import type { LabConfig } from '../lib/config/schema.ts';
import { FileResultStore } from '../lib/runner/file-store.ts';
import { HttpEndpointPickers, HttpFrontEnds } from '../lib/runner/http-front-ends.ts';
import { HttpReplicas } from '../lib/runner/http-replicas.ts';
import { runStudy } from '../lib/runner/run-study.ts';
import {
  DEFAULT_RUN_OVERHEADS,
  estimateStudy,
  formatEstimate,
  type StudyEstimate,
} from '../lib/study/duration.ts';
import { studyPlan } from '../lib/study/plan.ts';
import {
  FakeClock,
  FakeCluster,
  FakeEndpointPickers,
  FakeFrontEnds,
  FakeReplica,
} from '../test/runner/fakes.ts';

// Not a whole number of Job polls (1 s apart): a real Job ends anywhere between two polls, so
// the runner notices it half a poll late on average, and the measurement includes that.
const JOB_SECONDS = 120.5;
const ROLLOUT_SECONDS = 20;

const config = defaultLabConfig();
const plan = studyPlan(config);

function unstagedConfig(c: LabConfig): LabConfig {
  return { ...c, runner: { ...c.runner, stageNextRun: false } };
}

async function rehearse(): Promise<{ overheadSeconds: number; wallMsPerRun: number }> {
  const config = unstagedConfig(defaultLabConfig());
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

/** Issue 11's targets: instance minutes after the bootstrap. */
const SERIAL_TARGET_MINUTES = 75;
const PARALLEL_TARGET_MINUTES = 45;

let measured: { overheadSeconds: number; wallMsPerRun: number } | undefined;
let rehearsalFailure: string | undefined;
try {
  measured = await rehearse();
} catch (error) {
  rehearsalFailure = error instanceof Error ? error.message : String(error);
}
const overheads = {
  ...DEFAULT_RUN_OVERHEADS,
  runnerSeconds: measured?.overheadSeconds ?? DEFAULT_RUN_OVERHEADS.runnerSeconds,
};
const estimate = (c: LabConfig) => estimateStudy(c, studyPlan(c), overheads);
const paired = parseLabConfig({ study: { parallelism: 2 } });
const staged = estimate(config);
const unstaged = estimate(unstagedConfig(config));
const parallel = estimate(paired);
const parallelUnstaged = estimate(unstagedConfig(paired));

console.log(
  `default study: ${plan.runs.length} runs, ${config.instance.type} at ${config.instance.pricePerHourUsd} USD/h`,
);
console.log(
  measured
    ? `runner overhead per run (rehearsal, fake time beyond the Job and the front-end restart): ${measured.overheadSeconds.toFixed(1)} s; runner code ${measured.wallMsPerRun.toFixed(0)} ms wall per run`
    : `runner overhead per run: the rehearsal failed (${rehearsalFailure}); the estimate takes the default ${DEFAULT_RUN_OVERHEADS.runnerSeconds} s instead`,
);
console.log(
  `benchmark load (simulator): ${minutes(staged.runs.reduce((sum, r) => sum + r.loadSeconds, 0))} in all runs`,
);
console.log(
  `overheads per run, assumed: Job start ${overheads.jobStartSeconds} s, front-end restart ${overheads.frontEndRestartSeconds} s, reset ${overheads.resetSeconds} s, preflight ${overheads.preflightSeconds} s per arm, gate ${overheads.gateSeconds} s per staged run`,
);
console.log('');
console.log(`${'schedule'.padEnd(60)}instance time      cost`);
const rows: [string, number][] = [
  ['serial, staged (runner.stageNextRun, the default)', staged.totalSeconds],
  ['serial, not staged (runner.stageNextRun: false)', unstaged.totalSeconds],
  ['every run one after the other, staged', staged.serialSeconds],
  ['study.parallelism: 2, staged', parallel.totalSeconds],
  ['study.parallelism: 2, not staged', parallelUnstaged.totalSeconds],
];
for (const [name, seconds] of rows) {
  console.log(`${name.padEnd(60)}${minutes(seconds).padStart(13)}${usd(seconds).padStart(10)}`);
}

// Where each schedule's time goes: the same block `lab plan` prints.
const breakdowns: [string, StudyEstimate][] = [
  ['serial, staged', staged],
  ['serial, not staged', unstaged],
  ['study.parallelism: 2, staged', parallel],
];
for (const [name, e] of breakdowns) {
  console.log('');
  console.log(`${name}:`);
  process.stdout.write(formatEstimate(e));
}

const orderedLoad = Object.values(staged.groups).reduce((sum, g) => sum + g.loadSeconds, 0);
const check = (seconds: number, target: number) =>
  `${minutes(seconds)} against at most ${target} min: ${seconds <= target * 60 ? 'met' : 'NOT met'}`;
console.log('');
console.log(
  `${SERIAL_TARGET_MINUTES}-minute serial target (issue 11): ${check(staged.totalSeconds, SERIAL_TARGET_MINUTES)}`,
);
console.log(
  `  the load alone takes ${minutes(orderedLoad)} as the runner orders it, which leaves ${((SERIAL_TARGET_MINUTES * 60 - orderedLoad) / plan.runs.length).toFixed(1)} s per run for every overhead; without staging: ${check(unstaged.totalSeconds, SERIAL_TARGET_MINUTES)}`,
);
console.log(
  `${PARALLEL_TARGET_MINUTES}-minute target with study.parallelism: 2 (issue 11): ${check(parallel.totalSeconds, PARALLEL_TARGET_MINUTES)}`,
);
