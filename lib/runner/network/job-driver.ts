import type { NetworkJobOutcome } from '../../network/study/model.ts';
import { jobOutcome } from '../../study/validity.ts';
import type { JobObject } from '../ports.ts';
import { formatElapsed } from '../status.ts';
import { ciliumCommandJob, hostCommandJob, OUTPUT_FILES } from './jobs.ts';
import { networkJobName } from './layout.ts';
import type { JobDriverPort, JobRun, StepContext } from './runner-context.ts';

/** Jobs from creation to deletion, host commands, and polling a condition (the runner's waits). */
export class JobDriver implements JobDriverPort {
  constructor(private readonly ctx: Omit<StepContext, 'jobs'>) {}

  /**
   * One Job from creation to deletion: an earlier Job of the same name and its output are removed
   * first, the Job is polled until its counts say succeeded or failed (or it times out and is
   * deleted), its pods' log and output file are kept in the study folder, then it is deleted.
   */
  async runJob(run: { readonly id: string } | undefined, job: JobObject, file: string): Promise<JobRun> {
    await this.startJob(run, job);
    return this.finishJob(run, job, file);
  }

  /** Creates a Job after removing an earlier one of its name and its output folder. */
  async startJob(run: { readonly id: string } | undefined, job: JobObject): Promise<void> {
    const { namespace, name } = job.metadata;
    await this.deleteJobAndWait(namespace, name);
    await this.ctx.deps.store.removeJobOutput(name);
    await this.ctx.say(`${run?.id ?? 'study'}: starting job/${name} in ${namespace}`);
    await this.ctx.cluster.createJob(job);
  }

  /** Waits for a started Job to end, keeps its log and `file`, and deletes it (see runJob). */
  async finishJob(run: { readonly id: string } | undefined, job: JobObject, file: string): Promise<JobRun> {
    const { namespace, name } = job.metadata;
    const runId = run?.id ?? 'study';
    const outcome = await this.waitForJob(namespace, name);
    const pods = await this.ctx.cluster.listPods(namespace, `job-name=${name}`);
    const logs: string[] = [];
    for (const pod of pods) {
      try {
        logs.push(await this.ctx.cluster.podLog(namespace, pod.name));
      } catch (error) {
        await this.ctx.say(`log of ${namespace}/${pod.name} not read: ${(error as Error).message}`);
      }
    }
    if (logs.length > 0) await this.ctx.studyFiles().saveOutput(runId, 1, `${name}.log`, logs.join('\n'));
    const text = await this.ctx.deps.store.readJobOutput(name, file);
    if (text !== undefined) await this.ctx.studyFiles().saveOutput(runId, 1, `${name}-${file}`, text);
    await this.ctx.deps.store.removeJobOutput(name);
    await this.deleteJobAndWait(namespace, name);
    await this.ctx.say(`${runId}: job/${name} ${outcome}${text === undefined ? `, no ${file}` : ''}`);
    return { outcome, text, pods };
  }

  /** A host Job's output; throws naming the Job when it failed or wrote nothing. */
  async hostOutput(step: string, runId: string, script: string, cilium = false): Promise<string> {
    const name = networkJobName(step);
    const job = (cilium ? ciliumCommandJob : hostCommandJob)(this.ctx.deps.jobs, name, runId, script);
    const done = await this.runJob(undefined, job, OUTPUT_FILES.host);
    if (done.text === undefined) throw new Error(`job/${name} ${done.outcome} and wrote no output`);
    if (done.outcome !== 'succeeded') throw new Error(`job/${name} ${done.outcome}`);
    return done.text;
  }

  async waitForJob(namespace: string, name: string): Promise<NetworkJobOutcome> {
    const { clock } = this.ctx.deps;
    const deadline = clock.now().getTime() + this.ctx.options.jobTimeoutMs;
    for (;;) {
      const status = await this.ctx.cluster.getJob(namespace, name);
      // A Job deleted under the runner cannot have succeeded.
      const outcome = status ? jobOutcome(status) : 'failed';
      if (outcome) return outcome;
      if (clock.now().getTime() >= deadline) {
        await this.ctx.say(
          `job/${name} did not finish within ${formatElapsed(this.ctx.options.jobTimeoutMs)}; deleting it`,
        );
        return 'timed-out';
      }
      await this.ctx.progress();
      await clock.sleep(this.ctx.options.pollIntervalMs);
    }
  }

  /** Deletes a Job (foreground) and waits until it and its pods are gone. */
  async deleteJobAndWait(namespace: string, name: string): Promise<void> {
    const { clock } = this.ctx.deps;
    if (!(await this.ctx.cluster.getJob(namespace, name))) return;
    await this.ctx.cluster.deleteJob(namespace, name);
    const deadline = clock.now().getTime() + this.ctx.options.readyTimeoutMs;
    while (
      (await this.ctx.cluster.getJob(namespace, name)) ||
      (await this.ctx.cluster.listPods(namespace, `job-name=${name}`)).length > 0
    ) {
      if (clock.now().getTime() >= deadline)
        throw new Error(
          `job/${name} and its pods were not gone within ${formatElapsed(this.ctx.options.readyTimeoutMs)} of its deletion`,
        );
      await clock.sleep(this.ctx.options.pollIntervalMs);
    }
  }

  /** Polls `check` until it reports nothing, within readyTimeoutMs; the last problem otherwise. */
  async waitFor(what: string, check: () => Promise<string | undefined>): Promise<string | undefined> {
    const { clock } = this.ctx.deps;
    const deadline = clock.now().getTime() + this.ctx.options.readyTimeoutMs;
    await this.ctx.phase(`waiting for ${what}`);
    for (;;) {
      let problem: string | undefined;
      try {
        problem = await check();
      } catch (error) {
        problem = (error as Error).message;
      }
      if (problem === undefined) return undefined;
      if (clock.now().getTime() >= deadline)
        return `${what} not reached within ${formatElapsed(this.ctx.options.readyTimeoutMs)}: ${problem}`;
      await this.ctx.progress();
      await clock.sleep(this.ctx.options.pollIntervalMs);
    }
  }
}
