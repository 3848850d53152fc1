import { counterDeltas } from '../study/metrics.ts';
import type { StudyRun } from '../study/plan.ts';
import { preciseScorerWarnings } from '../study/precise-evidence.ts';
import type { ClientRecord, PreflightRecord, ReplicaRecord, RunRecord } from '../study/results.ts';
import { armById, frontEnd, replicaSetName } from '../study/topology.ts';
import {
  noMetricsStop,
  promptEvidenceSource,
  type ReplicaScrapes,
  type ResultFileReading,
  readResultFile,
  replicaRestarted,
  replicaRestartReasons,
  resetRecords,
  runReasons,
} from '../study/validity.ts';
import type { Evidence } from './evidence.ts';
import type { JobLifecycle, SaveClientLog } from './jobs.ts';
import { clientLogPath, clientResultPath } from './layout.ts';
import { buildRecord, type RunExtras, type StudyRecords } from './records.ts';
import type { Resets } from './resets.ts';
import type { RunnerContext } from './runner-context.ts';
import { type Opening, type Staged, type Stager, stagingRecord } from './stager.ts';
import { asCleanup } from './stop-signal.ts';
import { StudyStopError } from './study-stop.ts';

/**
 * One attempt of one run, from the readiness wait to its record (docs/runner.md, "One run"). It
 * says when the attempt's invalid record has a cause that may pass (`retryBecause`), for the
 * scheduler to try the run again.
 */

/** What an attempt ended with. */
export interface AttemptResult {
  readonly record: RunRecord;
  /** A cause that may pass (a replica restarted, a one-off Job failure, a failed scrape): try again. */
  readonly retryBecause?: string;
}

/** The parts the pipeline drives. */
export interface PipelineParts {
  readonly ctx: RunnerContext;
  readonly records: StudyRecords;
  readonly resets: Resets;
  readonly jobs: JobLifecycle;
  readonly evidence: Evidence;
  readonly stager: Stager;
  /** Sets the phase status.json and the progress line show for a run. */
  readonly phase: (run: StudyRun, phase: string) => Promise<void>;
  /** Stages the run after this one while this one's load runs. */
  readonly stageNext: (run: StudyRun) => Promise<void>;
}

/** The cause of a retry when a replica restarted during the attempt (kept in records). */
export const REPLICA_RESTART_CAUSE = 'a replica restarted during the run';

export class RunPipeline {
  constructor(private readonly p: PipelineParts) {}

  /** One attempt; its client files go to `attempts/<run-id>/<attempt>/` (write-once). */
  async attempt(run: StudyRun, attempt: number): Promise<AttemptResult> {
    // Clients started behind closed gates during the run before (lib/study/staging.ts): they
    // send nothing until their gates open, after this run's reset.
    const staged = this.p.stager.take(run.id);
    const gates: { opening?: Opening } = {};
    try {
      return await this.measure(run, attempt, staged, gates);
    } finally {
      // Nothing staged outlives its run: gates that opened are closed, clients that never went
      // are deleted (a fallback already removed its own); also when the runner was told to stop.
      await asCleanup(this.p.ctx.deps.stop, async () => {
        if (staged && gates.opening && 'openedAt' in gates.opening) await this.p.stager.closeGates(staged);
        else if (staged && !gates.opening) await this.p.stager.drop(staged);
      });
    }
  }

