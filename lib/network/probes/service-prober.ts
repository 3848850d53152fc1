/**
 * Experiment E9 (docs/facts.md §N3): how long after a Service is created does its ClusterIP
 * accept a TCP connection. The prober tries to connect in a tight loop, each attempt bounded by a
 * short timeout (20 ms), and reports the time from the start until the first connect succeeded.
 * This module is the pure part: targets, the result, and the quantization check.
 *
 * Resolution: a refused attempt (a REJECT rule, or nothing listening) ends at once and the next
 * one starts immediately, so the measurement is as fine as the connect round trip. An attempt
 * whose SYN is dropped (no rule yet for the ClusterIP) ends at its timeout, so there the
 * resolution is the attempt timeout: 20 ms, where a 200 ms limit quantized the manual study's
 * numbers to multiples of 200 ms.
 */
import { parseHostPort } from './flags.ts';
import { type MsDistribution, msDistribution, roundMs } from './stats.ts';

export interface ProberTarget {
  readonly host: string;
  readonly port: number;
  /**
   * The moment the sample starts, in ms since the Unix epoch (the runner's clock when it created
   * the Service; the prober runs on the same node). Absent: the sample starts when probing does.
   */
  readonly startEpochMs?: number;
}

/** `host:port` or `host:port@<start, ms since the epoch>`. */
export function parseProberTarget(raw: string): ProberTarget {
  const at = raw.lastIndexOf('@');
  const address = parseHostPort('target', at === -1 ? raw : raw.slice(0, at));
  if (at === -1) return address;
  const start = Number(raw.slice(at + 1));
  if (raw.slice(at + 1).trim() === '' || !Number.isFinite(start) || start <= 0) {
    throw new Error(`--target start after '@' must be ms since the Unix epoch, got '${raw.slice(at + 1)}'`);
  }
  return { ...address, startEpochMs: start };
}

/** The targets to sample: each target once, or one target `samples` times (a calibration run). */
export function samplePlan(targets: readonly ProberTarget[], samples: number): ProberTarget[] {
  if (targets.length === 0) throw new Error('--target is required (host:port[@startEpochMs], may repeat)');
  if (samples === 1) return [...targets];
  if (targets.length > 1 || targets[0].startEpochMs !== undefined) {
    throw new Error(
      `--samples ${samples} repeats one --target without a start time; with ${targets.length} targets each target is one sample`,
    );
  }
  return Array.from({ length: samples }, () => targets[0]);
}

/** How one connect attempt ended. */
export type AttemptOutcome =
  | { readonly kind: 'connected'; readonly atMs: number }
  | { readonly kind: 'refused' }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'error'; readonly code: string };

/** One sample: the probing of one target until it connected or the prober gave up. */
export interface ProbeSample {
  /**
   * E9's method (prober first): attempts that started at or after the sample's start (the
   * Service's acceptance), the connecting one included. Absent for a sample timed from the
   * prober's own start.
   */
  readonly attemptsAfterStart?: number;
  /**
   * E9: ms between the start of the attempt before the connecting one and the connecting one's
   * start; the programming happened somewhere in that window, so it is the sample's resolution
   * (the attempt timeout when the earlier attempt's SYN was dropped). Null with one attempt.
   */
  readonly resolutionMs?: number | null;
  /** E9: spacing of the attempts that timed out (ms): the attempt timeout plus a loop turn for a sound prober. */
  readonly timeoutStepMs?: number | null;
  /** `host:port`. */
  readonly target: string;
  readonly connected: boolean;
  /** ms from the sample's start until the connect succeeded; null when it never did. */
  readonly latencyMs: number | null;
  /**
   * ms from the sample's start until the first attempt went out: 0 without a start time, else the
   * delay before the prober ran. The latency can never be below it (the floor of this sample).
   */
  readonly firstAttemptAfterMs: number;
  /** Connect attempts made, the successful one included (count). */
  readonly attempts: number;
  /** Attempts refused (RST; count). */
  readonly refused: number;
  /** Attempts that hit the attempt timeout (SYN unanswered; count). */
  readonly timedOut: number;
  /** Other failed attempts by error code (counts), e.g. EHOSTUNREACH. */
  readonly otherErrors: Record<string, number>;
}

