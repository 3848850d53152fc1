import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UPLOAD_GRACE_SECONDS } from '../../charts/results-upload.ts';
import { LOG_UPLOAD_MINUTES } from '../../lib/aws/bootstrap/bootstrap.ts';
import { RESULTS_NONCURRENT_DAYS } from '../../lib/aws/lab-stack.ts';
import { FOLLOW_POLL_SECONDS } from '../../lib/cli/study-commands.ts';
import { defaultLabConfig, loadLabConfig } from '../../lib/config/load.ts';
import { LOG_CHUNK_BYTES } from '../../lib/control/log-scripts.ts';
import {
  BOOT_MARGIN_MINUTES,
  baseBudgetMinutes,
  minimumReadyTimeoutMinutes,
} from '../../lib/facts/budgets.ts';
import { WAIT_LIMITS_MS } from '../../lib/install/steps.ts';
import { DEFAULT_NETWORK_RUN_OVERHEADS } from '../../lib/network/study/timing.ts';
import { MODEL_TOLERANCE } from '../../lib/report/tables.ts';
import { STOP_CLEANUP_MS } from '../../lib/runner/stop-signal.ts';
import { DEFAULT_RUN_OVERHEADS } from '../../lib/study/duration.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { DEVIATION_METRICS, SHARE_TOLERANCE } from '../../lib/study/self-calibration.ts';
import { lookedUpTokens, PARTITION_SEED_STEP, partitionSeeds, upperBound } from '../../lib/study/workload.ts';
import { REPO_ROOT } from '../../scripts/examples.ts';
import { expectQuoted } from './page-text.ts';

/**
 * Figures that README.md and the docs pages quote in their prose (not output blocks, so npm run
 * docs:examples cannot rewrite them), each recomputed from the constant or default the code uses:
 * a change in the code fails here, naming the page and the sentence to update. Other pages' prose
 * figures: prose-figures.test.ts (prices, budgets, the simulator's tunables), runner-figures.test.ts
 * (docs/runner.md), first-run-figures.test.ts (lab plan's figures in docs/first-run.md),
 * test/study/ttft-tail.test.ts (docs/planning.md's p99 TTFT tail).
 */

const read = (file: string) => readFileSync(join(REPO_ROOT, file), 'utf8');

const config = defaultLabConfig();
const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const thousands = (n: number) => n.toLocaleString('en-US');

describe('the default study', () => {
  it('has the number of runs the pages say', () => {
    const runs = studyPlan(config).runs.length;
    expectQuoted('README.md', `The default study (${runs} runs)`);
    expectQuoted('docs/study.md', `default study has ${runs} runs:`);
  });

  it('its hit-rate bound, over chat and over /v1/completions (docs/study.md, docs/report.md)', () => {
    const w = config.workload;
    const prompts = w.prompts;
    const chat = { ...w, prompts };
    const completions = { ...chat, chatTemplateTokens: 0 };
    const r = prompts / w.prefixes;
    expectQuoted(
      'docs/study.md',
      `L = looked-up tokens (prefix + suffix + chat template = ${thousands(lookedUpTokens(chat))}): ${r - 1}/${r} x ${w.prefixLen}/${lookedUpTokens(chat)} = ${pct(upperBound(chat))} for the default workload`,
    );
    expectQuoted(
      'docs/study.md',
      `their bound uses L = ${thousands(lookedUpTokens(completions))} (${pct(upperBound(completions))})`,
    );
    expectQuoted('docs/report.md', `(black, short dashes, ${pct(upperBound(chat))} by default)`);
  });

  it('the overheads the estimates assume (docs/study.md, docs/network-lab.md)', () => {
    const o = DEFAULT_RUN_OVERHEADS;
    expectQuoted(
      'docs/study.md',
      `(${o.jobStartSeconds} s per Job start, ${o.frontEndRestartSeconds} s per front-end restart)`,
    );
    const n = DEFAULT_NETWORK_RUN_OVERHEADS;
    expectQuoted(
      'docs/network-lab.md',
      `(\`DEFAULT_NETWORK_RUN_OVERHEADS\`: ${n.jobStartSeconds} s Job start, ${n.runnerSeconds} s runner, EndpointSlices at kube-controller-manager's ${n.endpointSlicesPerSecond} writes/s, ${n.conntrackSettleSeconds} s of TIME_WAIT between conntrack steps`,
    );
  });

  it("the ideal partition's seeds (docs/plan.md)", () => {
    const seeds = partitionSeeds({ seed: config.workload.seed }, 3);
    expect(config.workload.partitionSeeds).toBeUndefined();
    expectQuoted(
      'docs/plan.md',
      `\`workload.seed + ${PARTITION_SEED_STEP} x replica\`: ${seeds.join(', ')}, ...`,
    );
  });
});

