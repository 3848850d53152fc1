import { gateSelector } from '../../charts/gate-service.ts';
import { COMPONENT_LABEL, labLabels } from '../../charts/labels.ts';
import type { JobOutcome } from '../study/results.ts';
import { jobOutcome } from '../study/validity.ts';
import { rethrowOutage } from './call-policy.ts';
import { type PollCheck, type PollOptions, pollUntil } from './poll.ts';
import { type RunnerContext, waitOptions } from './runner-context.ts';
import { formatElapsed } from './status.ts';

/**
 * The lifecycle of the benchmark Jobs and the gates: clearing the lab namespace when a runner
 * starts, deleting a Job and waiting until its pods are gone, and waiting for a run's Jobs to end.
 */

/** Every benchmark client's Job, of any study (charts/benchmark-job.ts labels them so). */
export const BENCHMARK_JOBS_SELECTOR = [
  ...Object.entries(labLabels()).map(([k, v]) => `${k}=${v}`),
  `${COMPONENT_LABEL}=benchmark`,
].join(',');

/** Where a client's pod log is kept, for the Job waits to save it (the attempt's files). */
export type SaveClientLog = (benchmarkId: string, log: string) => Promise<void>;

/** A run's client Job, by benchmark id. */
export interface ClientJob {
  readonly benchmarkId: string;
  readonly name: string;
}

/** A Job an earlier runner left, and how to delete it and see it gone (either lab's API). */
export interface LeftoverJob {
  /** `job/<name>`'s name, as the log names it (the network lab adds its namespace). */
  readonly name: string;
  /** Why it is deleted, for the log: `a client an earlier runner left`. */
  readonly why: string;
  delete(): Promise<void>;
  /** Whether the Job or any of its pods still exists. */
  remains(): Promise<boolean>;
}

/**
 * Both labs' runners, when they start, before any measurement: every Job an earlier runner left
 * (killed mid-step, or an older study's after `lab run --new`) is deleted, then `afterDelete`
 * runs (the first lab's gates), and the runner waits until each Job and its pods are gone, so no
 * leftover load or probe reaches the first measurement.
 */
export async function clearLeftoverJobs(
  jobs: readonly LeftoverJob[],
  how: {
    readonly say: (line: string) => Promise<void>;
    readonly afterDelete?: () => Promise<void>;
    readonly poll: Omit<PollOptions, 'onWait' | 'announce'>;
  },
): Promise<void> {
  for (const job of jobs) {
    await how.say(`deleting job/${job.name}, ${job.why}`);
    await job.delete();
  }
  await how.afterDelete?.();
  for (const job of jobs) await waitUntilJobGone(job.name, () => job.remains(), how.poll);
}

/** Waits until a deleted Job and its pods are gone; throws naming it when they outlive the timeout. */
export async function waitUntilJobGone(
  name: string,
  remains: () => Promise<boolean>,
  poll: PollOptions,
): Promise<void> {
  const outcome = await pollUntil<true>(
    async () => ((await remains()) ? { waiting: `job/${name} and its pods` } : { done: true }),
    poll,
  );
  if ('timedOut' in outcome)
    throw new Error(
      `job/${name} and its pods were not gone within ${formatElapsed(poll.timeoutMs)} of its deletion`,
    );
}

export class JobLifecycle {
  constructor(private readonly ctx: RunnerContext) {}

  /**
   * Before any preflight or reset: every benchmark Job of the lab namespace (a killed runner's,
   * an older study's after `lab run --new`) and every gate is deleted, and the runner waits until
   * the Jobs' pods are gone, so no leftover client loads a replica or answers for a front end.
   * `stopped` says whose clients they are when the runner clears its own on a signal.
   */
  async clearLab(stopped?: string): Promise<void> {
    const { cluster, options } = this.ctx;
    const jobs = await cluster.listJobNames(BENCHMARK_JOBS_SELECTOR);
    const whose = stopped ? `of ${stopped}` : 'an earlier runner left';
    await clearLeftoverJobs(
      jobs.map((name) => ({
        name,
        why: `a client ${whose}`,
        delete: () => cluster.deleteJob(name),
        remains: () => this.remains(name),
      })),
      {
        say: (line) => this.ctx.say(line),
        afterDelete: async () => {
          for (const name of await cluster.listServiceNames(gateSelector())) {
            await this.ctx.say(`deleting service/${name}, a gate ${whose}`);
            await cluster.deleteService(name);
          }
        },
        poll: {
          clock: this.ctx.deps.clock,
          timeoutMs: options.rolloutTimeoutMs,
          intervalMs: options.pollIntervalMs,
        },
      },
    );
  }

  /** Deletes a previous Job of the same name and waits until it and its pods are gone. */
  async deletePreviousJob(name: string): Promise<void> {
    if (!(await this.ctx.cluster.getJob(name))) return;
    await this.ctx.say(`deleting the previous job/${name}`);
    await this.deleteJobAndWait(name);
  }

