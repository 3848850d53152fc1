import { describe, expect, it } from 'vitest';
import { UPLOAD_GRACE_SECONDS } from '../../charts/results-upload.ts';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import { DEFAULT_RETRY_POLICY } from '../../lib/runner/call-policy.ts';
import { PREFLIGHT_FIRST_DELAY_MS, PREFLIGHT_TRIES } from '../../lib/runner/evidence.ts';
import { resolveOptions, runnerOptionsOf, stagedWaitLimitMs } from '../../lib/runner/runner-options.ts';
import { STOP_CLEANUP_MS, STOP_EXIT_MS } from '../../lib/runner/stop-signal.ts';
import { LAB_SPEC_CALIBRATION } from '../../lib/study/calibration.ts';
import { DEFAULT_RUN_OVERHEADS, estimateStudy } from '../../lib/study/duration.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { DISTINCT_PREFIX_MIN_GAP } from '../../lib/study/validity.ts';
import { workingSetTokens } from '../../lib/study/workload.ts';
import { expectQuoted as expectQuotedIn, pageText } from './page-text.ts';

/**
 * The figures docs/runner.md quotes in its prose (not an output block, so npm run docs:examples
 * cannot rewrite them), each recomputed from the runner's own defaults and constants: a changed
 * wait, limit or overhead fails here, naming the sentence to update. Its schedules table is a
 * generated block (scripts/study-schedules.ts); its results folder's tree is checked by
 * test/runner/smoke-rehearsal.test.ts (test/docs/file-layout.ts).
 */

const PAGE = 'docs/runner.md';
const page = pageText(PAGE);
const expectQuoted = (text: string) => expectQuotedIn(PAGE, text);

/** The number the page writes where `pattern`'s group is, or a failure naming the sentence that is gone. */
function quotedNumber(pattern: RegExp): number {
  const match = pattern.exec(page);
  if (!match) throw new Error(`${PAGE} no longer has a sentence matching ${pattern}`);
  return Number(match[1]);
}

const config = defaultLabConfig();
const options = resolveOptions(config, runnerOptionsOf(config));
const minutes = (ms: number) => ms / 60_000;
const seconds = (ms: number) => ms / 1_000;

describe(`${PAGE}: the runner's waits and limits are its defaults`, () => {
  it("a staged client's longest wait at its gate (--ready-check-timeout-sec)", () => {
    expectQuoted(
      `this run's own waits before its gates open: ${minutes(stagedWaitLimitMs(options, config.vllm.replicas))} minutes with the defaults`,
    );
  });

  it('the waits of one run', () => {
    expectQuoted(
      `until every replica answers \`/v1/models\` (${minutes(options.startupTimeoutMs)} minutes at most`,
    );
    expectQuoted(`\`runner.readyTimeoutMinutes\` (${config.runner.readyTimeoutMinutes} by default)`);
    expect(minutes(options.readyTimeoutMs)).toBe(config.runner.readyTimeoutMinutes);
    expectQuoted(`\`kubectl rollout status\` would (${minutes(options.rolloutTimeoutMs)} minutes at most)`);
    expect(options.jobPollIntervalMs, 'the page says Jobs are polled every second').toBe(1_000);
    expectQuoted('(Jobs are polled every second)');
    expectQuoted(`A Job still running after ${minutes(options.jobTimeoutMs)} minutes is deleted`);
    expectQuoted(`\`Unschedulable\`) for ${minutes(options.unschedulableTimeoutMs)} minutes is deleted`);
    expectQuoted(`\`RunnerOptions.idleTimeoutMs\` (${minutes(options.idleTimeoutMs)} minutes by default)`);
    expectQuoted(`\`RunnerOptions.confirmTimeoutMs\` (${seconds(options.confirmTimeoutMs)} s by default)`);
    expectQuoted(`serving \`/v1/models\`; ${minutes(options.podRestartTimeoutMs)} minutes at most)`);
    expectQuoted(
      `up to ${options.runAttempts} attempts of a run in one runner (\`RunnerOptions.runAttempts\``,
    );
  });

  it('the retries and the outage limit', () => {
    const retry = DEFAULT_RETRY_POLICY;
    expect(config.runner.retry).toMatchObject({
      attempts: retry.attempts,
      initialDelaySeconds: seconds(retry.initialDelayMs),
      maxDelaySeconds: seconds(retry.maxDelayMs),
    });
    expectQuoted(
      `(\`runner.retry\`: ${seconds(retry.initialDelayMs)} s doubling up to ${seconds(retry.maxDelayMs)} s)`,
    );
    expectQuoted(`| ${retry.attempts} tries; then as an answer |`);
    expectQuoted(`| ${retry.attempts} tries | |`);
    expectQuoted(
      `the preflight is tried again (${PREFLIGHT_TRIES} times, ${seconds(PREFLIGHT_FIRST_DELAY_MS)} s doubling)`,
    );
    const [low, high] = [1, 240];
    expectQuoted(
      `\`runner.retry.outageMinutes\` (${config.runner.retry.outageMinutes} by default; an integer from ${low} to ${high})`,
    );
    expect(minutes(options.retry.outageMs ?? 0)).toBe(config.runner.retry.outageMinutes);
    const outage = (outageMinutes: number) => () => parseLabConfig({ runner: { retry: { outageMinutes } } });
    for (const bad of [low - 1, high + 1, 1.5]) expect(outage(bad), `outageMinutes ${bad}`).toThrow();
    for (const good of [low, high]) expect(outage(good)).not.toThrow();
  });

  it('the stop on SIGTERM', () => {
    expectQuoted(`(30 s by default; ${UPLOAD_GRACE_SECONDS} s with \`runner.results.upload\``);
    expectQuoted(`at most ${seconds(STOP_CLEANUP_MS)} s after the signal (\`STOP_CLEANUP_MS\`)`);
    expectQuoted(`after ${seconds(STOP_EXIT_MS)} s (\`STOP_EXIT_MS\`)`);
  });
});