describe("the network lab's experiments (docs/network-study.md, docs/network-probes.md)", () => {
  it('are the example configuration’s defaults', () => {
    const x = loadLabConfig({ file: join(REPO_ROOT, 'examples/network-lab.yaml'), env: {} }).config.network
      .experiments;
    expectQuoted('docs/network-study.md', `| E6 | one ${x.largeBodyMiB} MiB download,`);
    expectQuoted(
      'docs/network-study.md',
      `| E7 | an SSE stream of ${x.sse.events} events every ${x.sse.intervalMs} ms:`,
    );
    const steps = x.serviceScale.steps;
    expectQuoted(
      'docs/network-study.md',
      `| E9 | Services at scale, ${thousands(Math.min(...steps))} to ${thousands(Math.max(...steps))} Services:`,
    );
    expectQuoted('docs/network-probes.md', `gaps between events that arrive every ${x.sse.intervalMs} ms`);
    const timeout = x.serviceScale.proberAttemptTimeoutMs;
    expectQuoted('docs/network-probes.md', `with a ${timeout} ms attempt timeout`);
    expectQuoted('docs/network-probes.md', `ends at the attempt timeout, so it resolves to ${timeout} ms`);
  });
});

describe("the report's bands (docs/report.md, docs/planning.md)", () => {
  it('are the tolerances the report and the self-calibration judge with', () => {
    expectQuoted(
      'docs/report.md',
      `(${Math.round(100 * MODEL_TOLERANCE.hitRate)} points of hit rate, its calibration tolerance against the published single-replica sweep; ${MODEL_TOLERANCE.totalTokensPerSecondPercent}% of throughput)`,
    );
    const m = DEVIATION_METRICS;
    const p = (x: number) => Math.round(100 * x);
    const timings = `tok/s ${p(m.totalTokensPerSecond.tolerance)}%, mean TTFT ${p(m.meanTtftMs.tolerance)}%, p99 TTFT ${p(m.p99TtftMs.tolerance)}%, ITL ${p(m.meanItlMs.tolerance)}%`;
    expectQuoted(
      'docs/report.md',
      `plus hit rate ${p(m.hitRate.tolerance)} points, ${timings}, share ${p(SHARE_TOLERANCE)} points`,
    );
    expectQuoted(
      'docs/planning.md',
      `tolerance: hit rate ${p(m.hitRate.tolerance)} points, ${timings}, the busiest replica's share of requests ${p(SHARE_TOLERANCE)} points`,
    );
  });
});

