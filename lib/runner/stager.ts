import { gateService } from '../../charts/gate-service.ts';
import type { LabConfig } from '../config/schema.ts';
import type { BenchmarkSpec, StudyRun } from '../study/plan.ts';
import type { StagingRecord } from '../study/results.ts';
import { gateServiceName, type StagedRun } from '../study/staging.ts';
import { armById, frontEnd } from '../study/topology.ts';
import { jobOutcome } from '../study/validity.ts';
import { rethrowOutage } from './call-policy.ts';
import type { Clock, Cluster, JobObject, RunnerDeps } from './ports.ts';

/**
 * The runner's side of staging (lib/study/staging.ts): it creates a run's clients behind closed
 * gates while the run before it runs, opens the gates when the run starts, and removes what it
 * made. Every call here is an API call without a wait, so staging never holds up the running
 * run; an early front-end restart is only issued here, and its rollout is waited for when the
 * staged run starts.
 */

export interface StagerContext {
  readonly config: LabConfig;
  /** The retrying cluster of the runner. */
  readonly cluster: Cluster;
  readonly clock: Clock;
  readonly jobManifest: RunnerDeps['jobManifest'];
  readonly say: (line: string) => Promise<void>;
  /** Deletes a Job and waits until it and its pods are gone. */
  readonly deleteJobAndWait: (name: string) => Promise<void>;
  /** `--ready-check-timeout-sec` of a staged client: the longest the runner may take to open its gate. */
  readonly readyCheckTimeoutSeconds: number;
}

/** One staged client: its Job, aimed at its gate, and the front end the gate opens to. */
export interface StagedClient {
  readonly spec: BenchmarkSpec;
  readonly job: JobObject;
  readonly gate: string;
  readonly frontEndService: string;
  readonly selector: Readonly<Record<string, string>>;
}

/** A run whose clients wait behind closed gates. */
export interface Staged {
  readonly runId: string;
  readonly during: string;
  readonly createdAt: Date;
  readonly clients: readonly StagedClient[];
  /** Deployments restarted during the earlier run, and when. */
  readonly restarted?: { readonly deployments: readonly string[]; readonly at: Date };
}

/** What opening a staged run's gates gave: the time they opened, or why the run fell back. */
export type Opening = { readonly openedAt: Date } | { readonly fellBack: string };

/**
 * Staged runs in a row whose clients ended before their gates opened, after which staging is off
 * for the rest of the study: once can be an evicted pod, every time is a client image that does
 * not wait at a closed gate.
 */
const FALLBACKS_BEFORE_OFF = 2;

export class Stager {
  private readonly staged = new Map<string, Staged>();
  /** Why staging is off for the rest of the study. */
  private offBecause: string | undefined;
  /** Staged runs in a row whose clients ended before their gates opened. */
  private endedEarly = 0;

  constructor(private readonly ctx: StagerContext) {}

  get off(): string | undefined {
    return this.offBecause;
  }

  /**
   * Stages `next` while `current` runs: a closed gate per client, the client aimed at it, and the
   * early front-end restart. Never throws: a failure removes what was made, says why, and the run
   * starts its clients when it starts.
   */
  async stage(current: StudyRun, next: StagedRun): Promise<void> {
    if (this.offBecause || this.staged.has(next.run.id)) return;
    const createdAt = this.ctx.clock.now();
    const clients: StagedClient[] = [];
    try {
      for (const spec of next.run.benchmarks) await this.stageClient(spec, clients);
      const restarted = next.restartEarly ? await this.restartEarly(next.run) : undefined;
      this.staged.set(next.run.id, {
        runId: next.run.id,
        during: current.id,
        createdAt,
        clients,
        ...(restarted ? { restarted } : {}),
      });
      await this.ctx.say(
        `${next.run.id}: ${clients.length} client(s) staged behind ${clients.map((c) => `service/${c.gate}`).join(', ')} while ${current.id} runs${restarted ? `; ${restarted.deployments.join(', ')} restarted` : ''}`,
      );
    } catch (error) {
      rethrowOutage(error);
      await this.ctx.say(
        `${next.run.id}: not staged (${(error as Error).message}); it starts its clients when it starts`,
      );
      await this.remove(clients, true);
    }
  }

  /** One client behind its gate; `made` gets it as soon as its gate exists, for the cleanup. */
  private async stageClient(spec: BenchmarkSpec, made: StagedClient[]): Promise<void> {
    const { config, cluster } = this.ctx;
    if (spec.target.kind !== 'arm') throw new Error(`client ${spec.id} aims at a replica, not a front end`);
    const fe = frontEnd(config, armById(config, spec.target.arm), spec.target.pair ?? 0);
    const feSpec = await cluster.getServiceSpec(fe.service);
    if (!feSpec) throw new Error(`service/${fe.service} does not exist`);
    const selector = feSpec.selector as Record<string, string> | undefined;
    if (!selector || Object.keys(selector).length === 0) {
      throw new Error(`service/${fe.service} has no selector, so a gate cannot open to its pods`);
    }
    const gate = gateServiceName(spec.id);
    const baseUrl = `http://${gate}.${config.namespace}.svc.cluster.local:${fe.port}`;
    const job = this.ctx.jobManifest(spec, {
      baseUrl,
      readyCheckTimeoutSeconds: this.ctx.readyCheckTimeoutSeconds,
    });
    // A client that would go straight to its front end would load the running run's replicas.
    if (!JSON.stringify(job.spec).includes(`"--base-url=${baseUrl}"`)) {
      throw new Error(`job/${job.metadata.name} is not aimed at its gate ${baseUrl}`);
    }
    // A Job of the same name is an earlier attempt's, left by a killed runner.
    if (await cluster.getJob(job.metadata.name)) {
      await this.ctx.say(`deleting the previous job/${job.metadata.name} before staging its run`);
      await this.ctx.deleteJobAndWait(job.metadata.name);
    }
    await cluster.deleteService(gate);
    await cluster.createService(gateService(config, spec.id, fe.service, feSpec));
    made.push({ spec, job, gate, frontEndService: fe.service, selector });
    await cluster.createJob(job);
  }

