import type { NetworkJobOutcome } from '../../network/study/model.ts';
import { CELL_LABEL, MESH_NAMESPACE, PLAIN_NAMESPACE } from '../../network/topology.ts';
import { jobOutcome } from '../../study/validity.ts';
import { rethrowOutage } from '../call-policy.ts';
import { clearLeftoverJobs, waitUntilJobGone } from '../jobs.ts';
import { type PollOptions, pollUntil } from '../poll.ts';
import type { JobObject } from '../ports.ts';
import { formatElapsed } from '../status.ts';
import { ciliumCommandJob, hostCommandJob, NETWORK_RUN_LABEL, OUTPUT_FILES } from './jobs.ts';
import { networkJobName } from './layout.ts';
import type { JobDriverPort, JobFiles, JobRun, StepContext } from './runner-context.ts';

/** The study's own Jobs (host facts, datapath evidence) keep their files under this run id. */
export const STUDY_STEP = 'study';

/**
 * Jobs from creation to deletion, host commands, and polling a condition (the runner's waits),
 * with the first lab's pieces: every wait is one `pollUntil` (poll.ts), every kept file goes
 * write-once into an attempt folder the runner claimed (file-store.ts), and a killed runner's
 * Jobs are cleared before the first measurement (`clearLeftoverJobs` of jobs.ts).
 */
export class JobDriver implements JobDriverPort {
  /** The attempt this runner claimed for each run (and for `study`), by run id. */
  private readonly attempts = new Map<string, number>();

  constructor(private readonly ctx: Omit<StepContext, 'jobs'>) {}

  /**
   * Claims a new attempt folder for a run this runner starts: a killed runner's attempt keeps its
   * files, and nothing this one keeps replaces them.
   */
  async beginAttempt(runId: string): Promise<number> {
    const attempt = await this.ctx.studyFiles().claimAttempt(runId, 1);
    this.attempts.set(runId, attempt);
    return attempt;
  }

  /**
   * Before any measurement: every network Job of this cell (a killed runner's prober, client or
   * host command, of this study or another) is deleted and waited out with its pods.
   */
  async clearCell(stopped?: string): Promise<void> {
    const { cluster, cell } = this.ctx;
    const selector = `${CELL_LABEL}=${cell.name},${NETWORK_RUN_LABEL}`;
    const namespaces = cell.mesh === 'none' ? [PLAIN_NAMESPACE] : [PLAIN_NAMESPACE, MESH_NAMESPACE];
    const leftovers = [];
    for (const namespace of namespaces) {
      for (const name of await cluster.listJobNames(namespace, selector)) {
        leftovers.push({
          name,
          why: stopped
            ? `a Job of ${stopped}, in ${namespace}`
            : `a Job an earlier runner left in ${namespace}`,
          delete: async () => {
            await cluster.deleteJob(namespace, name);
            await this.ctx.deps.store.removeJobOutput(name);
          },
          remains: () => this.remains(namespace, name),
        });
      }
    }
    await clearLeftoverJobs(leftovers, {
      say: (line) => this.ctx.say(line),
      poll: this.poll(this.ctx.options.readyTimeoutMs),
    });
  }

  /**
   * One Job from creation to deletion: an earlier Job of the same name and its output are removed
   * first, the Job is polled until its counts say succeeded or failed (or it times out and is
   * deleted), its pods' log and output file are kept in the run's attempt folder, then it is deleted.
   */
  async runJob(run: { readonly id: string } | undefined, job: JobObject, file: JobFiles): Promise<JobRun> {
    await this.startJob(run, job);
    return this.finishJob(run, job, file);
  }

  /** Creates a Job after removing an earlier one of its name and its output folder. */
  async startJob(run: { readonly id: string } | undefined, job: JobObject): Promise<void> {
    const { namespace, name } = job.metadata;
    await this.deleteJobAndWait(namespace, name);
    await this.ctx.deps.store.removeJobOutput(name);
    await this.ctx.say(`${run?.id ?? STUDY_STEP}: starting job/${name} in ${namespace}`);
    await this.ctx.cluster.createJob(job);
  }

  /**
   * Waits for a started Job to end, keeps its log and its output file (or files: a grouped Job
   * writes one per case), and deletes it (see runJob).
   */
  async finishJob(run: { readonly id: string } | undefined, job: JobObject, file: JobFiles): Promise<JobRun> {
    const { namespace, name } = job.metadata;
    const runId = run?.id ?? STUDY_STEP;
    const outcome = await this.waitForJob(namespace, name);
    const pods = await this.ctx.cluster.listPods(namespace, `job-name=${name}`);
    const logs: string[] = [];
    for (const pod of pods) {
      try {
        logs.push(await this.ctx.cluster.podLog(namespace, pod.name));
      } catch (error) {
        rethrowOutage(error);
        await this.ctx.say(`log of ${namespace}/${pod.name} not read: ${(error as Error).message}`);
      }
    }
    if (logs.length > 0) await this.keep(runId, `${name}.log`, logs.join('\n'));
    const names = typeof file === 'string' ? [file] : file;
    const files: Record<string, string | undefined> = {};
    for (const each of names) {
      const text = await this.ctx.deps.store.readJobOutput(name, each);
      files[each] = text;
      if (text !== undefined) await this.keep(runId, `${name}-${each}`, text);
    }
    await this.ctx.deps.store.removeJobOutput(name);
    await this.deleteJobAndWait(namespace, name);
    const missing = names.filter((each) => files[each] === undefined);
    await this.ctx.say(
      `${runId}: job/${name} ${outcome}${missing.length > 0 ? `, no ${missing.join(', ')}` : ''}`,
    );
    return { outcome, text: files[names[0]], files, pods };
  }