/** Tallies a sample's attempts. Pure: the caller says when it started and when it connected. */
export function sampleOf(
  target: ProberTarget,
  firstAttemptAfterMs: number,
  outcomes: readonly AttemptOutcome[],
  latencyMs: number | null,
): ProbeSample {
  const otherErrors: Record<string, number> = {};
  for (const outcome of outcomes) {
    if (outcome.kind === 'error') otherErrors[outcome.code] = (otherErrors[outcome.code] ?? 0) + 1;
  }
  const count = (kind: AttemptOutcome['kind']) => outcomes.filter((outcome) => outcome.kind === kind).length;
  const host = target.host.includes(':') ? `[${target.host}]` : target.host;
  return {
    target: `${host}:${target.port}`,
    connected: latencyMs !== null,
    latencyMs: latencyMs === null ? null : roundMs(latencyMs),
    firstAttemptAfterMs: roundMs(firstAttemptAfterMs),
    attempts: outcomes.length,
    refused: count('refused'),
    timedOut: count('timeout'),
    otherErrors,
  };
}

// ---- E9: the prober runs first ---------------------------------------------------------------

/** Runs of attempts the prober keeps per address (the newest); a run is a stretch of one outcome. */
export const ATTEMPT_RUNS_KEPT = 256;

/**
 * A stretch of consecutive attempts with one outcome: SYNs dropped (each ending at the timeout),
 * refusals (kube-proxy's REJECT while a Service has no endpoint yet: thousands a second), other
 * errors, and the connect. Kept as runs because a second of refusals is ten thousand attempts.
 */
export interface AttemptRun {
  readonly outcome: 'timeout' | 'refused' | 'error' | 'connected';
  readonly count: number;
  /** Start of the run's first and last attempt (ms since the epoch). */
  readonly firstStartEpochMs: number;
  readonly lastStartEpochMs: number;
}

/** Appends an attempt to its runs (a new run when the outcome changes), keeping the newest `ATTEMPT_RUNS_KEPT`. */
export function addAttempt(runs: AttemptRun[], outcome: AttemptRun['outcome'], startEpochMs: number): void {
  const last = runs[runs.length - 1];
  if (last && last.outcome === outcome) {
    runs[runs.length - 1] = { ...last, count: last.count + 1, lastStartEpochMs: startEpochMs };
    return;
  }
  runs.push({ outcome, count: 1, firstStartEpochMs: startEpochMs, lastStartEpochMs: startEpochMs });
  if (runs.length > ATTEMPT_RUNS_KEPT) runs.shift();
}

/**
 * What the prober saw of one address it watched from before its Service existed. Times are
 * ms since the epoch on the node's realtime clock, the clock the runner stamps the Service's
 * acceptance with (the runner and the prober run on the cell's one node: one clock).
 */
export interface WatchedTarget {
  /** `host:port`. */
  readonly target: string;
  /** When the prober's first attempt at it started. */
  readonly probingSinceEpochMs: number;
  /** When the successful connect completed; null when it never did. */
  readonly connectedAtEpochMs: number | null;
  /** Attempts made, the successful one included (count). */
  readonly attempts: number;
  readonly refused: number;
  readonly timedOut: number;
  readonly otherErrors: Record<string, number>;
  /** The attempts as runs of one outcome, oldest first (the connect last). */
  readonly attemptRuns: AttemptRun[];
}

/** The prober's output in watch mode (E9): every address, probed until it connects or the prober gives up. */
export interface WatchProberOutput {
  readonly probe: 'service-prober';
  readonly mode: 'watch';
  readonly attemptTimeoutMs: number;
  readonly giveUpMs: number;
  readonly watched: WatchedTarget[];
}

/** Mean spacing of a run's attempts (ms); null for a run of one. */
function stepOf(run: AttemptRun): number | null {
  return run.count < 2 ? null : (run.lastStartEpochMs - run.firstStartEpochMs) / (run.count - 1);
}

/** Attempts of a run that started at or after `t`, and the first such start (spacing taken as even). */
function runAfter(run: AttemptRun, t: number): { count: number; first: number | null } {
  if (run.lastStartEpochMs < t) return { count: 0, first: null };
  if (run.firstStartEpochMs >= t) return { count: run.count, first: run.firstStartEpochMs };
  const step = stepOf(run) as number;
  const skipped = Math.ceil((t - run.firstStartEpochMs) / step);
  return { count: run.count - skipped, first: run.firstStartEpochMs + skipped * step };
}

/**
 * One E9 sample from a watched address and the moment the API accepted its Service (epoch ms,
 * same clock): latency from the acceptance to the connect, attempts since the acceptance, the
 * delay to the first of them, the sample's resolution, and the spacing of its timed-out attempts.
 */
