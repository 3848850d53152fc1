import type { NetworkCell } from '../../config/network.ts';
import type { LabConfig } from '../../config/schema.ts';
import type {
  CellHostFacts,
  ConntrackRunSpec,
  DatapathEvidence,
  MtlsCaseResult,
  MtlsMetricEvidence,
  MtlsRunSpec,
  NetworkJobOutcome,
  NetworkRun,
  NetworkRunRecord,
  NetworkRunResult,
  NetworkStudyPlan,
  NetworkStudyRecord,
  PodMeshEvidence,
  Precondition,
  ServiceScaleRunSpec,
} from '../../network/study/model.ts';
import { judgeNetworkRun, judgeRepeats, type NetworkJudgeConfig } from '../../network/study/validity.ts';
import {
  FORTIO_SERVER,
  MESH_NAMESPACE,
  meshNamespaceLabels,
  PLAIN_NAMESPACE,
  SCALE_BACKEND_PORT,
  SCALE_SERVICE_LABEL,
} from '../../network/topology.ts';
import { jobOutcome } from '../../study/validity.ts';
import { HOST_FILE } from '../layout.ts';
import type {
  Clock,
  JobObject,
  NetworkCluster,
  NetworkPodState,
  NetworkResultStore,
  NetworkStudyFiles,
  ServiceObject,
  SidecarMetrics,
} from '../ports.ts';
import { DEFAULT_RETRY_POLICY, type RetryPolicy, withRetry } from '../retry.ts';
import {
  formatElapsed,
  ProgressTimer,
  progressLine,
  type StudyState,
  studyEtaMs,
  studyStatus,
} from '../status.ts';
import { chooseLatestUnfinished, chooseStudyFolder, readStudyRecords, StudyWrites } from '../study-files.ts';
import { configHash, newStudyId, type StudyChoice } from '../study-id.ts';
import { StudyLog } from '../study-log.ts';
import {
  CILIUM_STATUS_SCRIPT,
  CONNTRACK_READ_SCRIPT,
  conntrackSetScript,
  countOf,
  curlOutcome,
  DATAPATH_SCRIPT,
  ENTRIES_COMMANDS,
  entriesScript,
  HOST_FACTS_SCRIPT,
  keyValues,
  mtlsCounters,
  mtlsDelta,
  parseCurlResult,
  parseDatapathEvidence,
  parseHostFacts,
} from './host-output.ts';
import {
  ciliumCommandJob,
  conntrackDriverJob,
  hostCommandJob,
  mtlsCaseJobName,
  type NetworkJobContext,
  OUTPUT_FILES,
  proberJob,
  runJobs,
} from './jobs.ts';
import { networkJobName } from './layout.ts';

/** The network runner's I/O, behind the ports (ports.ts). */
export interface NetworkRunnerDeps {
  readonly cluster: NetworkCluster;
  readonly sidecars: SidecarMetrics;
  readonly store: NetworkResultStore;
  readonly clock: Clock;
  /** What the Job builders need (jobs.ts). */
  readonly jobs: NetworkJobContext;
  /**
   * The plan's static Jobs by name, as the runner's ConfigMap carries them (`jobs.json`).
   * @default built from `jobs` with `runJobs`
   */
  readonly planJobs?: Readonly<Record<string, JobObject>>;
  /** The E9 Service template (charts/network/service-scale.ts `scaleServiceTemplate`). */
  readonly serviceTemplate: ServiceObject;
  readonly log: (line: string) => void;
}

export interface NetworkRunnerOptions {
  /** How long one Job may run before it is deleted and recorded as timed out. @default 15 minutes */
  readonly jobTimeoutMs?: number;
  /** How often Jobs, pods and endpoints are polled. @default 2 seconds */
  readonly pollIntervalMs?: number;
  /** How often a progress line is logged while waiting. @default 1 minute */
  readonly progressEveryMs?: number;
  /** How long a precondition (pods restarted, Services ready, conntrack baseline) may take. @default 10 minutes */
  readonly readyTimeoutMs?: number;
  /** Retries of the Kubernetes API and the sidecar scrapes. @default 5 tries, 1 s doubling up to 30 s */
  readonly retry?: RetryPolicy;
}

type Resolved<T> = { readonly [K in keyof T]-?: T[K] };

/** Label of the Services E9's prober measures (not counted among the step's N Services). */
export const PROBE_SERVICE_LABEL = 'network-lab/service-probe';
/** Istio ambient's enrolment mark on a pod (istio-cni sets it once the pod's traffic is redirected). */
export const AMBIENT_REDIRECTION_ANNOTATION = 'ambient.istio.io/redirection';
/** The Cilium agent's pods (the Helm chart's DaemonSet label) and the phrase its log uses when a BPF map is full. */
export const CILIUM_AGENT_SELECTOR = 'k8s-app=cilium';
export const MAP_FULL_PATTERN = /map (is )?full/i;

/** A record before its judgment. */
type RecordDraft = Omit<NetworkRunRecord, 'valid' | 'invalidReasons' | 'flags'>;

/** A run's kind-specific outcome before judgment. */
interface KindOutcome {
  readonly job: NetworkJobOutcome;
  readonly result?: NetworkRunResult;
  readonly pods: readonly PodMeshEvidence[];
  readonly mtlsMetrics?: MtlsMetricEvidence;
  /** What the runner found wrong (not started, no result file, restore failed, ...). */
  readonly reasons: readonly string[];
}

/** What a finished Job left. */
interface JobRun {
  readonly outcome: NetworkJobOutcome;
  /** The output file's text; undefined when the Job wrote none. */
  readonly text: string | undefined;
  readonly pods: readonly NetworkPodState[];
}

/** Which study a starting network runner works on (the first lab's shape, study-id.ts). */
export type NetworkStudyChoice = StudyChoice;

/**
 * The study to work on (as `chooseStudy` of study-id.ts for the first lab): with `fresh` a new
 * one; else the latest unfinished study of this cell whose id carries this configuration's hash;
 * else a new one.
 */
export function chooseNetworkStudy(
  stored: readonly NetworkStudyRecord[],
  config: LabConfig,
  cell: string,
  now: Date,
  fresh: boolean,
): NetworkStudyChoice {
  const hash = configHash(config);
  return chooseLatestUnfinished({
    fresh,
    newId: newStudyId(config, now),
    resumable: () =>
      stored
        .filter((s) => s.cell === cell && s.state !== 'finished' && s.studyId.endsWith(`-${hash}`))
        .map((s) => ({ id: s.studyId, startedAt: s.startedAt })),
    resumeWhy: (latest) =>
      `study ${latest.id} (started ${latest.startedAt}) is an unfinished study of this cell and configuration`,
    noneWhy:
      stored.length === 0
        ? 'no earlier network study in the results folder'
        : `none of the ${stored.length} earlier studies is an unfinished study of cell ${cell} with this configuration`,
  });
}