  /**
   * Keeps a file in the run's attempt folder, write-once. A Job run twice in one attempt (a
   * restore tried again) keeps its second files beside the first (`<name>.2.log`).
   */
  private async keep(runId: string, file: string, text: string): Promise<void> {
    const files = this.ctx.studyFiles();
    const attempt = this.attempts.get(runId) ?? (await this.beginAttempt(runId));
    if (await files.saveAttemptFile(runId, attempt, file, text)) return;
    const dot = file.lastIndexOf('.');
    const [stem, ext] = dot > 0 ? [file.slice(0, dot), file.slice(dot)] : [file, ''];
    for (let n = 2; ; n++)
      if (await files.saveAttemptFile(runId, attempt, `${stem}.${n}${ext}`, text)) return;
  }

  /** A host Job's output; throws naming the Job when it failed or wrote nothing. */
  async hostOutput(step: string, runId: string, script: string, cilium = false): Promise<string> {
    const name = networkJobName(step);
    const job = (cilium ? ciliumCommandJob : hostCommandJob)(this.ctx.deps.jobs, name, runId, script);
    const done = await this.runJob(runId === STUDY_STEP ? undefined : { id: runId }, job, OUTPUT_FILES.host);
    if (done.text === undefined) throw new Error(`job/${name} ${done.outcome} and wrote no output`);
    if (done.outcome !== 'succeeded') throw new Error(`job/${name} ${done.outcome}`);
    return done.text;
  }

  async waitForJob(namespace: string, name: string): Promise<NetworkJobOutcome> {
    const { jobTimeoutMs } = this.ctx.options;
    const waited = await pollUntil<NetworkJobOutcome>(async () => {
      const status = await this.ctx.cluster.getJob(namespace, name);
      // A Job deleted under the runner cannot have succeeded.
      const outcome = status ? jobOutcome(status) : 'failed';
      return outcome ? { done: outcome } : { waiting: `job/${name}` };
    }, this.poll(jobTimeoutMs));
    if ('done' in waited) return waited.done;
    await this.ctx.say(`job/${name} did not finish within ${formatElapsed(jobTimeoutMs)}; deleting it`);
    return 'timed-out';
  }

  /** Deletes a Job (foreground) and waits until it and its pods are gone. */
  async deleteJobAndWait(namespace: string, name: string): Promise<void> {
    if (!(await this.ctx.cluster.getJob(namespace, name))) return;
    await this.ctx.cluster.deleteJob(namespace, name);
    await waitUntilJobGone(name, () => this.remains(namespace, name), {
      clock: this.ctx.deps.clock,
      timeoutMs: this.ctx.options.readyTimeoutMs,
      intervalMs: this.ctx.options.pollIntervalMs,
    });
  }

  /** Whether a Job or any of its pods still exists. */
  private async remains(namespace: string, name: string): Promise<boolean> {
    const { cluster } = this.ctx;
    return (
      (await cluster.getJob(namespace, name)) !== undefined ||
      (await cluster.listPods(namespace, `job-name=${name}`)).length > 0
    );
  }

  /** Polls `check` until it reports nothing, within readyTimeoutMs; the last problem otherwise. */
  async waitFor(what: string, check: () => Promise<string | undefined>): Promise<string | undefined> {
    const { readyTimeoutMs } = this.ctx.options;
    await this.ctx.phase(`waiting for ${what}`);
    const waited = await pollUntil<true>(async () => {
      let problem: string | undefined;
      try {
        problem = await check();
      } catch (error) {
        // An API outage past its limit stops the study; any other failure is one more poll.
        rethrowOutage(error);
        problem = (error as Error).message;
      }
      return problem === undefined ? { done: true } : { waiting: problem };
    }, this.poll(readyTimeoutMs));
    if ('done' in waited) return undefined;
    return `${what} not reached within ${formatElapsed(readyTimeoutMs)}: ${waited.timedOut}`;
  }

  /** A wait of the runner: its clock and poll interval, status.json and a progress line while it waits. */
  poll(timeoutMs: number): PollOptions {
    return {
      clock: this.ctx.deps.clock,
      timeoutMs,
      intervalMs: this.ctx.options.pollIntervalMs,
      onWait: () => this.ctx.progress(),
    };
  }
}
