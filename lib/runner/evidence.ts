import type { Arm } from '../study/arms.ts';
import { eppSnapshot, type VllmSnapshot, vllmSnapshot } from '../study/metrics.ts';
import { pairSuffix } from '../study/pairs.ts';
import type { StudyRun } from '../study/plan.ts';
import {
  collectPreciseScorerEvidence,
  type PreciseScorerEvidence,
  SCORES_LINE_VERBOSITY,
} from '../study/precise-evidence.ts';
import { promptReader } from '../study/prompt-visibility.ts';
import type { PreflightRecord, PromptEvidence } from '../study/results.ts';
import { armById, EPP_CONTAINER, eppName, replicaSetName } from '../study/topology.ts';
import { type EppScrape, type PromptEvidenceSource, promptEvidence } from '../study/validity.ts';
import { backoffDelayMs, rethrowOutage, retryableStatus } from './call-policy.ts';
import { apiPath } from './http-front-ends.ts';
import { pollUntil } from './poll.ts';
import { statusProblems } from './preflight.ts';
import type { RunnerContext } from './runner-context.ts';
import { formatElapsed } from './status.ts';

/**
 * The evidence a run is judged on besides its clients' files: each arm's preflight, the
 * replicas' /metrics, and the EPP's proof that it saw the prompts.
 */

/** A replica's /metrics, or why it could not be read. */
export interface Scrape {
  readonly snapshot?: VllmSnapshot;
  readonly error?: string;
}

/** An arm's preflight is once per replica pair: each pair has its own front end. */
export function preflightKey(armId: string, pair: number): string {
  return `${armId}${pairSuffix(pair)}`;
}

/** A preflight that failed for a cause that may pass: an answer 429/5xx, no answer, an uncounted request. */
interface Outcome {
  readonly record: PreflightRecord;
  readonly transient: boolean;
}

/** Tries of a preflight whose failure may be transient (a 503 while an Envoy programs its upstream). */
export const PREFLIGHT_TRIES = 3;
/** The first wait between two tries of a preflight; each later one doubles (docs/runner.md quotes both). */
export const PREFLIGHT_FIRST_DELAY_MS = 5_000;

export class Evidence {
  /** Each arm's preflight (per replica pair), once per runner process, before the first run. */
  private readonly preflights = new Map<string, PreflightRecord>();
  /** Preflights already kept in a run record (the arm's first run in this process). */
  private readonly recorded = new Set<string>();

  constructor(private readonly ctx: RunnerContext) {}

  /** Whether the arm's preflight on a pair failed (its runs are not started, nor staged). */
  failed(armId: string, pair: number): boolean {
    return this.preflights.get(preflightKey(armId, pair))?.ok === false;
  }

  /**
   * Every arm's preflight, once per arm and replica pair, before the study's first run: a
   * preflight request then never lands in a front end that staging restarted early, and an arm
   * that cannot run is known within the study's first minutes.
   */
  async preflightArms(runs: readonly StudyRun[]): Promise<void> {
    for (const run of runs) {
      if (run.arm && !this.preflights.has(preflightKey(run.arm, run.reset.pair ?? 0)))
        await this.preflightOnce(armById(this.ctx.config, run.arm), run.reset.pair ?? 0);
    }
  }

  /**
   * The arm's preflight for a run: its outcome, and whether this run's record keeps it (the
   * arm's first run in this process).
   */
  async preflightFor(arm: Arm, pair: number): Promise<{ outcome: PreflightRecord; keep: boolean }> {
    const key = preflightKey(arm.id, pair);
    const outcome = this.preflights.get(key) ?? (await this.preflightOnce(arm, pair));
    const keep = !this.recorded.has(key);
    this.recorded.add(key);
    return { outcome, keep };
  }

  /** The preflight, tried again (with backoff) while its failure may be transient. */
  private async preflightOnce(arm: Arm, pair: number): Promise<PreflightRecord> {
    const key = preflightKey(arm.id, pair);
    let outcome = await this.preflight(arm, pair);
    for (let tries = 1; !outcome.record.ok && outcome.transient && tries < PREFLIGHT_TRIES; tries++) {
      const delay = backoffDelayMs(
        { ...this.ctx.options.retry, initialDelayMs: PREFLIGHT_FIRST_DELAY_MS },
        tries,
      );
      await this.ctx.say(
        `preflight of ${key} failed (${outcome.record.detail}); trying it again in ${formatElapsed(delay)}`,
      );
      await this.ctx.deps.clock.sleep(delay);
      outcome = await this.preflight(arm, pair);
    }
    this.preflights.set(key, outcome.record);
    await this.ctx.say(
      `preflight of ${key}: ${outcome.record.ok ? 'passed' : 'FAILED'}: ${outcome.record.detail}`,
    );
    return outcome.record;
  }

