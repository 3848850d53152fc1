import type { LabConfig } from '../config/schema.ts';
import { kvCacheTokensFromLog } from '../study/metrics.ts';
import type { StudyPlan, StudyRun } from '../study/plan.ts';
import { studyPredictions } from '../study/planner.ts';
import {
  type ClientRecord,
  type PreflightRecord,
  type PromptEvidence,
  type ReplicaRecord,
  type RunRecord,
  STUDY_SCHEMA_VERSION,
  type StudyMetadata,
  type StudyRecord,
  summarizeRun,
} from '../study/results.ts';
import { replicaSetName } from '../study/topology.ts';
import { withStudyChecks } from '../study/validity.ts';
import { rethrowOutage } from './call-policy.ts';
import { GPU_TOPOLOGY_FILE, GPU_UUIDS_FILE, HOST_FILE } from './layout.ts';
import type { Clock, StudyFiles } from './ports.ts';
import { VLLM_CONTAINER } from './resets.ts';
import type { RunnerContext } from './runner-context.ts';
import { StudyWrites } from './study-files.ts';

/**
 * The study's records: each run's latest record (with its earlier attempts), study.json and the
 * run files, written as soon as an attempt ends, and the study metadata.
 */

/** The optional parts of a run record besides its measurements. */
export interface RunExtras {
  readonly resets?: RunRecord['resets'];
  readonly preflight?: PreflightRecord;
  readonly promptEvidence?: PromptEvidence;
  readonly scorerEvidence?: RunRecord['scorerEvidence'];
  readonly staging?: RunRecord['staging'];
  /** What could not be checked (recorded, not judged). */
  readonly warnings?: readonly string[];
}

/** A run's record from what its attempt measured; valid when no reason was found. */
export function buildRecord(
  clock: Clock,
  run: StudyRun,
  startedAt: Date,
  reset: RunRecord['reset'],
  clients: ClientRecord[],
  replicas: ReplicaRecord[],
  reasons: string[],
  extra: RunExtras = {},
): RunRecord {
  const summary = summarizeRun(clients, replicas);
  return {
    id: run.id,
    group: run.group,
    title: run.title,
    ...(run.arm ? { arm: run.arm } : {}),
    dataset: run.dataset,
    startedAt: startedAt.toISOString(),
    finishedAt: clock.now().toISOString(),
    reset,
    ...(extra.resets ? { resets: extra.resets } : {}),
    ...(extra.preflight ? { preflight: extra.preflight } : {}),
    ...(extra.promptEvidence ? { promptEvidence: extra.promptEvidence } : {}),
    ...(extra.scorerEvidence ? { scorerEvidence: extra.scorerEvidence } : {}),
    ...(extra.staging ? { staging: extra.staging } : {}),
    clients,
    replicas,
    ...(summary ? { summary } : {}),
    ...(run.upperBound !== undefined ? { upperBound: run.upperBound } : {}),
    valid: reasons.length === 0,
    invalidReasons: reasons,
    ...(extra.warnings && extra.warnings.length > 0 ? { warnings: extra.warnings } : {}),
  };
}

export class StudyRecords {
  records = new Map<string, RunRecord>();
  metadata: StudyMetadata | undefined;
  private files: StudyFiles | undefined;
  private readonly writes = new StudyWrites();

  constructor(
    private readonly config: LabConfig,
    private readonly plan: StudyPlan,
  ) {}

  /** The study folder, once the study is chosen. */
  attach(files: StudyFiles): void {
    this.files = files;
  }

  get studyFiles(): StudyFiles {
    if (!this.files) throw new Error('internal: the study folder is used before the study was chosen');
    return this.files;
  }

  valid(runId: string): boolean {
    return this.records.get(runId)?.valid === true;
  }

  /**
   * Keeps a run's record (an attempt that just ended, or the run's last one) and writes it at
   * once, with the study checks over every record (an earlier record can turn invalid) and
   * study.json: a runner killed a second later loses nothing.
   */
  async keep(record: RunRecord): Promise<void> {
    this.records.set(record.id, record);
    await this.applyStudyChecks(record.id);
  }

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
      if (changed) await this.studyFiles.writeRun(record);
    }
    await this.writeStudy();
  }

  async writeStudy(): Promise<StudyRecord> {
    // One write at a time, each taking the records as they are when its turn comes.
    return this.writes.write(async () => {
      const study: StudyRecord = {
        schemaVersion: STUDY_SCHEMA_VERSION,
        metadata: this.metadata as StudyMetadata,
        runs: this.plan.runs.flatMap((run) => this.records.get(run.id) ?? []),
      };
      await this.studyFiles.writeStudy(study);
      return study;
    });
  }
}

/** The study metadata: versions, host, GPUs, the KV cache the replicas logged, the predictions. */
export async function collectMetadata(
  ctx: RunnerContext,
  studyId: string,
  startedAt: Date,
  predict = true,
): Promise<StudyMetadata> {
  const { store } = ctx.deps;
  const { cluster } = ctx;
  const notes: string[] = [];
  const c = ctx.config;
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
    rethrowOutage(error);
    notes.push(`API server version not read: ${(error as Error).message}`);
    if (typeof host.k3sVersion === 'string') k3sVersion = host.k3sVersion;
  }

  let kvCacheTokens: number | undefined;
  const pod = `${replicaSetName(c, 'standard')}-0`;
  try {
    kvCacheTokens = kvCacheTokensFromLog(await cluster.podLog(pod, VLLM_CONTAINER));
    if (kvCacheTokens === undefined) notes.push(`"GPU KV cache size" not found in the log of ${pod}`);
  } catch (error) {
    rethrowOutage(error);
    notes.push(`log of ${pod} not read: ${(error as Error).message}`);
  }
  if (kvCacheTokens !== undefined && kvCacheTokens !== c.vllm.kvCacheTokensPerReplica) {
    notes.push(
      `${pod} logged a KV cache of ${kvCacheTokens} tokens; the configuration (vllm.kvCacheTokensPerReplica) assumed ${c.vllm.kvCacheTokensPerReplica}`,
    );
  }

  return {
    studyId,
    startedAt: startedAt.toISOString(),
    config: c,
    versions,
    ...(typeof host.instanceType === 'string' ? { instanceType: host.instanceType } : {}),
    ...(typeof host.availabilityZone === 'string' ? { availabilityZone: host.availabilityZone } : {}),
    gpuUuids,
    ...(topology !== undefined ? { gpuTopology: topology } : {}),
    ...(kvCacheTokens !== undefined ? { kvCacheTokens } : {}),
    ...(k3sVersion ? { k3sVersion } : {}),
    ...(notes.length > 0 ? { notes } : {}),
    // Issue 13: the predictions this study runs with, so a report made later shows the same ones.
    // A smoke study measures no arm against another: it needs none.
    ...(predict ? { predictions: studyPredictions(c, kvCacheTokens) } : {}),
  };
}
