import type { LabConfig } from '../config/schema.ts';
import type { ServerSet } from '../study/arms.ts';
import { counterDeltas, kvCacheTokensFromLog, type VllmSnapshot, vllmSnapshot } from '../study/metrics.ts';
import type { StudyPlan, StudyRun } from '../study/plan.ts';
import {
  type ClientRecord,
  type JobOutcome,
  type ReplicaRecord,
  type RunRecord,
  STUDY_SCHEMA_VERSION,
  type StudyMetadata,
  type StudyRecord,
  summarizeRun,
} from '../study/results.ts';
import { armById, frontEnd, replicaSetName, replicaUrls } from '../study/topology.ts';
import {
  jobOutcome,
  type ReplicaReset,
  type ReplicaScrapes,
  type ResultFileReading,
  readResultFile,
  runReasons,
  withStudyChecks,
} from '../study/validity.ts';
import { GPU_TOPOLOGY_FILE, GPU_UUIDS_FILE, HOST_FILE } from './layout.ts';
import type { DeploymentState, RunnerDeps } from './ports.ts';
import { formatElapsed, progressLine, type StudyState, type StudyStatus, studyEtaMs } from './status.ts';

export interface RunnerOptions {
  /**
   * How long a run's Jobs may take before they are deleted and recorded as timed out.
   * @default 60 minutes
   */
  readonly jobTimeoutMs?: number;
  /**
   * How often Jobs, rollouts and pods are polled.
   * @default 5 seconds
   */
  readonly pollIntervalMs?: number;
  /**
   * How often a progress line is logged while waiting (status.json is written on every poll).
   * @default 1 minute
   */
  readonly progressEveryMs?: number;
  /**
   * How long a restarted front end may take to be ready (the router pip-installs at start).
   * @default 15 minutes
   */
  readonly rolloutTimeoutMs?: number;
  /**
   * How long a deleted replica pod may take to serve /v1/models again (model load).
   * @default 30 minutes
   */
  readonly podRestartTimeoutMs?: number;
  /**
   * How long the replicas may take to serve /v1/models when the study starts (first model download).
   * @default 90 minutes
   */
  readonly startupTimeoutMs?: number;
  /**
   * Base URLs of a server set's replicas.
   * @default the headless-Service DNS names of lib/study/topology.ts
   */
  readonly replicaUrls?: (servers: ServerSet) => readonly string[];
}

type Resolved<T> = { readonly [K in keyof T]-?: T[K] };

/** Container of the vLLM replicas (charts/model-servers.ts), whose log names the KV cache size. */
const VLLM_CONTAINER = 'vllm';

/**
 * Executes the study plan in order (lab-spec 4.2) and records every run with its validity
 * (lab-spec 4.3, 4.4) in the results folder. Resumable: a run whose valid record exists is
 * skipped, so a study interrupted at run 7 restarts at run 7. Returns the study record.
 */
export async function runStudy(
  deps: RunnerDeps,
  config: LabConfig,
  plan: StudyPlan,
  options: RunnerOptions = {},
): Promise<StudyRecord> {
  const runner = new StudyRunner(deps, config, plan, {
    jobTimeoutMs: options.jobTimeoutMs ?? 60 * 60_000,
    pollIntervalMs: options.pollIntervalMs ?? 5_000,
    progressEveryMs: options.progressEveryMs ?? 60_000,
    rolloutTimeoutMs: options.rolloutTimeoutMs ?? 15 * 60_000,
    podRestartTimeoutMs: options.podRestartTimeoutMs ?? 30 * 60_000,
    startupTimeoutMs: options.startupTimeoutMs ?? 90 * 60_000,
    replicaUrls: options.replicaUrls ?? ((servers) => replicaUrls(config, servers)),
  });
  return runner.run();
}