  /**
   * Before an arm's first run: the status conditions its path needs are True (the AI Gateway's
   * route and Gateway), and one tiny request through its front end reaches a replica of its
   * server set (a replica's `vllm:request_success_total` grows).
   */
  private async preflight(arm: Arm, pair: number): Promise<Outcome> {
    const { clock } = this.ctx.deps;
    const { cluster, options, config } = this.ctx;
    const problems: string[] = [];
    let unread = false;
    for (const check of options.statusChecks[arm.id] ?? []) {
      try {
        problems.push(...statusProblems(check, await cluster.resourceStatus(check)));
      } catch (error) {
        rethrowOutage(error);
        unread = true;
        problems.push(
          `${check.kind} ${check.namespace}/${check.name}: status not read: ${(error as Error).message}`,
        );
      }
    }
    if (problems.length > 0) return { record: { ok: false, detail: problems.join('; ') }, transient: unread };

    const set = replicaSetName(config, arm.servers, pair);
    const urls = options.replicaUrls(arm.servers, pair);
    const pods = urls.map((_, i) => `${set}-${i}`);
    const counts = async (): Promise<(number | undefined)[]> =>
      (await this.scrape(urls)).map((s) => s.snapshot?.requestSuccess);
    const before = await counts();
    const unreadPods = before.flatMap((n, i) => (n === undefined ? [pods[i]] : []));
    if (unreadPods.length > 0) {
      return {
        record: {
          ok: false,
          detail: `vllm:request_success_total of ${unreadPods.join(', ')} could not be read`,
        },
        transient: true,
      };
    }
    const base = options.frontEndUrl(arm, pair);
    const target = `POST ${base.replace(/\/+$/, '')}${apiPath(arm.api)}`;
    try {
      const answer = await this.ctx.deps.frontEnds.complete(base, arm.api, config.model.servedName);
      if (answer.status !== 200) {
        return {
          record: { ok: false, detail: `${target} answered HTTP ${answer.status}: ${answer.body.trim()}` },
          transient: retryableStatus(answer.status),
        };
      }
    } catch (error) {
      return { record: { ok: false, detail: `${target}: ${(error as Error).message}` }, transient: true };
    }
    const outcome = await pollUntil<string[]>(
      async () => {
        const now = await counts();
        const grew = now.flatMap((n, i) => (n !== undefined && n > (before[i] as number) ? [pods[i]] : []));
        return grew.length > 0 ? { done: grew } : { waiting: 'a counted request' };
      },
      { clock, timeoutMs: options.confirmTimeoutMs, intervalMs: Math.min(options.pollIntervalMs, 1_000) },
    );
    if ('done' in outcome) {
      return {
        record: { ok: true, detail: `${target} answered 200 and ${outcome.done.join(', ')} counted it` },
        transient: false,
      };
    }
    return {
      record: {
        ok: false,
        detail: `${target} answered 200, but no replica of ${set} counted a finished request within ${formatElapsed(options.confirmTimeoutMs)}`,
      },
      transient: true,
    };
  }

  /** Reads the arm's EPP metrics after a run and judges whether it saw the prompts. */
  async promptEvidenceOf(arm: Arm, pair: number, source: PromptEvidenceSource): Promise<PromptEvidence> {
    let scrape: EppScrape;
    try {
      scrape = {
        snapshot: eppSnapshot(
          await this.ctx.endpointPickers.metrics(this.ctx.options.eppMetricsUrl(arm, pair)),
        ),
      };
    } catch (error) {
      scrape = { error: (error as Error).message };
    }
    const reader = promptReader(this.ctx.config, arm.frontEnd);
    const component = reader ? `${reader.component} ${reader.version}` : arm.frontEnd;
    return promptEvidence(source, component, scrape);
  }

  /**
   * llm-d's proof that its precise scorer matched: the "Got pod scores" lines its EPP logged since
   * the run's load started (docs/facts.md §3.7), from every pod of the EPP Deployment. A log that
   * cannot be read leaves the evidence not observable, never matched.
   */
  async scorerEvidenceOf(arm: Arm, pair: number, since: Date): Promise<PreciseScorerEvidence> {
    const { cluster } = this.ctx;
    const name = eppName(this.ctx.config, arm.frontEndId, pair);
    try {
      return await collectPreciseScorerEvidence(
        {
          readEppLog: async (sinceIso) => {
            const pods = await cluster.listPods(`app=${name}`);
            if (pods.length === 0) throw new Error(`no pod labelled app=${name}`);
            const logs = await Promise.all(
              pods.map((pod) => cluster.podLog(pod.name, EPP_CONTAINER, new Date(sinceIso))),
            );
            return logs.join('\n');
          },
        },
        since.toISOString(),
      );
    } catch (error) {
      rethrowOutage(error);
      return {
        lookups: 0,
        lookupsWithBlocks: 0,
        podsWithBlocks: {},
        verdict: 'not-observable',
        message: `the log of ${name} (container ${EPP_CONTAINER}) could not be read: ${(error as Error).message}; its "Got pod scores" lines (--v ${SCORES_LINE_VERBOSITY}) are the evidence`,
      };
    }
  }

  /** Each replica's /metrics (through the policy's retries), or why it could not be read. */
  async scrape(urls: readonly string[]): Promise<Scrape[]> {
    return Promise.all(
      urls.map(async (url) => {
        try {
          return { snapshot: vllmSnapshot(await this.ctx.replicas.metrics(url)) };
        } catch (error) {
          return { error: (error as Error).message };
        }
      }),
    );
  }
}