  /**
   * Deletes a Job (foreground propagation) and waits until it and its pods are gone, so none of
   * its pods sends requests into a later run. Throws when they outlive the rollout timeout.
   */
  async deleteJobAndWait(name: string): Promise<void> {
    await this.ctx.cluster.deleteJob(name);
    const { options } = this.ctx;
    await waitUntilJobGone(name, () => this.remains(name), {
      clock: this.ctx.deps.clock,
      timeoutMs: options.rolloutTimeoutMs,
      intervalMs: options.pollIntervalMs,
    });
  }

  /** Whether the Job or any of its pods still exists. */
  private async remains(name: string): Promise<boolean> {
    const { cluster } = this.ctx;
    return Boolean(await cluster.getJob(name)) || (await cluster.listPods(`job-name=${name}`)).length > 0;
  }

  /**
   * Polls the Jobs until each has succeeded or failed (status counts, docs/facts.md §4.4); a failed
   * Job counts as finished at the first poll that sees it. Jobs still running at the timeout are
   * recorded as timed out, their client log is saved, and they are deleted and waited for until
   * they and their pods are gone, so they stop loading the replicas before anything else happens.
   * A Job whose pod no node can take (`unschedulable`) is deleted as soon as that has lasted
   * `unschedulableTimeoutMs`, with the scheduler's message as its client log.
   */
  async waitForJobs(jobs: readonly ClientJob[], saveLog: SaveClientLog): Promise<Map<string, JobOutcome>> {
    const { clock } = this.ctx.deps;
    const { cluster, options } = this.ctx;
    const outcomes = new Map<string, JobOutcome>();
    const pending = new Map<string, number>();
    let podsCheckedAt = Number.NEGATIVE_INFINITY;
    const check = async (): Promise<PollCheck<true>> => {
      for (const { name } of jobs) {
        if (outcomes.has(name)) continue;
        const status = await cluster.getJob(name);
        // A Job deleted under the runner cannot have succeeded.
        const outcome = status ? jobOutcome(status) : 'failed';
        if (outcome) {
          outcomes.set(name, outcome);
          if (outcome === 'failed') await this.ctx.say(`job/${name} failed (status.failed)`);
        }
      }
      // Pods less often than Jobs: a pod that no node can take is a matter of minutes.
      if (clock.now().getTime() - podsCheckedAt >= options.pollIntervalMs) {
        podsCheckedAt = clock.now().getTime();
        for (const job of jobs) {
          if (outcomes.has(job.name)) continue;
          if (await this.unschedulableFor(job, pending, saveLog)) outcomes.set(job.name, 'unschedulable');
        }
      }
      return outcomes.size === jobs.length ? { done: true } : { waiting: 'jobs' };
    };
    const waited = await pollUntil(
      check,
      waitOptions(this.ctx, options.jobTimeoutMs, { intervalMs: options.jobPollIntervalMs }),
    );
    if ('timedOut' in waited) {
      for (const { benchmarkId, name } of jobs) {
        if (outcomes.has(name)) continue;
        outcomes.set(name, 'timed-out');
        await this.ctx.say(
          `job/${name} did not finish within ${formatElapsed(options.jobTimeoutMs)}; deleting it`,
        );
        // Its pods are gone once it is deleted: keep the log of the run it did not finish.
        await this.saveClientLog(benchmarkId, name, saveLog);
        await this.deleteJobAndWait(name);
      }
    }
    return outcomes;
  }

  /**
   * Whether a Job's pod has stayed Unschedulable for `unschedulableTimeoutMs` (since the first
   * poll that saw it so, kept in `since`); then its Job is deleted, with the scheduler's message
   * kept as the client's log.
   */
  private async unschedulableFor(
    { benchmarkId, name }: ClientJob,
    since: Map<string, number>,
    saveLog: SaveClientLog,
  ): Promise<boolean> {
    const now = this.ctx.deps.clock.now().getTime();
    const stuck = (await this.ctx.cluster.listPods(`job-name=${name}`)).find((p) => p.unschedulable);
    if (!stuck?.unschedulable) {
      since.delete(name);
      return false;
    }
    const first = since.get(name) ?? now;
    since.set(name, first);
    if (now - first < this.ctx.options.unschedulableTimeoutMs) return false;
    const why = `pod ${stuck.name} of job/${name} was Unschedulable for ${formatElapsed(now - first)}: ${stuck.unschedulable}`;
    await this.ctx.say(`${why}; deleting the job`);
    await saveLog(benchmarkId, `${why}\n`);
    await this.deleteJobAndWait(name);
    return true;
  }

  /** Keeps the pod log of a client's Job, if it has pods; a failure is said, not thrown. */
  async saveClientLog(benchmarkId: string, jobName: string, saveLog: SaveClientLog): Promise<void> {
    try {
      const pods = await this.ctx.cluster.listPods(`job-name=${jobName}`);
      const logs = await Promise.all(pods.map((p) => this.ctx.cluster.podLog(p.name)));
      if (logs.length > 0) await saveLog(benchmarkId, logs.join('\n'));
    } catch (error) {
      rethrowOutage(error);
      await this.ctx.say(`could not save the log of job/${jobName}: ${(error as Error).message}`);
    }
  }
}