/** Whether a Deployment's rollout is complete, by the rules of `kubectl rollout status`. */
export function rolloutComplete(d: DeploymentState): boolean {
  return (
    d.observedGeneration >= d.generation &&
    d.updated === d.desired &&
    d.total === d.updated &&
    d.available === d.desired
  );
}

/** JSON with sorted keys, to compare two configurations regardless of key order. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

class StudyRunner {
  private readonly startedAt: Date;
  private records = new Map<string, RunRecord>();
  private metadata: StudyMetadata | undefined;
  private state: StudyState = 'starting';
  private current: { index: number; run: StudyRun; startedAt: Date; phase: string } | undefined;
  private lastProgressAt = 0;
  private message = '';

  constructor(
    private readonly deps: RunnerDeps,
    private readonly config: LabConfig,
    private readonly plan: StudyPlan,
    private readonly options: Resolved<RunnerOptions>,
  ) {
    this.startedAt = deps.clock.now();
  }

  async run(): Promise<StudyRecord> {
    try {
      return await this.execute();
    } catch (error) {
      this.state = 'failed';
      const message = (error as Error).message;
      await this.say(`study stopped: ${message}`);
      await this.writeStatus(message);
      throw error;
    }
  }

  private async execute(): Promise<StudyRecord> {
    const { store } = this.deps;
    const existing = await store.readStudy();
    if (existing && canonicalJson(existing.metadata.config) !== canonicalJson(this.config)) {
      throw new Error(
        'the results folder holds a study of a different configuration (study.json metadata.config); move study.json, status.json and runs/ away to start a new study',
      );
    }
    const inPlan = new Set(this.plan.runs.map((r) => r.id));
    for (const record of existing?.runs ?? []) if (inPlan.has(record.id)) this.records.set(record.id, record);
    const pending = this.plan.runs.filter((run) => !this.records.get(run.id)?.valid);
    await this.say(
      existing
        ? `resuming the study: ${this.plan.runs.length - pending.length} of ${this.plan.runs.length} runs have a valid record`
        : `starting the study: ${this.plan.runs.length} runs`,
    );
    await this.writeStatus();

    const sets = [...new Set(pending.map((run) => run.reset.prefixCaches))];
    for (const servers of sets) await this.waitForReplicas(servers);

    if (existing) {
      const { finishedAt: _previous, ...kept } = existing.metadata;
      this.metadata = kept;
    } else {
      this.metadata = await this.collectMetadata();
    }
    await this.writeStudy();

    this.state = 'running';
    for (const [i, run] of this.plan.runs.entries()) {
      if (this.records.get(run.id)?.valid) {
        await this.say(`run ${i + 1}/${this.plan.runs.length} ${run.id}: valid record exists, skipped`);
        continue;
      }
      const record = await this.executeRun(i + 1, run);
      this.records.set(run.id, record);
      await this.applyStudyChecks(record.id);
      const saved = this.records.get(run.id) ?? record;
      await this.say(
        `run ${i + 1}/${this.plan.runs.length} ${run.id}: ${saved.valid ? 'valid' : `INVALID: ${saved.invalidReasons.join('; ')}`}`,
      );
    }
    this.current = undefined;
    this.state = 'finished';
    this.metadata = { ...(this.metadata as StudyMetadata), finishedAt: this.deps.clock.now().toISOString() };
    const study = await this.writeStudy();
    const valid = study.runs.filter((r) => r.valid).length;
    await this.say(`study finished: ${valid} of ${study.runs.length} runs valid`);
    await this.writeStatus();
    return study;
  }

  // ---- One run -----------------------------------------------------------------------------

  private async executeRun(index: number, run: StudyRun): Promise<RunRecord> {
    const { clock, cluster, store } = this.deps;
    const startedAt = clock.now();
    this.current = { index, run, startedAt, phase: 'starting' };
    const servers = run.reset.prefixCaches;
    const urls = this.options.replicaUrls(servers);
    const pods = urls.map((_, i) => `${replicaSetName(this.config, servers)}-${i}`);

    await this.phase('resetting prefix caches');
    const resets = await this.resetCaches(servers, urls, pods);
    const preconditions = resets.filter((r) => r.error).map((r) => `replica ${r.pod}: ${r.error}`);

    if (run.reset.restartFrontEndOf && preconditions.length === 0) {
      await this.phase('restarting front end');
      const deployments = frontEnd(
        this.config,
        armById(this.config, run.reset.restartFrontEndOf),
      ).restartDeployments;
      for (const name of deployments) await cluster.restartDeployment(name, clock.now());
      for (const name of deployments) {
        const problem = await this.waitForRollout(name);
        if (problem) preconditions.push(problem);
      }
    }

    const reset: RunRecord['reset'] = resets.some((r) => r.method === 'pod-restart')
      ? 'pod-restart'
      : 'endpoint';
    if (preconditions.length > 0) {
      // The run cannot measure anything: its Job is not started, so it loads no replica.
      return this.record(run, startedAt, reset, [], [], [...preconditions.map((p) => `not started: ${p}`)]);
    }

    await this.phase('scraping metrics');
    const before = await this.scrape(urls);

    await this.phase('starting job');
    const jobs = run.benchmarks.map((spec) => ({ spec, job: this.deps.jobManifest(spec) }));
    for (const { spec, job } of jobs) {
      await this.deletePreviousJob(job.metadata.name);
      await store.removeClientResult(spec.id, spec.resultFile);
    }
    for (const { job } of jobs) await cluster.createJob(job);

    await this.phase('waiting for job');
    const outcomes = await this.waitForJobs(
      jobs.map(({ spec, job }) => ({ benchmarkId: spec.id, name: job.metadata.name })),
    );

    await this.phase('reading results');
    const readings: ResultFileReading[] = [];
    const clients: ClientRecord[] = [];
    for (const { spec, job } of jobs) {
      const text = await store.readClientResult(spec.id, spec.resultFile);
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
      await this.saveClientLog(spec.id, job.metadata.name);
    }

    await this.phase('scraping metrics');
    const after = await this.scrape(urls);
    const scrapes: ReplicaScrapes[] = pods.map((pod, i) => ({
      replica: i,
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
    const reasons = runReasons({ run, readings, clients, resets, scrapes, replicas });
    return this.record(run, startedAt, reset, clients, replicas, reasons);
  }

  private record(
    run: StudyRun,
    startedAt: Date,
    reset: RunRecord['reset'],
    clients: ClientRecord[],
    replicas: ReplicaRecord[],
    reasons: string[],
  ): RunRecord {
    const summary = summarizeRun(clients, replicas);
    return {
      id: run.id,
      group: run.group,
      title: run.title,
      ...(run.arm ? { arm: run.arm } : {}),
      dataset: run.dataset,
      startedAt: startedAt.toISOString(),
      finishedAt: this.deps.clock.now().toISOString(),
      reset,
      clients,
      replicas,
      ...(summary ? { summary } : {}),
      ...(run.upperBound !== undefined ? { upperBound: run.upperBound } : {}),
      valid: reasons.length === 0,
      invalidReasons: reasons,
    };
  }

  // ---- Cache reset ---------------------------------------------------------------------------

  private async resetCaches(
    servers: ServerSet,
    urls: readonly string[],
    pods: string[],
  ): Promise<ReplicaReset[]> {
    const resets: ReplicaReset[] = [];
    for (const [i, url] of urls.entries()) {
      try {
        const status = await this.deps.replicas.resetPrefixCache(url);
        resets.push({
          replica: i,
          pod: pods[i],
          method: status === 404 ? 'pod-restart' : 'endpoint',
          status,
        });
      } catch (error) {
        resets.push({
          replica: i,
          pod: pods[i],
          method: 'endpoint',
          error: `POST /reset_prefix_cache failed: ${(error as Error).message}`,
        });
      }
    }
    const restart = resets.filter((r) => r.method === 'pod-restart').map((r) => r.replica);
    if (restart.length === 0) return resets;
    await this.say(
      `${pods.filter((_, i) => restart.includes(i)).join(', ')}: /reset_prefix_cache answered 404 (VLLM_SERVER_DEV_MODE not set?); deleting the pods to reset their caches`,
    );
    const problem = await this.restartReplicas(servers, urls, pods, restart);
    return problem ? resets.map((r) => (restart.includes(r.replica) ? { ...r, error: problem } : r)) : resets;
  }

  /** Deletes replica pods and waits until new ones are ready and serve /v1/models; a problem or undefined. */
  private async restartReplicas(
    servers: ServerSet,
    urls: readonly string[],
    pods: string[],
    indices: number[],
  ): Promise<string | undefined> {
    const { cluster, clock } = this.deps;
    const selector = `app=${replicaSetName(this.config, servers)}`;
    const oldUids = new Map((await cluster.listPods(selector)).map((p) => [p.name, p.uid]));
    for (const i of indices) await cluster.deletePod(pods[i]);
    const deadline = clock.now().getTime() + this.options.podRestartTimeoutMs;
    const waiting = new Set(indices);
    while (waiting.size > 0) {
      const current = new Map((await cluster.listPods(selector)).map((p) => [p.name, p]));
      for (const i of [...waiting]) {
        const pod = current.get(pods[i]);
        if (!pod || pod.uid === oldUids.get(pods[i]) || !pod.ready) continue;
        if ((await this.modelsStatus(urls[i])) === 200) waiting.delete(i);
      }
      if (waiting.size === 0) break;
      if (clock.now().getTime() >= deadline) {
        return `pod restart did not bring ${[...waiting].map((i) => pods[i]).join(', ')} back to serving /v1/models within ${formatElapsed(this.options.podRestartTimeoutMs)}`;
      }
      await this.progress();
      await clock.sleep(this.options.pollIntervalMs);
    }
    return undefined;
  }

  private async modelsStatus(url: string): Promise<number | undefined> {
    try {
      return await this.deps.replicas.models(url);
    } catch {
      return undefined;
    }
  }

  /** Every replica of a set serves /v1/models (/health can pass before the engine serves). */
  private async waitForReplicas(servers: ServerSet): Promise<void> {
    const { clock } = this.deps;
    const urls = this.options.replicaUrls(servers);
    const deadline = clock.now().getTime() + this.options.startupTimeoutMs;
    const waiting = new Set(urls);
    let said = false;
    for (;;) {
      for (const url of [...waiting]) if ((await this.modelsStatus(url)) === 200) waiting.delete(url);
      if (waiting.size === 0) return;
      if (clock.now().getTime() >= deadline) {
        throw new Error(
          `replicas ${[...waiting].join(', ')} did not serve /v1/models within ${formatElapsed(this.options.startupTimeoutMs)}`,
        );
      }
      if (!said) {
        await this.say(
          `waiting for ${waiting.size} replica(s) of ${replicaSetName(this.config, servers)} to serve /v1/models`,
        );
        said = true;
      }
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  // ---- Front ends and Jobs -------------------------------------------------------------------

  /** Waits for a restarted Deployment's rollout; a problem or undefined. */
  private async waitForRollout(name: string): Promise<string | undefined> {
    const { cluster, clock } = this.deps;
    const deadline = clock.now().getTime() + this.options.rolloutTimeoutMs;
    for (;;) {
      const state = await cluster.getDeployment(name);
      if (!state) return `front end deployment/${name} does not exist`;
      if (rolloutComplete(state)) return undefined;
      if (clock.now().getTime() >= deadline) {
        return `front end deployment/${name} was not ready within ${formatElapsed(this.options.rolloutTimeoutMs)} of its restart (${state.available}/${state.desired} available, ${state.updated} updated)`;
      }
      await this.progress();
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  /** Deletes a previous Job of the same name and waits until it and its pods are gone. */
  private async deletePreviousJob(name: string): Promise<void> {
    if (!(await this.deps.cluster.getJob(name))) return;
    await this.say(`deleting the previous job/${name}`);
    await this.deleteJobAndWait(name);
  }

  /**
   * Deletes a Job (foreground propagation) and waits until it and its pods are gone, so none of
   * its pods sends requests into a later run. Throws when they outlive the rollout timeout.
   */
  private async deleteJobAndWait(name: string): Promise<void> {
    const { cluster, clock } = this.deps;
    await cluster.deleteJob(name);
    const deadline = clock.now().getTime() + this.options.rolloutTimeoutMs;
    while ((await cluster.getJob(name)) || (await cluster.listPods(`job-name=${name}`)).length > 0) {
      if (clock.now().getTime() >= deadline)
        throw new Error(
          `job/${name} and its pods were not gone within ${formatElapsed(this.options.rolloutTimeoutMs)} of its deletion`,
        );
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  /**
   * Polls the Jobs until each has succeeded or failed (status counts, lab-spec 4.4); a failed
   * Job counts as finished at the first poll that sees it. Jobs still running at the timeout are
   * recorded as timed out, their client log is saved, and they are deleted and waited for until
   * they and their pods are gone, so they stop loading the replicas before anything else happens.
   */
  private async waitForJobs(
    jobs: readonly { readonly benchmarkId: string; readonly name: string }[],
  ): Promise<Map<string, JobOutcome>> {
    const { cluster, clock } = this.deps;
    const names = jobs.map((j) => j.name);
    const outcomes = new Map<string, JobOutcome>();
    const deadline = clock.now().getTime() + this.options.jobTimeoutMs;
    for (;;) {
      for (const name of names) {
        if (outcomes.has(name)) continue;
        const status = await cluster.getJob(name);
        // A Job deleted under the runner cannot have succeeded.
        const outcome = status ? jobOutcome(status) : 'failed';
        if (outcome) {
          outcomes.set(name, outcome);
          if (outcome === 'failed') await this.say(`job/${name} failed (status.failed)`);
        }
      }
      if (outcomes.size === names.length) return outcomes;
      if (clock.now().getTime() >= deadline) {
        for (const { benchmarkId, name } of jobs) {
          if (outcomes.has(name)) continue;
          outcomes.set(name, 'timed-out');
          await this.say(
            `job/${name} did not finish within ${formatElapsed(this.options.jobTimeoutMs)}; deleting it`,
          );
          // Its pods are gone once it is deleted: keep the log of the run it did not finish.
          await this.saveClientLog(benchmarkId, name);
          await this.deleteJobAndWait(name);
        }
        return outcomes;
      }
      await this.progress();
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  private async saveClientLog(benchmarkId: string, jobName: string): Promise<void> {
    try {
      const pods = await this.deps.cluster.listPods(`job-name=${jobName}`);
      const logs = await Promise.all(pods.map((p) => this.deps.cluster.podLog(p.name)));
      if (logs.length > 0) await this.deps.store.writeClientLog(benchmarkId, logs.join('\n'));
    } catch (error) {
      await this.say(`could not save the log of job/${jobName}: ${(error as Error).message}`);
    }
  }

  // ---- Metrics -------------------------------------------------------------------------------

  private async scrape(urls: readonly string[]): Promise<{ snapshot?: VllmSnapshot; error?: string }[]> {
    return Promise.all(
      urls.map(async (url) => {
        try {
          return { snapshot: vllmSnapshot(await this.deps.replicas.metrics(url)) };
        } catch (error) {
          return { error: (error as Error).message };
        }
      }),
    );
  }

  // ---- Study record and metadata -------------------------------------------------------------

  private async applyStudyChecks(changedId: string): Promise<void> {
    const ordered = this.plan.runs.flatMap((run) => this.records.get(run.id) ?? []);
    const kv = this.metadata?.kvCacheTokens ?? this.config.vllm.kvCacheTokensPerReplica;
    const checked = withStudyChecks(this.plan.runs, ordered, kv);
    for (const record of checked) {
      const previous = this.records.get(record.id);
      const changed =
        record.id === changedId ||
        previous?.valid !== record.valid ||
        previous?.invalidReasons.join('\n') !== record.invalidReasons.join('\n');
      this.records.set(record.id, record);
      if (changed) await this.deps.store.writeRun(record);
    }
    await this.writeStudy();
  }

  private async writeStudy(): Promise<StudyRecord> {
    const study: StudyRecord = {
      schemaVersion: STUDY_SCHEMA_VERSION,
      metadata: this.metadata as StudyMetadata,
      runs: this.plan.runs.flatMap((run) => this.records.get(run.id) ?? []),
    };
    await this.deps.store.writeStudy(study);
    return study;
  }

  private async collectMetadata(): Promise<StudyMetadata> {
    const { store, cluster } = this.deps;
    const notes: string[] = [];
    const c = this.config;
    const versions: Record<string, string> = {
      vllm: c.vllm.image,
      benchmarkClient: c.benchmark.image,
      model: c.model.name,
      vllmRouter: c.router.version,
      vllmRouterImage: c.router.image,
      gaie: c.gaie.version,
      epp: c.gaie.eppImage,
      envoy: c.envoy.image,
      devicePlugin: c.devicePlugin.image,
      k3sConfigured: c.k3s.version,
      runner: c.runner.image,
    };
    const optional = new Set<string>(c.study.optionalArms);
    if (optional.has('ai-gateway')) {
      versions.envoyGateway = c.aiGateway.envoyGatewayVersion;
      versions.aiGateway = c.aiGateway.aiGatewayVersion;
    }
    if (optional.has('llmd-precise')) versions.llmdScheduler = c.llmd.eppImage;

    let gpuUuids: Record<string, string> = {};
    const uuids = await store.readHostFile(GPU_UUIDS_FILE);
    if (uuids === undefined) {
      notes.push(
        `${GPU_UUIDS_FILE} not found in the results folder: GPU UUIDs not recorded (the runner pod has no GPU and cannot run nvidia-smi -L; the host's bootstrap writes this file)`,
      );
    } else {
      try {
        const parsed = JSON.parse(uuids) as unknown;
        if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
        gpuUuids = Object.fromEntries(Object.entries(parsed).map(([k, v]) => [k, String(v)]));
      } catch (error) {
        notes.push(`${GPU_UUIDS_FILE} is not a JSON object of name to UUID (${(error as Error).message})`);
      }
    }
    const topology = await store.readHostFile(GPU_TOPOLOGY_FILE);
    if (topology === undefined) notes.push(`${GPU_TOPOLOGY_FILE} not found: nvidia-smi topo -m not recorded`);

    let host: { instanceType?: unknown; availabilityZone?: unknown; k3sVersion?: unknown } = {};
    const hostText = await store.readHostFile(HOST_FILE);
    if (hostText !== undefined) {
      try {
        host = JSON.parse(hostText);
      } catch (error) {
        notes.push(`${HOST_FILE} is not JSON (${(error as Error).message})`);
      }
    }

    let k3sVersion: string | undefined;
    try {
      k3sVersion = await cluster.serverVersion();
    } catch (error) {
      notes.push(`API server version not read: ${(error as Error).message}`);
      if (typeof host.k3sVersion === 'string') k3sVersion = host.k3sVersion;
    }

    let kvCacheTokens: number | undefined;
    const pod = `${replicaSetName(c, 'standard')}-0`;
    try {
      kvCacheTokens = kvCacheTokensFromLog(await cluster.podLog(pod, VLLM_CONTAINER));
      if (kvCacheTokens === undefined) notes.push(`"GPU KV cache size" not found in the log of ${pod}`);
    } catch (error) {
      notes.push(`log of ${pod} not read: ${(error as Error).message}`);
    }
    if (kvCacheTokens !== undefined && kvCacheTokens !== c.vllm.kvCacheTokensPerReplica) {
      notes.push(
        `${pod} logged a KV cache of ${kvCacheTokens} tokens; the configuration (vllm.kvCacheTokensPerReplica) assumed ${c.vllm.kvCacheTokensPerReplica}`,
      );
    }

    return {
      startedAt: this.startedAt.toISOString(),
      config: c,
      versions,
      ...(typeof host.instanceType === 'string' ? { instanceType: host.instanceType } : {}),
      ...(typeof host.availabilityZone === 'string' ? { availabilityZone: host.availabilityZone } : {}),
      gpuUuids,
      ...(topology !== undefined ? { gpuTopology: topology } : {}),
      ...(kvCacheTokens !== undefined ? { kvCacheTokens } : {}),
      ...(k3sVersion ? { k3sVersion } : {}),
      ...(notes.length > 0 ? { notes } : {}),
    };
  }

  // ---- Progress ------------------------------------------------------------------------------

  private async phase(phase: string): Promise<void> {
    if (!this.current) return;
    this.current = { ...this.current, phase };
    this.lastProgressAt = this.deps.clock.now().getTime();
    await this.say(this.progressText());
    await this.writeStatus();
  }

  /** Status on every poll, a log line every `progressEveryMs`. */
  private async progress(): Promise<void> {
    const now = this.deps.clock.now().getTime();
    if (this.current && now - this.lastProgressAt >= this.options.progressEveryMs) {
      this.lastProgressAt = now;
      await this.say(this.progressText());
    }
    await this.writeStatus();
  }

  private eta(): { elapsedMs: number; etaMs: number | undefined } {
    if (!this.current) return { elapsedMs: 0, etaMs: undefined };
    const elapsedMs = this.deps.clock.now().getTime() - this.current.startedAt.getTime();
    const durations = [...this.records.values()]
      .filter((r) => r.id !== this.current?.run.id)
      .map((r) => Date.parse(r.finishedAt) - Date.parse(r.startedAt));
    const after = this.plan.runs
      .slice(this.current.index)
      .filter((run) => !this.records.get(run.id)?.valid).length;
    return { elapsedMs, etaMs: studyEtaMs(durations, elapsedMs, after) };
  }

  private progressText(): string {
    if (!this.current) return this.message;
    const { elapsedMs, etaMs } = this.eta();
    const { index, run, phase } = this.current;
    return progressLine(index, this.plan.runs.length, run.id, phase, elapsedMs, etaMs);
  }

  private async say(line: string): Promise<void> {
    this.message = line;
    this.deps.log(line);
    await this.deps.store.appendLog(`${this.deps.clock.now().toISOString()} ${line}`);
  }

  private async writeStatus(error?: string): Promise<void> {
    const records = [...this.records.values()];
    const { elapsedMs, etaMs } = this.eta();
    const status: StudyStatus = {
      state: this.state,
      startedAt: this.startedAt.toISOString(),
      updatedAt: this.deps.clock.now().toISOString(),
      totalRuns: this.plan.runs.length,
      recordedRuns: records.length,
      validRuns: records.filter((r) => r.valid).length,
      invalidRuns: records.filter((r) => !r.valid).length,
      ...(this.current && this.state !== 'finished'
        ? {
            current: {
              index: this.current.index,
              id: this.current.run.id,
              phase: this.current.phase,
              startedAt: this.current.startedAt.toISOString(),
              elapsedSeconds: Math.round(elapsedMs / 1000),
            },
          }
        : {}),
      ...(etaMs !== undefined && this.state === 'running' ? { etaSeconds: Math.round(etaMs / 1000) } : {}),
      message: this.message,
      ...(error ? { error } : {}),
    };
    await this.deps.store.writeStatus(status);
  }
}