  private async restartEarly(run: StudyRun): Promise<Staged['restarted']> {
    const { config, cluster, clock } = this.ctx;
    if (!run.reset.restartFrontEndOf) return undefined;
    const deployments = frontEnd(
      config,
      armById(config, run.reset.restartFrontEndOf),
      run.reset.pair ?? 0,
    ).restartDeployments;
    const at = clock.now();
    for (const name of deployments) await cluster.restartDeployment(name, at);
    return { deployments, at };
  }

  /** A run's staged clients, taken out of the staged set (undefined: none). */
  take(runId: string): Staged | undefined {
    const staged = this.staged.get(runId);
    this.staged.delete(runId);
    return staged;
  }

  /**
   * Opens a staged run's gates, once its caches are reset. Never throws: when a staged client
   * already ended (an evicted pod, or a client image whose `vllm bench serve` does not wait at a
   * closed gate) or a gate cannot be opened, every staged client and gate of the run is removed
   * and the caller starts the run's clients as usual (`fellBack`). Staging is off for the rest of
   * the study only when clients ended early in `FALLBACKS_BEFORE_OFF` staged runs in a row.
   */
  async open(staged: Staged): Promise<Opening> {
    const { cluster } = this.ctx;
    try {
      for (const client of staged.clients) {
        const counts = await cluster.getJob(client.job.metadata.name);
        const ended = counts ? jobOutcome(counts) : 'failed';
        if (ended)
          return await this.fallBackEarly(staged, client, counts ? `ended (${ended})` : 'disappeared');
      }
      this.endedEarly = 0;
      for (const client of staged.clients) await cluster.setServiceSelector(client.gate, client.selector);
      return { openedAt: this.ctx.clock.now() };
    } catch (error) {
      rethrowOutage(error);
      const why = `the gates of ${staged.runId} could not be opened (${(error as Error).message})`;
      await this.ctx.say(`${why}; its clients start unstaged`);
      await this.remove(staged.clients, true);
      return { fellBack: why };
    }
  }

  private async fallBackEarly(staged: Staged, client: StagedClient, what: string): Promise<Opening> {
    this.endedEarly++;
    const why = `staged job/${client.job.metadata.name} ${what} before its gate opened: its pod was evicted, or the client image's vllm bench serve does not wait at a closed gate (no --ready-check-timeout-sec, or it gave up)`;
    if (this.endedEarly >= FALLBACKS_BEFORE_OFF) {
      this.offBecause = why;
      await this.ctx.say(
        `${staged.runId}: ${why}; the clients of ${this.endedEarly} staged runs in a row ended so, so staging is off for the rest of the study`,
      );
    } else {
      await this.ctx.say(`${staged.runId}: ${why}; this run starts its clients unstaged`);
    }
    await this.remove(staged.clients, true);
    return { fellBack: why };
  }

  /** Removes a staged run that will not start (its run was not started, the study stopped). */
  async drop(staged: Staged): Promise<void> {
    await this.remove(staged.clients, true);
  }

  /** Deletes a run's gates once its clients have finished. */
  async closeGates(staged: Staged): Promise<void> {
    await this.remove(staged.clients, false);
  }

  /** Drops every run still staged: the study stops. */
  async dropAll(): Promise<void> {
    for (const staged of [...this.staged.values()]) await this.drop(staged);
    this.staged.clear();
  }

  private async remove(clients: readonly StagedClient[], withJobs: boolean): Promise<void> {
    for (const client of clients) {
      try {
        if (withJobs) await this.ctx.deleteJobAndWait(client.job.metadata.name);
        await this.ctx.cluster.deleteService(client.gate);
      } catch (error) {
        rethrowOutage(error);
        await this.ctx.say(
          `could not remove staged job/${client.job.metadata.name} or service/${client.gate}: ${(error as Error).message}`,
        );
      }
    }
  }
}

/** The run record's account of a staged run. */
export function stagingRecord(staged: Staged, opening: Opening | undefined): StagingRecord {
  return {
    during: staged.during,
    clientsCreatedAt: staged.createdAt.toISOString(),
    ...(opening && 'openedAt' in opening ? { gatesOpenedAt: opening.openedAt.toISOString() } : {}),
    gates: Object.fromEntries(staged.clients.map((c) => [c.gate, c.frontEndService])),
    ...(staged.restarted ? { frontEndRestartedAt: staged.restarted.at.toISOString() } : {}),
    ...(opening && 'fellBack' in opening ? { fellBack: opening.fellBack } : {}),
  };
}