export function sampleFromWatch(watched: WatchedTarget, acceptedAtEpochMs: number): ProbeSample {
  const runs = watched.attemptRuns;
  let after = 0;
  let firstAfter: number | null = null;
  for (const run of runs) {
    const part = runAfter(run, acceptedAtEpochMs);
    after += part.count;
    if (firstAfter === null && part.first !== null) firstAfter = part.first;
  }
  const connected = watched.connectedAtEpochMs !== null;
  const last = runs[runs.length - 1];
  const before = runs[runs.length - 2];
  const timeoutSteps = runs.filter((r) => r.outcome === 'timeout').flatMap((r) => stepOf(r) ?? []);
  return {
    target: watched.target,
    connected,
    latencyMs: connected ? roundMs((watched.connectedAtEpochMs as number) - acceptedAtEpochMs) : null,
    firstAttemptAfterMs: firstAfter === null ? 0 : roundMs(firstAfter - acceptedAtEpochMs),
    attempts: watched.attempts,
    // A connect whose attempt started a moment before the stamp (Date.now() has 1 ms steps) counts.
    attemptsAfterStart: Math.max(after, connected ? 1 : 0),
    resolutionMs:
      connected && last && before
        ? roundMs(last.firstStartEpochMs - before.lastStartEpochMs)
        : connected && last && last.count >= 2
          ? roundMs(stepOf(last) as number)
          : null,
    timeoutStepMs: timeoutSteps.length === 0 ? null : roundMs(Math.max(...timeoutSteps)),
    refused: watched.refused,
    timedOut: watched.timedOut,
    otherErrors: watched.otherErrors,
  };
}

/** The verdict on E9's method (see `methodCheck`). */
export interface MethodCheck {
  /** `datapath`: the samples time the datapath; `method`: they time something else (invalid). */
  readonly verdict: 'datapath' | 'method';
  readonly attemptTimeoutMs: number;
  /** Connected samples whose connect was the prober's very first attempt (count). */
  readonly firstAttemptConnects: number;
  /** Connected samples whose first attempt after the acceptance came later than one attempt (count). */
  readonly lateFirstAttempts: number;
  /** Samples that connected before their Service was accepted (count): the address answered for something else. */
  readonly connectedBeforeStart: number;
  /** Median spacing of the samples' timed-out attempts (ms): the method's resolution where no rule answers. */
  readonly medianStepMs: number | null;
  readonly reasons: string[];
}

/** Slack on "within one attempt": a loop turn and the timer's lateness (ms). */
export const ATTEMPT_SLACK_MS = 5;

/**
 * The quantization check re-derived for the prober-first method (docs/facts.md §N3, N5). A
 * correct sample lands on the prober's attempt grid: attempts that find no rule time out every
 * `attemptTimeoutMs`, so connects come in steps of the timeout after the first attempt that
 * followed the acceptance. Those steps are expected (they are the method's resolution), not
 * suspicious. What proves the method wrong:
 * - a connect on the prober's first attempt: the prober started after the datapath was
 *   programmed, so the sample timed the prober's start (a pod start), not the datapath;
 * - a first attempt after the acceptance later than one attempt: the prober was not probing
 *   when the Service was accepted;
 * - a connect before the acceptance: the address answered for another Service;
 * - steps between attempts much longer than the timeout (a 200 ms limit quantizes every sample
 *   to 200 ms, the manual study's symptom).
 */