  private async measure(
    run: StudyRun,
    attempt: number,
    staged: Staged | undefined,
    gates: { opening?: Opening },
  ): Promise<AttemptResult> {
    const { ctx, resets, jobs: lifecycle, evidence, phase } = this.p;
    const { clock, store } = ctx.deps;
    const { config, options } = ctx;
    const startedAt = clock.now();
    const files = this.p.records.studyFiles;
    const saveLog: SaveClientLog = async (benchmarkId, log) => {
      await files.saveAttemptFile(run.id, attempt, clientLogPath(benchmarkId), log);
    };
    const record = (
      reset: RunRecord['reset'],
      clients: ClientRecord[],
      replicas: ReplicaRecord[],
      reasons: string[],
      extra: RunExtras = {},
    ) => buildRecord(clock, run, startedAt, reset, clients, replicas, reasons, extra);

    const servers = run.reset.prefixCaches;
    const pair = run.reset.pair ?? 0;
    const allUrls = options.replicaUrls(servers, pair);
    // A bound run owns one replica; the bound runs beside it own the others.
    const indices = run.reset.replicas ?? allUrls.map((_, i) => i);
    const urls = indices.map((i) => allUrls[i]);
    const pods = indices.map((i) => `${replicaSetName(config, servers, pair)}-${i}`);
    const jobs = run.benchmarks.map((spec) => ({ spec, job: ctx.deps.jobManifest(spec) }));

    // Lab-spec 4.4: a Job of an earlier attempt of this run and its pods are gone before anything
    // else happens, so their requests cannot warm the caches reset below. A staged client is
    // this attempt's, still waiting at its closed gate.
    await phase(run, 'clearing earlier attempts');
    for (const { spec, job } of jobs) {
      if (!staged) await lifecycle.deletePreviousJob(job.metadata.name);
      await store.removeClientResult(spec.id, spec.resultFile);
    }

    // A replica that restarted (or a front end that crashed) since the last run is waited for,
    // bounded, instead of turning this run and every later one invalid within seconds.
    const arm = run.arm ? armById(config, run.arm) : undefined;
    await phase(run, 'waiting until ready');
    await resets.waitForReplicas(servers, pair, options.readyTimeoutMs);
    const frontEndDown = arm ? await resets.waitForFrontEnd(arm, pair) : undefined;
    if (frontEndDown) return { record: record('endpoint', [], [], [`not started: ${frontEndDown}`]) };

    // The preflights ran before the study's first run; the arm's first run in this process
    // keeps its record.
    let preflight: PreflightRecord | undefined;
    if (arm) {
      const { outcome, keep } = await evidence.preflightFor(arm, pair);
      if (keep) preflight = outcome;
      if (!outcome.ok) {
        return {
          record: record('endpoint', [], [], [`not started: preflight failed: ${outcome.detail}`], {
            preflight: outcome,
          }),
        };
      }
    }

    await phase(run, 'resetting prefix caches');
    const resetsDone = (await resets.resetCaches(servers, pair, urls, pods)).map((r) => ({
      ...r,
      replica: indices[r.replica],
    }));
    const preconditions = resetsDone
      .filter((r) => r.verifiedBy === 'unverified')
      .map((r) => `replica ${r.pod}: prefix cache reset not verified: ${r.detail}`);

    if (run.reset.restartFrontEndOf && preconditions.length === 0) {
      // A front end restarted during the run before (staging) has served nothing since.
      const early = staged?.restarted?.deployments;
      await phase(run, early ? 'waiting for the front end restarted early' : 'restarting front end');
      const deployments =
        early ?? frontEnd(config, armById(config, run.reset.restartFrontEndOf), pair).restartDeployments;
      // One `at` per restart: a retried patch sets the same annotation, so it rolls once.
      const at = clock.now();
      if (!early) for (const name of deployments) await ctx.cluster.restartDeployment(name, at);
      for (const name of deployments) {
        const problem = await resets.waitForRollout(name);
        if (problem) preconditions.push(problem);
      }
    }

    const reset: RunRecord['reset'] = resetsDone.some((r) => r.method === 'pod-restart')
      ? 'pod-restart'
      : 'endpoint';
    let extra: RunExtras = {
      resets: resetRecords(resetsDone),
      ...(preflight ? { preflight } : {}),
      ...(staged ? { staging: stagingRecord(staged, undefined) } : {}),
    };
    if (preconditions.length > 0) {
      // The run cannot measure anything: its Job is not started, so it loads no replica.
      return { record: record(reset, [], [], [...preconditions.map((p) => `not started: ${p}`)], extra) };
    }

    await phase(run, 'scraping metrics');
    const uidsBefore = await resets.podUids(servers, pair);
    const before = await evidence.scrape(urls);
    const blind = noMetricsStop(pods.map((pod, i) => ({ pod, ...before[i] })));
    if (blind) throw new StudyStopError(blind);
    const unread = before.flatMap((s, i) =>
      s.error !== undefined ? [`replica ${pods[i]}: ${s.error}`] : [],
    );
    if (unread.length > 0) {
      // Without a baseline the run measures nothing: its load is not started (it would only warm
      // the caches), and the next attempt starts from a fresh reset.
      return {
        record: record(
          reset,
          [],
          [],
          unread.map((u) => `not started: /metrics could not be read before the run: ${u}`),
          extra,
        ),
        retryBecause: 'a replica’s /metrics could not be read before the run',
      };
    }

    // Told to stop (SIGTERM): no client starts loading the replicas.
    ctx.deps.stop?.throwIfRequested();
    // The EPP's log is read from here on: what it logged for this run's load, not for earlier ones.
    const loadFrom = clock.now();
    if (staged) {
      await phase(run, 'opening the gates of the staged clients');
      gates.opening = await this.p.stager.open(staged);
      extra = { ...extra, staging: stagingRecord(staged, gates.opening) };
    }
    if (!gates.opening || 'fellBack' in gates.opening) {
      await phase(run, 'starting job');
      for (const { job } of jobs) await ctx.cluster.createJob(job);
    }
    // While this run's load runs, the next run's clients start behind closed gates.
    await this.p.stageNext(run);

    await phase(run, 'waiting for job');
    const outcomes = await lifecycle.waitForJobs(
      jobs.map(({ spec, job }) => ({ benchmarkId: spec.id, name: job.metadata.name })),
      saveLog,
    );

    await phase(run, 'reading results');
    const readings: ResultFileReading[] = [];
    const clients: ClientRecord[] = [];
    for (const { spec, job } of jobs) {
      const text = await store.readClientResult(spec.id, spec.resultFile);
      if (text !== undefined) {
        // The study folder keeps the client's JSON, write-once per attempt; the Job's output
        // folder is only its scratch.
        await files.saveAttemptFile(run.id, attempt, clientResultPath(spec.id, spec.resultFile), text);
        await store.removeClientResult(spec.id, spec.resultFile);
      }
      const reading = { benchmarkId: spec.id, resultFile: spec.resultFile, text };
      readings.push(reading);
      const read = readResultFile(reading);
      clients.push({
        benchmarkId: spec.id,
        resultFile: spec.resultFile,
        prompts: spec.prompts,
        job: outcomes.get(job.metadata.name) ?? 'timed-out',
        ...('result' in read ? { result: read.result } : {}),
      });
      await lifecycle.saveClientLog(spec.id, job.metadata.name, saveLog);
    }

    await phase(run, 'scraping metrics');
    const after = await evidence.scrape(urls);
    const uidsAfter = await resets.podUids(servers, pair);
    const restarts = uidsBefore && uidsAfter ? replicaRestartReasons(pods, uidsBefore, uidsAfter) : [];
    const scrapes: ReplicaScrapes[] = pods.map((pod, i) => ({
      replica: indices[i],
      pod,
      ...(before[i].snapshot ? { before: before[i].snapshot } : { beforeError: before[i].error }),
      ...(after[i].snapshot ? { after: after[i].snapshot } : { afterError: after[i].error }),
    }));
    const replicas: ReplicaRecord[] = scrapes.map((s) => {
      const deltas = s.before && s.after ? counterDeltas(s.before, s.after) : undefined;
      return {
        replica: s.replica,
        pod: s.pod,
        requests: deltas?.requests ?? 0,
        queriedTokens: deltas?.queriedTokens ?? 0,
        hitTokens: deltas?.hitTokens ?? 0,
        hitRate: deltas?.hitRate ?? null,
        vllmSeries: s.after?.vllmSeries ?? 0,
      };
    });

    const source = arm ? promptEvidenceSource(arm.frontEnd, arm.api, run.dataset) : undefined;
    const seen = arm && source ? await evidence.promptEvidenceOf(arm, pair, source) : undefined;
    // llm-d: index counters above zero do not show that a look-up ever found blocks; its log does.
    const scorer =
      arm && source === 'llmd-kv-index' ? await evidence.scorerEvidenceOf(arm, pair, loadFrom) : undefined;
    const warnings = preciseScorerWarnings(scorer);
    for (const warning of warnings) await ctx.say(`${run.id}: warning: ${warning}`);
    const reasons = runReasons({
      run,
      readings,
      clients,
      resets: resetsDone,
      scrapes,
      replicas,
      ...(seen ? { promptEvidence: seen } : {}),
      ...(scorer ? { scorerEvidence: scorer } : {}),
    });
    reasons.push(...restarts);
    const done = record(reset, clients, replicas, reasons, {
      ...extra,
      ...(seen ? { promptEvidence: seen } : {}),
      ...(scorer ? { scorerEvidence: scorer } : {}),
      ...(warnings.length > 0 ? { warnings } : {}),
    });
    return { record: done, ...retryCause(done, after, seen?.detail) };
  }
}

/**
 * Why an invalid attempt is worth another one, when its cause may pass: a replica restarted
 * (a new uid, or counters that went backwards: a container restart keeps the uid), a replica's
 * /metrics could not be read after the run, a client Job failed once, the EPP's /metrics could
 * not be read. A run that measured something wrong (too few completions, a missing result file
 * of a Job that succeeded, an unseen prompt) is not retried: another attempt would measure the same.
 */
export function retryCause(
  record: RunRecord,
  after: readonly { readonly error?: string }[],
  evidenceDetail: string | undefined,
): { retryBecause?: string } {
  if (record.valid) return {};
  if (
    replicaRestarted(record) ||
    record.invalidReasons.some((r) => r.includes('went backwards')) ||
    after.some((s) => s.error !== undefined)
  )
    return { retryBecause: REPLICA_RESTART_CAUSE };
  if (record.clients.some((c) => c.job === 'failed')) return { retryBecause: 'a client Job failed' };
  if (evidenceDetail?.includes('could not be read'))
    return { retryBecause: 'the Endpoint Picker’s /metrics could not be read after the run' };
  return {};
}