/** Runs `fn` over `items`, at most `limit` at once. */
export async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++];
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
}

/** The name of E9's i-th Service (`scale-00000` of the template, renumbered). */
export function scaleServiceName(template: ServiceObject, i: number): string {
  return template.metadata.name.replace(/\d+$/, (digits) => String(i).padStart(digits.length, '0'));
}

/** The Service behind a URL (`http://fortio.mesh.svc.cluster.local:8080/echo` -> fortio in mesh). */
export function serviceOfUrl(url: string, defaultNamespace: string): { service: string; namespace: string } {
  const host = url.replace(/^[a-z]+:\/\//i, '').split(/[:/]/)[0];
  const [service, namespace] = host.split('.');
  return { service, namespace: namespace ?? defaultNamespace };
}

function meshEvidence(pod: NetworkPodState): PodMeshEvidence {
  return { pod: pod.name, namespace: pod.namespace, node: pod.node, hasSidecar: pod.hasSidecar };
}

/**
 * Executes a cell's network study plan in order and records every run with its validity in the
 * cell's results folder (docs/facts.md §N3, N5). Resumable: a run with a record is skipped, so a
 * restarted runner continues where the last one stopped. Returns the study record.
 */
export async function runNetworkStudy(
  deps: NetworkRunnerDeps,
  config: LabConfig,
  plan: NetworkStudyPlan,
  options: NetworkRunnerOptions = {},
): Promise<NetworkStudyRecord> {
  const runner = new NetworkStudyRunner(deps, config, plan, {
    jobTimeoutMs: options.jobTimeoutMs ?? 15 * 60_000,
    pollIntervalMs: options.pollIntervalMs ?? 2_000,
    progressEveryMs: options.progressEveryMs ?? 60_000,
    readyTimeoutMs: options.readyTimeoutMs ?? 10 * 60_000,
    retry: options.retry ?? DEFAULT_RETRY_POLICY,
  });
  return runner.run();
}

interface ActiveRun {
  readonly index: number;
  readonly run: NetworkRun;
  readonly startedAt: Date;
  readonly phase: string;
}

class NetworkStudyRunner {
  private readonly startedAt: Date;
  private records = new Map<string, NetworkRunRecord>();
  private readonly cluster: NetworkCluster;
  private readonly sidecars: SidecarMetrics;
  private readonly cell: NetworkCell;
  private state: StudyState = 'starting';
  private files: NetworkStudyFiles | undefined;
  private studyId: string | undefined;
  private study: Omit<NetworkStudyRecord, 'runs'> | undefined;
  private active: ActiveRun | undefined;
  private readonly progressTimer: ProgressTimer;
  /** stdout and the study folder's log; lines said before the study is chosen wait in it. */
  private readonly log: StudyLog;
  private readonly studyWrites = new StudyWrites();
  private probeServices = 0;
  /** The cell's node (cellNode). */
  private node: string | undefined;
  /** The host's own nf_conntrack_max, as first read (E10's default step or the first 'before'). */
  private conntrackDefault: number | undefined;

  constructor(
    private readonly deps: NetworkRunnerDeps,
    private readonly config: LabConfig,
    private readonly plan: NetworkStudyPlan,
    private readonly options: Resolved<NetworkRunnerOptions>,
  ) {
    this.startedAt = deps.clock.now();
    this.log = new StudyLog(deps.clock, deps.log);
    this.progressTimer = new ProgressTimer(options.progressEveryMs);
    this.cell = deps.jobs.cell;
    if (this.cell.name !== plan.cell) {
      throw new Error(`the plan is for cell ${plan.cell}, the Jobs for cell ${this.cell.name}`);
    }
    const ctx = { policy: options.retry, clock: deps.clock, log: (line: string) => this.say(line) };
    this.cluster = retryingNetworkCluster(deps.cluster, ctx);
    this.sidecars = {
      scrape: (ip) => withRetry(`GET ${ip}:15020/stats/prometheus`, () => deps.sidecars.scrape(ip), ctx),
    };
  }

  async run(): Promise<NetworkStudyRecord> {
    try {
      return await this.execute();
    } catch (error) {
      this.state = 'failed';
      const message = (error as Error).message;
      if (this.study && this.files) {
        this.study = { ...this.study, state: 'failed', error: message };
        await this.writeStudy();
      }
      await this.say(`study stopped: ${message}`);
      await this.writeStatus(message);
      throw error;
    }
  }

  private async execute(): Promise<NetworkStudyRecord> {
    const { store } = this.deps;
    const say = (line: string) => this.say(line);
    const { choice, files } = await chooseStudyFolder(
      store,
      (studies, fresh) => chooseNetworkStudy(studies, this.config, this.plan.cell, this.startedAt, fresh),
      say,
    );
    this.studyId = choice.id;
    this.files = files;
    this.log.attach(files);
    const runIds = this.plan.runs.map((r) => r.id);
    const { existing, records } = await readStudyRecords(files, choice, runIds, say);
    // A record of an older runner has no repeat group: the plan's is the same run's, so that the
    // repeat-spread check still compares it.
    const groups = new Map(this.plan.runs.map((r) => [r.id, r.repeatGroup]));
    this.records = new Map(
      [...records].map(([id, record]) => {
        const group = groups.get(id);
        return [
          id,
          record.repeatGroup === undefined && group !== undefined
            ? { ...record, repeatGroup: group }
            : record,
        ];
      }),
    );
    for (const record of this.records.values())
      if (record.result?.kind === 'conntrack') this.conntrackDefault ??= record.result.conntrack.limitBefore;
    const total = this.plan.runs.length;
    await this.say(
      existing
        ? `resuming study ${choice.id} of cell ${this.plan.cell} (${choice.why}): ${this.records.size} of ${total} runs recorded`
        : `starting study ${choice.id} of cell ${this.plan.cell} (${choice.why}): ${total} runs`,
    );
    await this.writeStatus();

    this.node = await this.cellNode();
    const host = existing?.host ?? (await this.hostFacts());
    const datapathEvidence = existing?.datapathEvidence ?? (await this.datapathEvidence());
    this.study = {
      lab: 'network',
      studyId: choice.id,
      cell: this.plan.cell,
      datapath: this.plan.datapath,
      mesh: this.plan.mesh,
      host,
      ...(datapathEvidence ? { datapathEvidence } : {}),
      startedAt: existing?.startedAt ?? this.startedAt.toISOString(),
      state: 'running',
    };
    await this.writeStudy();
    this.state = 'running';

    try {
      for (const [i, run] of this.plan.runs.entries()) {
        if (this.records.has(run.id)) {
          await this.say(`run ${i + 1}/${total} ${run.id}: recorded earlier, skipped`);
          continue;
        }
        const record = await this.executeRun(i + 1, run);
        this.records.set(run.id, record);
        this.active = undefined;
        await this.studyFiles().writeRun(record);
        await this.applyRepeatSpread(run.id);
        await this.writeStudy();
        await this.say(
          `run ${i + 1}/${total} ${run.id}: ${record.valid ? 'valid' : `INVALID: ${record.invalidReasons.join('; ')}`}`,
        );
      }
    } finally {
      this.active = undefined;
      await this.deleteScaleServices();
    }
    this.state = 'finished';
    this.study = { ...this.study, state: 'finished', finishedAt: this.deps.clock.now().toISOString() };
    const study = await this.writeStudy();
    const valid = study.runs.filter((r) => r.valid).length;
    await this.say(`study finished: ${valid} of ${study.runs.length} runs valid`);
    await this.writeStatus();
    return study;
  }

  /** The cell's settings the validity checks judge against (lib/network/study/validity.ts). */
  private judgeConfig(): NetworkJudgeConfig {
    const { network } = this.config;
    return {
      datapath: this.cell.datapath,
      mesh: this.cell.mesh,
      node: this.node ?? 'unknown (no fortio server pod found at the start of the study)',
      lbMapMax: network.cilium.lbMapMax,
      requiredVersions: Object.keys(this.requiredVersions()),
      resolutionSeconds: network.fortio.resolutionSeconds,
      connections: network.fortio.connections,
    };
  }

  /** The versions every record names (docs/facts.md §N5), by component. */
  private requiredVersions(): Record<string, string> {
    const c = this.config.network;
    return {
      fortio: c.fortio.image,
      netshoot: c.probeImage,
      runner: this.config.runner.image,
      ...(this.cell.datapath === 'cilium' ? { cilium: c.cilium.version } : {}),
      ...(this.cell.mesh !== 'none' ? { istio: c.istio.version } : {}),
      k3s: '',
    };
  }

  /** The cell's node: where the charts pinned the plain fortio server (every pod must run there). */
  private async cellNode(): Promise<string | undefined> {
    try {
      const pods = await this.cluster.listPods(PLAIN_NAMESPACE, `app=${FORTIO_SERVER}`);
      return pods.find((p) => p.node !== '')?.node;
    } catch (error) {
      await this.say(`the cell's node not found: ${(error as Error).message}`);
      return undefined;
    }
  }

  // ---- Once per study ------------------------------------------------------------------------

  /** Instance type and zone from the bootstrap's host.json; kernel and CPU flags from a host Job. */
  private async hostFacts(): Promise<CellHostFacts> {
    let host: { instanceType?: unknown; availabilityZone?: unknown; k3sVersion?: unknown } = {};
    const text = await this.deps.store.readHostFile(HOST_FILE);
    if (text === undefined) await this.say(`${HOST_FILE} not found: instance type and zone not recorded`);
    else {
      try {
        host = JSON.parse(text);
      } catch (error) {
        await this.say(`${HOST_FILE} is not JSON (${(error as Error).message})`);
      }
    }
    let kernel = 'unknown';
    let cpuFlags: string[] = [];
    try {
      const facts = parseHostFacts(await this.hostOutput('host-facts', 'study', HOST_FACTS_SCRIPT));
      kernel = facts.kernel;
      cpuFlags = facts.cpuFlags;
    } catch (error) {
      await this.say(`host facts not read: ${(error as Error).message}`);
    }
    const { k3s: _read, ...pinned } = this.requiredVersions();
    const versions: Record<string, string> = { k3sConfigured: this.config.k3s.version, ...pinned };
    try {
      versions.k3s = await this.cluster.serverVersion();
    } catch (error) {
      await this.say(`API server version not read: ${(error as Error).message}`);
      if (typeof host.k3sVersion === 'string') versions.k3s = host.k3sVersion;
    }
    const facts: CellHostFacts = {
      instanceType: typeof host.instanceType === 'string' ? host.instanceType : 'unknown',
      availabilityZone: typeof host.availabilityZone === 'string' ? host.availabilityZone : 'unknown',
      kernel,
      cpuFlags,
      versions,
    };
    await this.say(
      `host: ${facts.instanceType} in ${facts.availabilityZone}, kernel ${kernel}, CPU flags ${cpuFlags.join(' ') || 'none of interest'}`,
    );
    return facts;
  }

  /** What the datapath really is on the host (docs/facts.md §N5); undefined when not read. */
  private async datapathEvidence(): Promise<DatapathEvidence | undefined> {
    try {
      const rules = await this.hostOutput('datapath', 'study', DATAPATH_SCRIPT);
      const cilium =
        this.cell.datapath === 'cilium'
          ? await this.hostOutput('cilium-status', 'study', CILIUM_STATUS_SCRIPT, true)
          : undefined;
      const evidence = parseDatapathEvidence(rules, cilium);
      await this.say(
        `datapath evidence: ${evidence.kubeSvcChains} KUBE-SVC chains, kube-proxy nft table ${evidence.nftKubeProxyTable ? 'present' : 'absent'}, ${evidence.ipvsServices} ipvs services${evidence.kubeProxyReplacement === null ? '' : `, KubeProxyReplacement ${evidence.kubeProxyReplacement}`}`,
      );
      return evidence;
    } catch (error) {
      await this.say(`datapath evidence not read: ${(error as Error).message}`);
      return undefined;
    }
  }

  // ---- One run -------------------------------------------------------------------------------

  private async executeRun(index: number, run: NetworkRun): Promise<NetworkRunRecord> {
    const startedAt = this.deps.clock.now();
    this.active = { index, run, startedAt, phase: 'starting' };
    await this.phase('checking preconditions');
    const unmet: string[] = [];
    for (const precondition of run.preconditions) {
      const problem = await this.establish(run, precondition);
      if (problem) {
        unmet.push(`not started: ${problem}`);
        break;
      }
    }
    const outcome: KindOutcome =
      unmet.length > 0 ? { job: 'failed', pods: [], reasons: unmet } : await this.executeKind(run);
    const draft: RecordDraft = {
      id: run.id,
      cell: run.cell,
      experiment: run.experiment,
      title: run.title,
      ...(run.repeat !== undefined ? { repeat: run.repeat } : {}),
      ...(run.repeatGroup !== undefined ? { repeatGroup: run.repeatGroup } : {}),
      spec: run.spec,
      startedAt: startedAt.toISOString(),
      finishedAt: this.deps.clock.now().toISOString(),
      job: outcome.job,
      ...(outcome.result ? { result: outcome.result } : {}),
      pods: outcome.pods,
      ...(outcome.mtlsMetrics ? { mtlsMetrics: outcome.mtlsMetrics } : {}),
    };
    const judgment = judgeNetworkRun(
      run,
      {
        job: draft.job,
        ...(draft.result ? { result: draft.result } : {}),
        pods: draft.pods,
        ...(draft.mtlsMetrics ? { mtlsMetrics: draft.mtlsMetrics } : {}),
        host: this.study?.host,
        datapath: this.study?.datapathEvidence,
        earlier: this.plan.runs.flatMap((r) => this.records.get(r.id) ?? []),
        runnerReasons: outcome.reasons,
      },
      this.judgeConfig(),
    );
    return {
      ...draft,
      valid: judgment.valid,
      invalidReasons: judgment.invalidReasons,
      ...(judgment.flags.length > 0 ? { flags: judgment.flags } : {}),
    };
  }

  private executeKind(run: NetworkRun): Promise<KindOutcome> {
    const { spec } = run;
    switch (spec.kind) {
      case 'fortio':
      case 'download':
      case 'sse':
        return this.clientRun(run, spec.clientNamespace, spec.url);
      case 'mtls':
        return this.mtlsRun(run, spec);
      case 'service-scale':
        return this.scaleRun(run, spec);
      case 'conntrack':
        return this.conntrackRun(run, spec);
    }
  }

  private planJob(run: NetworkRun, name: string): JobObject {
    const job = this.deps.planJobs?.[name] ?? runJobs(this.deps.jobs, run)[name];
    if (!job) throw new Error(`no Job ${name} for run ${run.id} (jobs.json is from another plan?)`);
    return job;
  }

  /** fortio, download and SSE: one client Job, with the server sidecar's counters around it on mesh arms. */
  private async clientRun(run: NetworkRun, clientNamespace: string, url: string): Promise<KindOutcome> {
    const name = networkJobName(run.id);
    const job = this.planJob(run, name);
    const server = serviceOfUrl(url, clientNamespace);
    const meshed = clientNamespace === MESH_NAMESPACE && this.cell.mesh === 'sidecar';
    const reasons: string[] = [];
    const serverPods = await this.cluster.listPods(server.namespace, `app=${server.service}`);
    let before: MtlsMetricEvidence | undefined;
    if (meshed) {
      await this.phase('scraping the server sidecar');
      before = await this.scrapeSidecars(serverPods, reasons);
    }
    const file =
      run.spec.kind === 'fortio'
        ? OUTPUT_FILES.fortio
        : run.spec.kind === 'sse'
          ? OUTPUT_FILES.sse
          : OUTPUT_FILES.curl;
    const done = await this.runJob(run, job, file);
    const result = done.text === undefined ? undefined : this.readClientResult(run, done.text, reasons);
    if (done.text === undefined)
      reasons.push(`job/${name} ${done.outcome} and left no result file (${file})`);
    else if (done.outcome !== 'succeeded') reasons.push(`job/${name} ${done.outcome}`);
    let mtlsMetrics: MtlsMetricEvidence | undefined;
    if (meshed && before) {
      await this.phase('scraping the server sidecar');
      const after = await this.scrapeSidecars(
        await this.cluster.listPods(server.namespace, `app=${server.service}`),
        reasons,
      );
      if (after) {
        try {
          mtlsMetrics = mtlsDelta(before, after);
        } catch (error) {
          reasons.push(`server sidecar counters: ${(error as Error).message}`);
        }
      }
    }
    return {
      job: done.outcome,
      ...(result ? { result } : {}),
      pods: [...done.pods, ...serverPods].map(meshEvidence),
      ...(mtlsMetrics ? { mtlsMetrics } : {}),
      reasons,
    };
  }

  private readClientResult(run: NetworkRun, text: string, reasons: string[]): NetworkRunResult | undefined {
    try {
      switch (run.spec.kind) {
        case 'fortio':
          return { kind: 'fortio', raw: text };
        case 'download':
          return { kind: 'download', download: parseCurlResult(text) };
        case 'sse':
          return { kind: 'sse', sse: JSON.parse(text) };
        default:
          throw new Error(`internal: ${run.spec.kind} is not a client run`);
      }
    } catch (error) {
      reasons.push(`result file of ${run.id} does not parse: ${(error as Error).message}`);
      return undefined;
    }
  }

  /** The server pods' sidecar counters, summed; undefined (with a reason) when a scrape fails. */
  private async scrapeSidecars(
    pods: readonly NetworkPodState[],
    reasons: string[],
  ): Promise<MtlsMetricEvidence | undefined> {
    if (pods.length === 0) {
      reasons.push('mTLS evidence missing: no server pod found');
      return undefined;
    }
    const sum: { requestsBySecurityPolicy: Record<string, number>; tcpConnectionsOpened: number } = {
      requestsBySecurityPolicy: {},
      tcpConnectionsOpened: 0,
    };
    for (const pod of pods) {
      try {
        const counters = mtlsCounters(await this.sidecars.scrape(pod.podIp));
        for (const [p, n] of Object.entries(counters.requestsBySecurityPolicy))
          sum.requestsBySecurityPolicy[p] = (sum.requestsBySecurityPolicy[p] ?? 0) + n;
        sum.tcpConnectionsOpened += counters.tcpConnectionsOpened;
      } catch (error) {
        reasons.push(
          `mTLS evidence missing: sidecar metrics of ${pod.namespace}/${pod.name} not read: ${(error as Error).message}`,
        );
        return undefined;
      }
    }
    return sum;
  }

  /** E2/E8: one curl Job per case; the observed outcome beside the expected one. */
  private async mtlsRun(run: NetworkRun, spec: MtlsRunSpec): Promise<KindOutcome> {
    const cases: MtlsCaseResult[] = [];
    const pods: PodMeshEvidence[] = [];
    const reasons: string[] = [];
    let job: NetworkJobOutcome = 'succeeded';
    for (const c of spec.cases) {
      await this.phase(`mTLS case ${c.id}`);
      const name = mtlsCaseJobName(run.id, c.id);
      const done = await this.runJob(run, this.planJob(run, name), OUTPUT_FILES.curl);
      pods.push(...done.pods.map(meshEvidence));
      if (done.outcome !== 'succeeded') job = done.outcome;
      let observed = null;
      if (done.text === undefined)
        reasons.push(`case ${c.id}: job/${name} ${done.outcome} and left no result file`);
      else {
        try {
          observed = curlOutcome(parseCurlResult(done.text));
        } catch (error) {
          reasons.push(`case ${c.id}: ${(error as Error).message}`);
        }
      }
      cases.push({ id: c.id, expected: c.expected, observed });
      await this.say(
        `${run.id} ${c.id}: expected HTTP ${c.expected.httpCode}/exit ${c.expected.curlExit}, observed ${observed ? `HTTP ${observed.httpCode}/exit ${observed.curlExit}` : 'nothing'}`,
      );
    }
    return { job, result: { kind: 'mtls', cases }, pods, reasons };
  }

  /** E9: entries and the prober on new Services (N Services exist: a precondition; the plan's next run measures new connections). */
  private async scaleRun(run: NetworkRun, spec: ServiceScaleRunSpec): Promise<KindOutcome> {
    const reasons: string[] = [];
    const ready = await this.cluster.servicesWithReadyEndpoints(
      PLAIN_NAMESPACE,
      `${SCALE_SERVICE_LABEL}=true`,
    );
    await this.phase('counting datapath entries');
    let entries = 0;
    try {
      const text = await this.hostOutput(
        `entries-${run.id}`,
        run.id,
        entriesScript(this.cell.datapath),
        this.cell.datapath === 'cilium',
      );
      entries = countOf(keyValues(text), 'entries', `${ENTRIES_COMMANDS[this.cell.datapath]}`);
    } catch (error) {
      reasons.push(`datapath entries not counted: ${(error as Error).message}`);
    }
    const lbMapFull = this.cell.datapath === 'cilium' ? await this.ciliumMapFull(reasons) : undefined;

    await this.phase('probing new Services');
    let prober = null;
    let job: NetworkJobOutcome = 'failed';
    let pods: PodMeshEvidence[] = [];
    const targets = await this.createProbeServices(spec.samples);
    try {
      if (targets.length < spec.samples)
        reasons.push(`${spec.samples - targets.length} of ${spec.samples} probe Services have no ClusterIP`);
      const name = networkJobName(run.id, 'prober');
      const done = await this.runJob(
        run,
        proberJob(this.deps.jobs, name, run.id, targets, spec.attemptTimeoutMs),
        OUTPUT_FILES.prober,
      );
      job = done.outcome;
      pods = done.pods.map(meshEvidence);
      if (done.text === undefined)
        reasons.push(`job/${name} ${done.outcome} and left no result file (${OUTPUT_FILES.prober})`);
      else {
        try {
          prober = JSON.parse(done.text);
        } catch (error) {
          reasons.push(`prober result does not parse: ${(error as Error).message}`);
        }
      }
    } finally {
      await this.deleteServices(PROBE_SERVICE_LABEL);
    }
    return {
      job,
      result: {
        kind: 'service-scale',
        scale: {
          servicesReady: ready.size,
          entries,
          entriesCommand: ENTRIES_COMMANDS[this.cell.datapath],
          ...(lbMapFull !== undefined ? { lbMapFull } : {}),
          prober,
        },
      },
      pods,
      reasons,
    };
  }

  /** Whether a Cilium agent's log says a BPF map is full (docs/facts.md §N5). */
  private async ciliumMapFull(reasons: string[]): Promise<boolean | undefined> {
    try {
      const agents = await this.cluster.listPods('kube-system', CILIUM_AGENT_SELECTOR);
      if (agents.length === 0) throw new Error(`no pod matches ${CILIUM_AGENT_SELECTOR} in kube-system`);
      for (const agent of agents) {
        if (MAP_FULL_PATTERN.test(await this.cluster.podLog('kube-system', agent.name, 'cilium-agent')))
          return true;
      }
      return false;
    } catch (error) {
      reasons.push(`Cilium agent log not read ("map full" unknown): ${(error as Error).message}`);
      return undefined;
    }
  }

  /** `count` fresh Services for the prober, each with its ClusterIP and the moment it was created. */
  private async createProbeServices(count: number) {
    const template = this.deps.serviceTemplate;
    const made: { name: string; createdAtMs: number }[] = [];
    for (let i = 0; i < count; i++) {
      const name = `probe-${++this.probeServices}`;
      await this.cluster.createService({
        ...template,
        metadata: { ...template.metadata, name, labels: { [PROBE_SERVICE_LABEL]: 'true' } },
      });
      made.push({ name, createdAtMs: this.deps.clock.now().getTime() });
    }
    const listed = new Map(
      (await this.cluster.listServices(PLAIN_NAMESPACE, `${PROBE_SERVICE_LABEL}=true`)).map((s) => [
        s.name,
        s,
      ]),
    );
    return made.flatMap(({ name, createdAtMs }) => {
      const ip = listed.get(name)?.clusterIp;
      return ip ? [{ clusterIp: ip, port: SCALE_BACKEND_PORT, createdAtMs }] : [];
    });
  }

  /** E10: set the limit, drive the connections, and ALWAYS restore the limit. */
  private async conntrackRun(run: NetworkRun, spec: ConntrackRunSpec): Promise<KindOutcome> {
    const reasons: string[] = [];
    let limitBefore: number;
    let limit: number;
    let baseline: number;
    await this.phase('setting the conntrack limit');
    try {
      const script = spec.limit === 'default' ? CONNTRACK_READ_SCRIPT : conntrackSetScript(spec.limit);
      const values = keyValues(await this.hostOutput(`ct-set-${run.id}`, run.id, script));
      limitBefore = countOf(values, spec.limit === 'default' ? 'max' : 'before', 'the conntrack Job');
      limit = countOf(values, 'max', 'the conntrack Job');
      baseline = countOf(values, 'count', 'the conntrack Job');
      this.conntrackDefault ??= limitBefore;
    } catch (error) {
      // The limit may have been written before the read failed: put back the host's own limit.
      const restore = await this.restoreLimit(run, this.conntrackDefault);
      return {
        job: 'failed',
        pods: [],
        reasons: [`conntrack limit not set: ${(error as Error).message}`, ...restore.reasons],
      };
    }
    if (spec.limit !== 'default' && limit !== spec.limit)
      reasons.push(`nf_conntrack_max reads ${limit} after writing ${spec.limit}`);
    let driver = null;
    let job: NetworkJobOutcome = 'failed';
    let pods: PodMeshEvidence[] = [];
    let restored: number | null = null;
    try {
      await this.phase('driving connections');
      const name = networkJobName(run.id, 'driver');
      const done = await this.runJob(
        run,
        conntrackDriverJob(this.deps.jobs, name, run.id, spec.connections, spec.connectTimeoutSeconds),
        OUTPUT_FILES.conntrackDriver,
      );
      job = done.outcome;
      pods = done.pods.map(meshEvidence);
      if (done.text === undefined) reasons.push(`job/${name} ${done.outcome} and left no result file`);
      else driver = JSON.parse(done.text);
    } catch (error) {
      reasons.push(`conntrack driver: ${(error as Error).message}`);
    } finally {
      await this.phase('restoring the conntrack limit');
      const restore = await this.restoreLimit(run, spec.limit === 'default' ? undefined : limitBefore);
      if (restore.limitAfterRestore !== null) this.conntrackDefault ??= restore.limitAfterRestore;
      restored = restore.limitAfterRestore;
      reasons.push(...restore.reasons);
    }
    return {
      job,
      result: {
        kind: 'conntrack',
        conntrack: { limitBefore, limit, baseline, limitAfterRestore: restored, driver },
      },
      pods,
      reasons,
    };
  }

  /**
   * Writes `limit` back (the value read before the step; undefined: only read it back) and reads
   * it; tried twice, so one failed Job does not leave the host with a small table.
   */
  private async restoreLimit(
    run: NetworkRun,
    limit: number | undefined,
  ): Promise<{ limitAfterRestore: number | null; reasons: string[] }> {
    let last = '';
    for (let attempt = 1; attempt <= 2; attempt++) {
      try {
        const script = limit === undefined ? CONNTRACK_READ_SCRIPT : conntrackSetScript(limit);
        const values = keyValues(await this.hostOutput(`ct-restore-${run.id}`, run.id, script));
        const after = countOf(values, 'max', 'the conntrack restore Job');
        if (limit !== undefined && after !== limit) {
          last = `nf_conntrack_max reads ${after} after restoring ${limit}`;
          continue;
        }
        await this.say(`${run.id}: nf_conntrack_max is ${after} after the step`);
        return { limitAfterRestore: after, reasons: [] };
      } catch (error) {
        last = (error as Error).message;
        await this.say(`${run.id}: restoring the conntrack limit failed (try ${attempt}/2): ${last}`);
      }
    }
    return { limitAfterRestore: null, reasons: [`conntrack limit not restored: ${last}`] };
  }

  // ---- Preconditions -------------------------------------------------------------------------

  /** Establishes or waits for one precondition; the problem when it cannot be met. */
  private async establish(run: NetworkRun, p: Precondition): Promise<string | undefined> {
    switch (p.kind) {
      case 'namespace-labelled':
        return this.namespaceLabelled(p.namespace);
      case 'pods-restarted-after-label':
        return this.podsRestarted(p.namespace);
      case 'services-ready':
        return this.servicesReady(run, p.count);
      case 'conntrack-baseline-below':
        return this.conntrackBaseline(run, p.max);
    }
  }

  private async namespaceLabelled(namespace: string): Promise<string | undefined> {
    const labels = await this.cluster.namespaceLabels(namespace);
    if (!labels) return `namespace ${namespace} does not exist`;
    const missing = Object.entries(meshNamespaceLabels(this.cell.mesh)).filter(([k, v]) => labels[k] !== v);
    if (missing.length === 0) return undefined;
    return `namespace ${namespace} lacks the label ${missing.map(([k, v]) => `${k}=${v}`).join(', ')} that mesh ${this.cell.mesh} needs (the cell's namespaces chart sets it)`;
  }

  /** Whether a pod joined the cell's mesh: a native sidecar, or ambient's redirection. */
  private meshed(pod: NetworkPodState): boolean {
    if (this.cell.mesh === 'sidecar') return pod.hasSidecar;
    if (this.cell.mesh === 'ambient') return pod.annotations[AMBIENT_REDIRECTION_ANNOTATION] === 'enabled';
    return true;
  }

  /** Pods created before the label carry no sidecar: they are deleted and their replacements waited for. */
  private async podsRestarted(namespace: string): Promise<string | undefined> {
    const selector = '!job-name';
    const stale = (await this.cluster.listPods(namespace, selector)).filter((pod) => !this.meshed(pod));
    for (const pod of stale) {
      await this.say(
        `pod ${namespace}/${pod.name} is not in the mesh (created before the label?): deleting it`,
      );
      await this.cluster.deletePod(namespace, pod.name);
    }
    const staleUids = new Set(stale.map((p) => p.uid));
    return this.waitFor(`pods of ${namespace} in the mesh and ready`, async () => {
      const pods = await this.cluster.listPods(namespace, selector);
      const bad = pods.filter((p) => staleUids.has(p.uid) || !p.ready || !this.meshed(p));
      return bad.length === 0
        ? undefined
        : bad
            .map(
              (p) => `${p.name}${this.meshed(p) ? '' : ' (not in the mesh)'}${p.ready ? '' : ' (not ready)'}`,
            )
            .join(', ');
    });
  }

  /** Exactly `count` E9 Services (created or deleted through the API, bounded concurrency), each with a ready endpoint. */
  private async servicesReady(run: NetworkRun, count: number): Promise<string | undefined> {
    const template = this.deps.serviceTemplate;
    const selector = `${SCALE_SERVICE_LABEL}=true`;
    const concurrency =
      run.spec.kind === 'service-scale'
        ? run.spec.createConcurrency
        : this.config.network.experiments.serviceScale.createConcurrency;
    const wanted = new Set(Array.from({ length: count }, (_, i) => scaleServiceName(template, i)));
    const existing = new Set((await this.cluster.listServices(PLAIN_NAMESPACE, selector)).map((s) => s.name));
    const extra = [...existing].filter((n) => !wanted.has(n));
    const missing = [...wanted].filter((n) => !existing.has(n));
    if (extra.length > 0 || missing.length > 0) {
      await this.phase(
        `Services: creating ${missing.length}, deleting ${extra.length} (${concurrency} at once)`,
      );
      const started = this.deps.clock.now().getTime();
      await forEachLimited(extra, concurrency, (name) => this.cluster.deleteService(PLAIN_NAMESPACE, name));
      await forEachLimited(missing, concurrency, (name) =>
        this.cluster.createService({ ...template, metadata: { ...template.metadata, name } }),
      );
      await this.say(
        `${run.id}: ${count} Services wanted: ${missing.length} created, ${extra.length} deleted in ${formatElapsed(this.deps.clock.now().getTime() - started)}`,
      );
    }
    return this.waitFor(`${count} Services with a ready endpoint`, async () => {
      const ready = await this.cluster.servicesWithReadyEndpoints(PLAIN_NAMESPACE, selector);
      const notReady = [...wanted].filter((n) => !ready.has(n)).length;
      const surplus = [...ready].filter((n) => !wanted.has(n)).length;
      if (notReady === 0 && surplus === 0) return undefined;
      return `${notReady} of ${count} without a ready endpoint${surplus ? `, ${surplus} not wanted still there` : ''}`;
    });
  }

  /** Waits (each poll a short host Job) until the conntrack table holds fewer than `max` entries. */
  private async conntrackBaseline(run: NetworkRun, max: number): Promise<string | undefined> {
    let poll = 0;
    return this.waitFor(`fewer than ${max} conntrack entries`, async () => {
      const values = keyValues(
        await this.hostOutput(`ct-read-${run.id}-${++poll}`, run.id, CONNTRACK_READ_SCRIPT),
      );
      const count = countOf(values, 'count', 'the conntrack read Job');
      return count < max ? undefined : `${count} entries`;
    });
  }

  /** Polls `check` until it reports nothing, within readyTimeoutMs; the last problem otherwise. */
  private async waitFor(what: string, check: () => Promise<string | undefined>): Promise<string | undefined> {
    const { clock } = this.deps;
    const deadline = clock.now().getTime() + this.options.readyTimeoutMs;
    await this.phase(`waiting for ${what}`);
    for (;;) {
      let problem: string | undefined;
      try {
        problem = await check();
      } catch (error) {
        problem = (error as Error).message;
      }
      if (problem === undefined) return undefined;
      if (clock.now().getTime() >= deadline)
        return `${what} not reached within ${formatElapsed(this.options.readyTimeoutMs)}: ${problem}`;
      await this.progress();
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  // ---- Jobs ----------------------------------------------------------------------------------

  /**
   * One Job from creation to deletion: an earlier Job of the same name and its output are removed
   * first, the Job is polled until its counts say succeeded or failed (or it times out and is
   * deleted), its pods' log and output file are kept in the study folder, then it is deleted.
   */
  private async runJob(run: NetworkRun | undefined, job: JobObject, file: string): Promise<JobRun> {
    const { namespace, name } = job.metadata;
    const runId = run?.id ?? 'study';
    await this.deleteJobAndWait(namespace, name);
    await this.deps.store.removeJobOutput(name);
    await this.say(`${runId}: starting job/${name} in ${namespace}`);
    await this.cluster.createJob(job);
    const outcome = await this.waitForJob(namespace, name);
    const pods = await this.cluster.listPods(namespace, `job-name=${name}`);
    const logs: string[] = [];
    for (const pod of pods) {
      try {
        logs.push(await this.cluster.podLog(namespace, pod.name));
      } catch (error) {
        await this.say(`log of ${namespace}/${pod.name} not read: ${(error as Error).message}`);
      }
    }
    if (logs.length > 0) await this.studyFiles().saveOutput(runId, 1, `${name}.log`, logs.join('\n'));
    const text = await this.deps.store.readJobOutput(name, file);
    if (text !== undefined) await this.studyFiles().saveOutput(runId, 1, `${name}-${file}`, text);
    await this.deps.store.removeJobOutput(name);
    await this.deleteJobAndWait(namespace, name);
    await this.say(`${runId}: job/${name} ${outcome}${text === undefined ? `, no ${file}` : ''}`);
    return { outcome, text, pods };
  }

  /** A host Job's output; throws naming the Job when it failed or wrote nothing. */
  private async hostOutput(step: string, runId: string, script: string, cilium = false): Promise<string> {
    const name = networkJobName(step);
    const job = (cilium ? ciliumCommandJob : hostCommandJob)(this.deps.jobs, name, runId, script);
    const done = await this.runJob(undefined, job, OUTPUT_FILES.host);
    if (done.text === undefined) throw new Error(`job/${name} ${done.outcome} and wrote no output`);
    if (done.outcome !== 'succeeded') throw new Error(`job/${name} ${done.outcome}`);
    return done.text;
  }

  private async waitForJob(namespace: string, name: string): Promise<NetworkJobOutcome> {
    const { clock } = this.deps;
    const deadline = clock.now().getTime() + this.options.jobTimeoutMs;
    for (;;) {
      const status = await this.cluster.getJob(namespace, name);
      // A Job deleted under the runner cannot have succeeded.
      const outcome = status ? jobOutcome(status) : 'failed';
      if (outcome) return outcome;
      if (clock.now().getTime() >= deadline) {
        await this.say(
          `job/${name} did not finish within ${formatElapsed(this.options.jobTimeoutMs)}; deleting it`,
        );
        return 'timed-out';
      }
      await this.progress();
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  /** Deletes a Job (foreground) and waits until it and its pods are gone. */
  private async deleteJobAndWait(namespace: string, name: string): Promise<void> {
    const { clock } = this.deps;
    if (!(await this.cluster.getJob(namespace, name))) return;
    await this.cluster.deleteJob(namespace, name);
    const deadline = clock.now().getTime() + this.options.readyTimeoutMs;
    while (
      (await this.cluster.getJob(namespace, name)) ||
      (await this.cluster.listPods(namespace, `job-name=${name}`)).length > 0
    ) {
      if (clock.now().getTime() >= deadline)
        throw new Error(
          `job/${name} and its pods were not gone within ${formatElapsed(this.options.readyTimeoutMs)} of its deletion`,
        );
      await clock.sleep(this.options.pollIntervalMs);
    }
  }

  private async deleteServices(label: string): Promise<number> {
    const services = await this.cluster.listServices(PLAIN_NAMESPACE, `${label}=true`);
    await forEachLimited(services, this.config.network.experiments.serviceScale.createConcurrency, (s) =>
      this.cluster.deleteService(PLAIN_NAMESPACE, s.name),
    );
    return services.length;
  }

  /** The end of the study (or its stop): the E9 Services go, so the cell is as the charts left it. */
  private async deleteScaleServices(): Promise<void> {
    try {
      const scale = await this.deleteServices(SCALE_SERVICE_LABEL);
      const probes = await this.deleteServices(PROBE_SERVICE_LABEL);
      if (scale + probes > 0) await this.say(`deleted the ${scale + probes} Services the study created`);
    } catch (error) {
      await this.say(
        `the study's Services were not all deleted (kubectl -n ${PLAIN_NAMESPACE} delete service -l ${SCALE_SERVICE_LABEL}): ${(error as Error).message}`,
      );
    }
  }

  // ---- Records and progress ------------------------------------------------------------------

  /**
   * Repeat spread across each repeat group of the plan (flags, never invalid; `judgeRepeats`
   * compares only records of one `repeatGroup`): records whose flags changed are rewritten.
   */
  private async applyRepeatSpread(changedId: string): Promise<void> {
    const recorded = this.plan.runs.flatMap((run) => this.records.get(run.id) ?? []);
    for (const record of judgeRepeats(recorded)) {
      const before = this.records.get(record.id);
      this.records.set(record.id, record);
      if (record.id !== changedId && (before?.flags ?? []).join('\n') !== (record.flags ?? []).join('\n'))
        await this.studyFiles().writeRun(record);
    }
    const latest = this.records.get(changedId);
    if (latest) await this.studyFiles().writeRun(latest);
  }

  private studyFiles(): NetworkStudyFiles {
    if (!this.files) throw new Error('internal: the study folder is used before the study was chosen');
    return this.files;
  }

  private async writeStudy(): Promise<NetworkStudyRecord> {
    return this.studyWrites.write(async () => {
      if (!this.study) throw new Error('internal: the study record is written before it was made');
      const study: NetworkStudyRecord = {
        ...this.study,
        runs: this.plan.runs.flatMap((run) => this.records.get(run.id) ?? []),
      };
      await this.studyFiles().writeStudy(study);
      return study;
    });
  }

  private async phase(phase: string): Promise<void> {
    if (!this.active) return;
    this.active = { ...this.active, phase };
    this.progressTimer.logged(this.deps.clock.now().getTime());
    await this.say(this.progressText());
    await this.writeStatus();
  }

  private async progress(): Promise<void> {
    const now = this.deps.clock.now().getTime();
    if (this.active && this.progressTimer.due(now)) {
      await this.say(this.progressText());
    }
    await this.writeStatus();
  }

  private eta(): { elapsedMs: number; etaMs: number | undefined } {
    const entry = this.active;
    if (!entry) return { elapsedMs: 0, etaMs: undefined };
    const elapsedMs = this.deps.clock.now().getTime() - entry.startedAt.getTime();
    const durations = [...this.records.values()].map(
      (r) => Date.parse(r.finishedAt) - Date.parse(r.startedAt),
    );
    const after = this.plan.runs.slice(entry.index).filter((run) => !this.records.has(run.id)).length;
    return { elapsedMs, etaMs: studyEtaMs(durations, elapsedMs, after) };
  }

  private progressText(): string {
    const entry = this.active;
    if (!entry) return this.log.message;
    const { elapsedMs, etaMs } = this.eta();
    return progressLine(entry.index, this.plan.runs.length, entry.run.id, entry.phase, elapsedMs, etaMs);
  }

  private say(line: string): Promise<void> {
    return this.log.say(line);
  }

  private async writeStatus(error?: string): Promise<void> {
    const { elapsedMs, etaMs } = this.eta();
    await this.deps.store.writeStatus(
      studyStatus({
        state: this.state,
        studyId: this.studyId,
        studyStartedAt: this.study?.startedAt,
        startedAt: this.startedAt,
        now: this.deps.clock.now(),
        runIds: this.plan.runs.map((run) => run.id),
        records: this.records,
        active: this.active,
        elapsedMs,
        etaMs,
        message: this.log.message,
        error,
      }),
    );
  }
}

/** Every call of the cell's API, retried on transient faults (retry.ts); a retried create that meets itself (409) succeeded. */
export function retryingNetworkCluster(
  cluster: NetworkCluster,
  ctx: Parameters<typeof withRetry>[2],
): NetworkCluster {
  const r = <T>(what: string, call: () => Promise<T>) => withRetry(what, call, ctx);
  const conflictIsDone = async (call: () => Promise<void>, exists: () => Promise<boolean>) => {
    try {
      await call();
    } catch (error) {
      if ((error as { status?: number }).status === 409 && (await exists())) return;
      throw error;
    }
  };
  return {
    createJob: (job) =>
      r(`create job/${job.metadata.name}`, () =>
        conflictIsDone(
          () => cluster.createJob(job),
          async () => (await cluster.getJob(job.metadata.namespace, job.metadata.name)) !== undefined,
        ),
      ),
    getJob: (ns, name) => r(`get job/${name}`, () => cluster.getJob(ns, name)),
    deleteJob: (ns, name) => r(`delete job/${name}`, () => cluster.deleteJob(ns, name)),
    listPods: (ns, selector) =>
      r(`list pods ${ns} ${selector ?? ''}`.trim(), () => cluster.listPods(ns, selector)),
    deletePod: (ns, name) => r(`delete pod/${name}`, () => cluster.deletePod(ns, name)),
    podLog: (ns, name, container) => r(`log of pod/${name}`, () => cluster.podLog(ns, name, container)),
    namespaceLabels: (name) => r(`get namespace/${name}`, () => cluster.namespaceLabels(name)),
    createService: (service) =>
      r(`create service/${service.metadata.name}`, () =>
        conflictIsDone(
          () => cluster.createService(service),
          async () =>
            (
              await cluster.listServices(
                service.metadata.namespace,
                Object.entries(service.metadata.labels)
                  .map(([k, v]) => `${k}=${v}`)
                  .join(','),
              )
            ).some((s) => s.name === service.metadata.name),
        ),
      ),
    listServices: (ns, selector) =>
      r(`list services ${ns} ${selector}`, () => cluster.listServices(ns, selector)),
    deleteService: (ns, name) => r(`delete service/${name}`, () => cluster.deleteService(ns, name)),
    servicesWithReadyEndpoints: (ns, selector) =>
      r(`list endpointslices ${ns} ${selector}`, () => cluster.servicesWithReadyEndpoints(ns, selector)),
    serverVersion: () => r('GET /version', () => cluster.serverVersion()),
  };
}