export function methodCheck(samples: readonly ProbeSample[], attemptTimeoutMs: number): MethodCheck {
  if (!(attemptTimeoutMs > 0)) throw new Error(`attempt timeout must be > 0 ms, got ${attemptTimeoutMs}`);
  const connected = samples.filter((s) => s.latencyMs !== null);
  const bound = attemptTimeoutMs + ATTEMPT_SLACK_MS;
  const firstAttemptConnects = connected.filter((s) => s.attempts <= 1).length;
  const lateFirstAttempts = connected.filter((s) => s.firstAttemptAfterMs > bound).length;
  const connectedBeforeStart = connected.filter((s) => (s.latencyMs as number) < 0).length;
  const steps = connected
    .flatMap((s) => (s.timeoutStepMs == null ? [] : [s.timeoutStepMs]))
    .sort((a, b) => a - b);
  const medianStepMs = steps.length === 0 ? null : steps[Math.floor((steps.length - 1) / 2)];
  const reasons: string[] = [];
  if (firstAttemptConnects > 0) {
    reasons.push(
      `${firstAttemptConnects} of ${connected.length} samples connected on the prober's first attempt: the prober started after the Service was programmed, so the samples time the prober's start, not the datapath`,
    );
  }
  if (lateFirstAttempts > 0) {
    const worst = Math.max(...connected.map((s) => s.firstAttemptAfterMs));
    reasons.push(
      `${lateFirstAttempts} of ${connected.length} samples' first attempt came more than ${bound} ms after the Service was accepted (up to ${worst} ms): the prober was not probing when the Service was created`,
    );
  }
  if (connectedBeforeStart > 0) {
    reasons.push(
      `${connectedBeforeStart} of ${connected.length} addresses answered before their Service was accepted: another Service held the address`,
    );
  }
  if (medianStepMs !== null && medianStepMs > 1.5 * attemptTimeoutMs + ATTEMPT_SLACK_MS) {
    reasons.push(
      `the prober's attempts were ${medianStepMs} ms apart (median), not its ${attemptTimeoutMs} ms timeout: every sample is quantized to ${medianStepMs} ms`,
    );
  }
  return {
    verdict: reasons.length > 0 ? 'method' : 'datapath',
    attemptTimeoutMs,
    firstAttemptConnects,
    lateFirstAttempts,
    connectedBeforeStart,
    medianStepMs,
    reasons,
  };
}

/**
 * E9's prober result from the watch output and each address's acceptance (epoch ms; absent: its
 * Service was never created, so it is no sample).
 */
export function watchResult(
  output: WatchProberOutput,
  acceptedAtEpochMs: ReadonlyMap<string, number>,
): ServiceProberResult {
  const samples = output.watched.flatMap((w) => {
    const accepted = acceptedAtEpochMs.get(w.target);
    return accepted === undefined ? [] : [sampleFromWatch(w, accepted)];
  });
  return proberResult(output.attemptTimeoutMs, output.giveUpMs, samples);
}

/** The result of the quantization check (see `quantizationCheck`). */
export interface QuantizationCheck {
  /** `clustered`: the samples sit on multiples of the step (a measurement artifact). */
  readonly verdict: 'clustered' | 'not-clustered' | 'too-few';
  /** The attempt timeout the samples were checked against (ms). */
  readonly stepMs: number;
  /** Samples at least half a step long, the ones that can show the artifact (count). */
  readonly considered: number;
  /** Of those, samples within `toleranceMs` of a non-zero multiple of the step (count). */
  readonly onMultiples: number;
  readonly toleranceMs: number;
  /** Chance of so many samples on multiples if the latencies were unrelated to the step. */
  readonly onMultiplesP: number;
  /**
   * Rayleigh test of the samples' phases (value mod step): the chance of phases this concentrated
   * if they were uniform. Null when the samples spread less than half a step (standard
   * deviation), where concentrated phases prove nothing.
   */
  readonly phaseP: number | null;
  readonly reason: string;
}

export interface QuantizationOptions {
  /** Distance from a multiple that counts as "on" it (ms). @default stepMs / 10 */
  readonly toleranceMs?: number;
  /** Fewer considered samples than this give `too-few`. @default 5 */
  readonly minSamples?: number;
  /** Significance level of both tests. @default 0.01 */
  readonly alpha?: number;
}

/** P(X >= k) for X ~ Binomial(n, p). */
export function binomialTail(n: number, k: number, p: number): number {
  if (k <= 0 || p >= 1) return 1;
  if (p <= 0) return 0;
  let term = (1 - p) ** n; // P(X = 0)
  let tail = 0;
  for (let i = 1; i <= n; i++) {
    term *= ((n - i + 1) / i) * (p / (1 - p));
    if (i >= k) tail += term;
  }
  return Math.min(1, tail);
}

/** Rayleigh test p-value for n angles with resultant length rn (Zar, Biostatistical Analysis, eq. 27.4). */
export function rayleighP(n: number, rn: number): number {
  return Math.min(1, Math.exp(Math.sqrt(1 + 4 * n + 4 * (n * n - rn * rn)) - (1 + 2 * n)));
}

/**
 * Do latencies cluster on multiples of the prober's attempt timeout? A prober that quantizes
 * (docs/facts.md §N3, "Prober resolution") produces values at k x step (+ a constant); genuine
 * programming latencies have no relation to the step. Two tests, either one flags the run:
 * - many samples within `toleranceMs` of a multiple (k >= 1), against the binomial chance
 *   2 x tolerance / step for unrelated values;
 * - the phases (value mod step) concentrated anywhere on the circle (a constant offset such as
 *   a round trip), by the Rayleigh test, when the samples spread enough for phases to mean
 *   something.
 * A genuine, tight cluster of latencies that happens to sit on a multiple cannot be told from the
 * artifact; it is reported as clustered.
 */