describe('the hosts, the install and the CLI', () => {
  it("the results bucket and the host's uploads (docs/aws-testbed.md, docs/study-control.md, docs/runner.md)", () => {
    // The sync timer is bash (steps/01-cost-guard.sh): its interval is read from the unit it installs.
    const guard = read('lib/aws/bootstrap/sh/steps/01-cost-guard.sh');
    const timer = /install_unit lab-results-sync\.timer <<'UNIT'\n([\s\S]*?)\nUNIT/.exec(guard)?.[1] ?? '';
    const first = /^OnActiveSec=(\d+)min$/m.exec(timer)?.[1];
    const every = /^OnUnitActiveSec=(\d+)min$/m.exec(timer)?.[1];
    expect(first, "lab-results-sync.timer's OnActiveSec in minutes").toBeDefined();
    expect(every, "lab-results-sync.timer's OnUnitActiveSec in minutes").toBeDefined();
    expectQuoted(
      'docs/aws-testbed.md',
      `expires replaced versions after ${RESULTS_NONCURRENT_DAYS} days (the host syncs every ${every} minutes)`,
    );
    expectQuoted('docs/aws-testbed.md', `uploaded every ${LOG_UPLOAD_MINUTES} minutes, so it is readable`);
    expectQuoted(
      'docs/study-control.md',
      `that its timer runs every ${every} minutes and that runs once more at shutdown`,
    );
    expectQuoted('docs/study-control.md', `The first upload runs ${first} minutes after boot.`);
    expectQuoted('docs/first-run.md', `the host's sync, which runs every ${every} minutes and at shutdown`);
    expectQuoted('docs/runner.md', `(the sync runs every ${every} minutes)`);
    // The CLI's own messages say it too.
    for (const file of ['lib/control/smoke-uploads.ts', 'lib/control/study-control.ts']) {
      const said = [...read(file).matchAll(/uploads every (\d+) minutes/g)].map((m) => m[1]);
      expect(said.length, `${file} says how often the host uploads`).toBeGreaterThan(0);
      for (const minutes of said) expect(minutes, `${file}: "uploads every ${minutes} minutes"`).toBe(every);
    }
  });

  it("the bootstrap's ready timeout (docs/aws-testbed.md, docs/first-run.md)", () => {
    const timeout = config.instance.readyTimeoutMinutes;
    expectQuoted('docs/aws-testbed.md', `(\`instance.readyTimeoutMinutes\`, default ${timeout})`);
    expectQuoted(
      'docs/aws-testbed.md',
      `refuses a timeout under ${minimumReadyTimeoutMinutes()} minutes, the sum of the budgets and ${BOOT_MARGIN_MINUTES} minutes of boot)`,
    );
    expect(minimumReadyTimeoutMinutes()).toBe(baseBudgetMinutes() + BOOT_MARGIN_MINUTES);
    expectQuoted('docs/first-run.md', `(at most \`instance.readyTimeoutMinutes\`, ${timeout})`);
    // The least timeout with K3s agents (the server also waits for its agents).
    const withAgents = minimumReadyTimeoutMinutes(true);
    expectQuoted('docs/first-run.md', `\`instance.readyTimeoutMinutes\` (${timeout}; ${withAgents} with`);
    expectQuoted('lib/config/instance.ts', `(${timeout} for the GPU host, ${withAgents} with agents;`);
  });

  it("lab install's waits and the runner's stop (docs/cluster.md)", () => {
    const min = (kind: string) => (WAIT_LIMITS_MS[kind] ?? Number.NaN) / 60_000;
    expectQuoted(
      'docs/cluster.md',
      `(Deployments, StatefulSets, DaemonSets; up to ${min('Deployment')}, ${min('StatefulSet')} and ${min('DaemonSet')} minutes)`,
    );
    expectQuoted(
      'docs/cluster.md',
      `waits until the claim is \`Bound\` (${min('PersistentVolumeClaim')} minutes;`,
    );
    expectQuoted('docs/cluster.md', `stops the runner within ${STOP_CLEANUP_MS / 1000} s`);
    expectQuoted('docs/cluster.md', `(the pod gets ${UPLOAD_GRACE_SECONDS} s for that)`);
  });

  it('lab logs --follow (docs/cli.md)', () => {
    expectQuoted('docs/cli.md', `\`--follow\` asks the host again every ${FOLLOW_POLL_SECONDS} s for`);
    expectQuoted('docs/cli.md', `arrives in ${LOG_CHUNK_BYTES / 1000} KB chunks`);
  });
});