describe(`${PAGE}: the study's figures are the plan's and the estimate's`, () => {
  const plan = studyPlan(config);

  it('the default study, its bound sweep and the distinct-prefix check', () => {
    expectQuoted(`runs the whole default study (${plan.runs.length} runs`);
    const gap = Math.round(100 * DISTINCT_PREFIX_MIN_GAP);
    expectQuoted(`The first must hit at least ${gap} percentage points (\`DISTINCT_PREFIX_MIN_GAP\`)`);
    expectQuoted(`their formula bounds are at least ${gap} points apart`);
    const bounds = plan.runs
      .flatMap((run) => {
        const shape = run.group === 'bound' ? run.benchmarks[0]?.prefix : undefined;
        return shape ? [{ shape, bound: run.upperBound ?? 0 }] : [];
      })
      .sort((a, b) => b.shape.prefixes - a.shape.prefixes);
    const [most, fewest] = [bounds[0], bounds.at(-1)];
    if (!most || !fewest) throw new Error('the default study has no bound sweep');
    const measured = (prefixes: number) =>
      LAB_SPEC_CALIBRATION.find((row) => row.prefixes === prefixes)?.hitRate;
    const pct = (x = Number.NaN) => `${Math.round(100 * x)}%`;
    const thousands = (n: number) => n.toLocaleString('en-US');
    const kv = config.vllm.kvCacheTokensPerReplica;
    expect(workingSetTokens(most.shape)).toBeGreaterThan(kv);
    expectQuoted(
      `With the defaults the formula bounds are ${pct(most.bound)} for ${most.shape.prefixes} prefixes and ${pct(fewest.bound)} for ${fewest.shape.prefixes}, and the ${most.shape.prefixes} prefixes' ${thousands(workingSetTokens(most.shape))} tokens overflow a replica's ${thousands(kv)}-token KV cache; docs/facts.md §4.1 measured ${pct(measured(most.shape.prefixes))} and ${pct(measured(fewest.shape.prefixes))}.`,
    );
  });

  it("the overheads lab plan's estimate assumes", () => {
    const o = DEFAULT_RUN_OVERHEADS;
    expectQuoted(`the gate costs at most ${o.gateSeconds} s`);
    expectQuoted(`a Job start of ${o.jobStartSeconds} s`);
    expectQuoted(`a front-end restart of ${o.frontEndRestartSeconds} s`);
    expectQuoted(
      `A staged run needs ${o.resetSeconds} s of reset, ${o.gateSeconds} s of gate at worst, the runner's work and ${o.preflightSeconds} s of preflight`,
    );
    expectQuoted(`against the ${o.runnerSeconds} s \`lab plan\` allows`);
  });

  it('a Job start fits in the load of every run after the bound sweep', () => {
    const shortest = Math.min(
      ...estimateStudy(config, plan)
        .runs.filter((run) => run.group !== 'bound')
        .map((run) => run.loadSeconds),
    );
    const quoted = quotedNumber(/every run after the bound sweep lasts over (\d+) s/);
    expect(shortest, `the shortest run after the bound sweep lasts ${shortest.toFixed(1)} s`).toBeGreaterThan(
      quoted,
    );
    expect(quoted).toBeGreaterThanOrEqual(DEFAULT_RUN_OVERHEADS.jobStartSeconds);
  });
});