export function quantizationCheck(
  samplesMs: readonly number[],
  stepMs: number,
  options: QuantizationOptions = {},
): QuantizationCheck {
  if (!(stepMs > 0)) throw new Error(`quantization step must be > 0 ms, got ${stepMs}`);
  const toleranceMs = options.toleranceMs ?? stepMs / 10;
  const minSamples = options.minSamples ?? 5;
  const alpha = options.alpha ?? 0.01;
  const considered = samplesMs.filter((value) => value >= stepMs / 2);
  const distance = (value: number) => {
    const phase = value % stepMs;
    return Math.min(phase, stepMs - phase);
  };
  const onMultiples = considered.filter((value) => distance(value) <= toleranceMs).length;
  const base = { stepMs, considered: considered.length, onMultiples, toleranceMs };
  if (considered.length < minSamples) {
    return {
      ...base,
      verdict: 'too-few',
      onMultiplesP: 1,
      phaseP: null,
      reason: `${considered.length} samples of at least ${stepMs / 2} ms; the check needs ${minSamples}`,
    };
  }
  const n = considered.length;
  const onMultiplesP = binomialTail(n, onMultiples, Math.min(1, (2 * toleranceMs) / stepMs));
  const mean = considered.reduce((sum, value) => sum + value, 0) / n;
  const sd = Math.sqrt(considered.reduce((sum, value) => sum + (value - mean) ** 2, 0) / n);
  let phaseP: number | null = null;
  if (sd >= stepMs / 2) {
    const angles = considered.map((value) => (2 * Math.PI * (value % stepMs)) / stepMs);
    const rn = Math.hypot(
      angles.reduce((sum, angle) => sum + Math.cos(angle), 0),
      angles.reduce((sum, angle) => sum + Math.sin(angle), 0),
    );
    phaseP = rayleighP(n, rn);
  }
  const reasons: string[] = [];
  if (onMultiplesP < alpha) {
    reasons.push(`${onMultiples} of ${n} samples within ${toleranceMs} ms of a multiple of ${stepMs} ms`);
  }
  if (phaseP !== null && phaseP < alpha) {
    reasons.push(
      `the samples' phases modulo ${stepMs} ms are concentrated (Rayleigh p = ${phaseP.toPrecision(2)})`,
    );
  }
  return {
    ...base,
    verdict: reasons.length > 0 ? 'clustered' : 'not-clustered',
    onMultiplesP,
    phaseP,
    reason: reasons.length > 0 ? reasons.join('; ') : `no clustering on multiples of ${stepMs} ms`,
  };
}

/** The service prober's JSON result (experiment E9). Times in ms. */
export interface ServiceProberResult {
  readonly probe: 'service-prober';
  /** Each attempt's limit (ms). */
  readonly attemptTimeoutMs: number;
  /** A sample that has not connected after this long is given up (ms). */
  readonly giveUpMs: number;
  readonly samples: ProbeSample[];
  /** Samples that connected / were given up (counts). */
  readonly connected: number;
  readonly failed: number;
  /** Latencies of the connected samples (ms): p50Ms is the median, p90Ms the spec's p90. */
  readonly latency: MsDistribution | null;
  /**
   * Whether those latencies cluster on multiples of `attemptTimeoutMs`: a prober that times
   * from its own start. Shown, not judged for E9, whose samples start at the acceptance.
   */
  readonly quantization: QuantizationCheck;
  /**
   * E9's method check (`methodCheck`): the verdict the study judges by. Absent in results of a
   * runner that created the Services before starting the prober (before the prober-first method).
   */
  readonly method?: MethodCheck;
}

export function proberResult(
  attemptTimeoutMs: number,
  giveUpMs: number,
  samples: ProbeSample[],
): ServiceProberResult {
  const latencies = samples.flatMap((sample) => (sample.latencyMs === null ? [] : [sample.latencyMs]));
  return {
    probe: 'service-prober',
    attemptTimeoutMs,
    giveUpMs,
    samples,
    connected: latencies.length,
    failed: samples.length - latencies.length,
    latency: msDistribution(latencies),
    quantization: quantizationCheck(latencies, attemptTimeoutMs),
    method: methodCheck(samples, attemptTimeoutMs),
  };
}
