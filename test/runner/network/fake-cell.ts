import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { networkJobContext, serviceTemplateManifest } from '../../../charts/network/study-runner.ts';
import type { NetworkCell } from '../../../lib/config/network.ts';
import type { LabConfig } from '../../../lib/config/schema.ts';
import {
  cellByName,
  ISTIO_SYSTEM_NAMESPACE,
  meshNamespaceLabels,
  SCALE_SERVICE_LABEL,
} from '../../../lib/network/topology.ts';
import { KubeApiError } from '../../../lib/runner/kube-cluster.ts';
import { HOST_FILE } from '../../../lib/runner/layout.ts';
import { AMBIENT_REDIRECTION_ANNOTATION } from '../../../lib/runner/network/client-steps.ts';
import type { NetworkJobContext } from '../../../lib/runner/network/jobs.ts';
import { SIDECAR_INJECT_LABEL } from '../../../lib/runner/network/jobs.ts';
import { jobOutputDir } from '../../../lib/runner/network/layout.ts';
import type {
  NetworkRunnerDeps,
  NetworkRunnerOptions,
} from '../../../lib/runner/network/run-network-study.ts';
import type {
  JobObject,
  NetworkCluster,
  NetworkPodState,
  NetworkResultStore,
  ServiceObject,
  ServiceState,
  SidecarMetrics,
} from '../../../lib/runner/ports.ts';
import type { JobCounts } from '../../../lib/study/validity.ts';
import {
  conntrackDriverOutput,
  curlOutput,
  fortioOutput,
  hostCommandOutput,
  sseOutput,
} from './fake-cell-outputs.ts';
import {
  containerOf,
  flag,
  jobDurationMs,
  LOADING_COMPONENTS,
  matches,
  mtlsCasesOf,
  POD_TERMINATION_MS,
  programmingDelays,
  SYSTEM_CLUSTER_IPS,
  unit,
} from './fake-cell-physics.ts';
import { scrapeProxy } from './fake-mesh.ts';
import { advanceProber, type FakeProber, proberOutput } from './fake-prober.ts';
import { SharedFakeClock } from './fake-shared-clock.ts';

export {
  CONTENTION_PER_POD,
  latencyHistogram,
  POD_TERMINATION_MS,
  programmingDelays,
  SLOW_FORTIO_FACTOR,
  SYSTEM_CLUSTER_IPS,
} from './fake-cell-physics.ts';

/**
 * An in-process network-lab cell behind the runner's ports: namespaces, the charts' server pods,
 * Services with EndpointSlices, and Jobs that write the files fortio, curl, the lab's probes and
 * the host commands would write, with realistic numbers (sub-millisecond pod-to-pod latencies,
 * Little's law at saturation, a sidecar's counters growing by the requests it served). Tests break
 * it on purpose through its hooks.
 */

const NODE = 'ip-10-0-1-23';

export interface FakeJob {
  readonly job: JobObject;
  readonly createdAtMs: number;
  durationMs: number;
  readonly prober?: FakeProber;
  readonly pod: NetworkPodState;
  done: boolean;
  counts: JobCounts;
  /** When a foreground delete began: the Job and its pod stay listed until the pod has terminated. */
  deletedAtMs?: number;
}

export interface FakeService {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly clusterIp: string;
  readonly createdAtMs: number;
  /** When the datapath answers the ClusterIP with REJECT (kube-proxy's rules for a Service without endpoints yet). */
  readonly rejectsFromMs: number;
  /** When the datapath forwards the ClusterIP to the backend. */
  readonly programmedAtMs: number;
}

export interface ServerPod extends NetworkPodState {
  readonly app: string;
  /** The sidecar's destination counters. */
  requests: Record<string, number>;
  /** istio_tcp_connections_opened_total by connection_security_policy. */
  tcpOpened: Record<string, number>;
  /** A ztunnel's TCP series (fake-mesh.ts `ztunnelSeries`): labels -> connections opened. */
  ztunnelOpened?: Map<string, number>;
}

export interface FakeCellOptions {
  /**
   * Mesh pods are outside the mesh until restarted: on a sidecar cell created before the label or
   * the injector (no sidecar); on an ambient cell not enrolled by istio-cni (a failure it does not
   * retry: docs/facts.md §N2).
   */
  readonly meshPodsBeforeLabel?: boolean;
  /** Ready replicas of E9's backend. @default experiments.serviceScale.backendsPerService */
  readonly readyBackends?: number;
}

/** How the proxies count TCP connections (Istio's standard metrics; a test can make them worse). */
export type FakeTcpTelemetry =
  /** `connection_security_policy` on every series, connections as the policies say. */
  | 'labelled'
  /** The TCP counter without its `connection_security_policy` label: no proof either way. */
  | 'unlabelled'
  /**
   * The L4 connections arrive in plaintext: on a sidecar cell the tcp- port's (a DestinationRule
   * DISABLE on it, say); on an ambient cell every connection ztunnel takes in (passed through, not HBONE).
   */
  | 'plaintext-l4';

export class FakeCell implements NetworkCluster, SidecarMetrics {
  /** One time line for every run in flight (a smoke study's concurrent runs wait together). */
  readonly clock = new SharedFakeClock();
  readonly cell: NetworkCell;
  readonly context: NetworkJobContext;
  readonly serviceTemplate = serviceTemplateManifest();
  /** Every Job created, in order. */
  readonly created: JobObject[] = [];
  /** Every Job's life on the cell, in order of creation, kept after it is gone (deletedAtMs: when its delete began). */
  readonly history: FakeJob[] = [];
  /** Calls that fail with an HTTP status before succeeding: method name -> statuses to answer first. */
  readonly failures = new Map<string, number[]>();
  /** Jobs (by name pattern) that fail without writing their file. */
  failJobs: RegExp | undefined;
  /** Jobs (by name pattern) that never finish. */
  hangJobs: RegExp | undefined;
  /** What the Cilium agent's log says. */
  ciliumAgentLog = 'level=info msg="Cilium health daemon started"\n';
  /** What the destination proxies report about TCP connections. */
  tcpTelemetry: FakeTcpTelemetry = 'labelled';
  /** Jobs (by name pattern) that succeed but write no file. */
  noOutput: RegExp | undefined;
  /** fortio Jobs (by name pattern) whose histogram is fortio's default 1 ms resolution. */
  coarseFortio: RegExp | undefined;
  /** fortio Jobs (by name pattern) whose calls take `SLOW_FORTIO_FACTOR` times their arm's latency. */
  slowFortio: RegExp | undefined;
  /**
   * mTLS cases (by case id) whose curl leaves no file (`no-file`) or the given write-out instead of
   * the policy's answer; the other cases of the same pod are unaffected.
   */
  readonly brokenCurlCases = new Map<string, 'no-file' | string>();
  /** Prober Jobs (by name pattern) whose attempts come every 200 ms whatever their timeout (samples quantized to 200 ms). */
  coarseProber: RegExp | undefined;
  /** How long a prober pod takes from its Job's creation to its first attempt (ms). */
  proberPodStartMs = 3_800;
  /** The next this-many conntrack writes fail (the Job fails before writing). */
  failConntrackWrites = 0;
  readonly conntrackDefault = 262_144;
  conntrackMax = 262_144;
  conntrackBaseline = 180;
  /** Every value written to nf_conntrack_max, in order. */
  readonly conntrackWrites: number[] = [];
  readonly log: string[] = [];
  /** The fake's state, read by its other modules (fake-prober.ts, fake-mesh.ts, fake-cell-outputs.ts). */
  readonly jobs = new Map<string, FakeJob>();
  private readonly services = new Map<string, FakeService>();
  readonly servers: ServerPod[] = [];
  /** Each namespace's labels. */
  readonly namespaces: Record<string, Record<string, string>>;
  private uid = 0;
  private ip = 0;
  private dynamicIps = 0;

  constructor(
    readonly config: LabConfig,
    cellName: string,
    readonly root: string,
    options: FakeCellOptions = {},
  ) {
    this.cell = cellByName(config.network, cellName);
    this.context = networkJobContext(config, this.cell);
    const mesh = this.cell.mesh !== 'none';
    this.namespaces = {
      plain: {},
      'kube-system': {},
      ...(mesh
        ? {
            mesh: meshNamespaceLabels(this.cell.mesh),
            'mesh-default': meshNamespaceLabels(this.cell.mesh),
            [ISTIO_SYSTEM_NAMESPACE]: {},
          }
        : {}),
    };
    for (const app of ['fortio', 'sse-server']) this.addServer('plain', app, false);
    // E9's backend Deployment: backendsPerService replicas (fewer when a test says some are not up).
    const backends = options.readyBackends ?? config.network.experiments.serviceScale.backendsPerService;
    for (let i = 0; i < backends; i++) this.addServer('plain', 'scale-backend', false);
    if (mesh) {
      for (const app of ['fortio', 'fortio-permissive', 'fortio-authz', 'sse-server'])
        this.addServer('mesh', app, !options.meshPodsBeforeLabel);
      this.addServer('mesh-default', 'fortio', !options.meshPodsBeforeLabel);
    }
    if (this.cell.datapath === 'cilium')
      this.addServer('kube-system', 'cilium', false, { 'k8s-app': 'cilium' });
    // Ambient: the node's ztunnel (its DaemonSet's one pod), which counts the captured connections.
    if (this.cell.mesh === 'ambient') {
      this.addServer(ISTIO_SYSTEM_NAMESPACE, 'ztunnel', false);
      (this.servers[this.servers.length - 1] as ServerPod).ztunnelOpened = new Map();
    }
    mkdirSync(join(root, 'host'), { recursive: true });
    writeFileSync(
      join(root, HOST_FILE),
      JSON.stringify({
        instanceType: 'c7i.2xlarge',
        availabilityZone: 'us-west-2b',
        k3sVersion: 'v1.36.4+k3s1',
      }),
    );
  }

  /** Whether a namespace carries the cell's mesh labels (pods created there join the mesh). */
  private meshLabelled(namespace: string): boolean {
    if (this.cell.mesh === 'none') return false;
    const labels = this.namespaces[namespace] ?? {};
    return Object.entries(meshNamespaceLabels(this.cell.mesh)).every(([k, v]) => labels[k] === v);
  }

  /**
   * A Deployment's pod. `inMesh`: created into the mesh, with the sidecar on a sidecar cell, or on
   * an ambient cell with istio-cni's redirection annotation (ztunnel captures its traffic).
   */
  private addServer(namespace: string, app: string, inMesh: boolean, extra: Record<string, string> = {}) {
    const n = ++this.uid;
    const hasSidecar = inMesh && this.cell.mesh === 'sidecar';
    this.servers.push({
      name: `${app}-7d9f8-${n}`,
      namespace,
      uid: `uid-${n}`,
      ready: true,
      node: NODE,
      createdAt: this.clock.now().toISOString(),
      podIp: `10.42.0.${++this.ip}`,
      hasSidecar,
      annotations:
        inMesh && this.cell.mesh === 'ambient' ? { [AMBIENT_REDIRECTION_ANNOTATION]: 'enabled' } : {},
      phase: 'Running',
      app,
      requests: {},
      tcpOpened: {},
      labels: { app, ...extra },
    } as ServerPod & { labels: Record<string, string> });
  }

  private fail(method: string): void {
    const queue = this.failures.get(method);
    const status = queue?.shift();
    if (status !== undefined) {
      this.log.push(`${method}: HTTP ${status}`);
      throw new KubeApiError('GET', `/fake/${method}`, status, 'injected');
    }
  }

  // ---- NetworkCluster ----

  async createJob(job: JobObject): Promise<void> {
    this.fail('createJob');
    this.reap();
    const key = `${job.metadata.namespace}/${job.metadata.name}`;
    if (this.jobs.has(key)) throw new KubeApiError('POST', key, 409, 'AlreadyExists');
    if (!(job.metadata.namespace in this.namespaces))
      throw new KubeApiError('POST', key, 404, `namespace ${job.metadata.namespace} not found`);
    if ((job.spec as { backoffLimit?: number }).backoffLimit !== 0)
      throw new Error(`${key} must have backoffLimit 0`);
    this.created.push(job);
    const template = (
      job.spec as {
        template: { metadata?: { labels?: Record<string, string> }; spec: Record<string, unknown> };
      }
    ).template;
    const injected =
      job.metadata.namespace === 'mesh' &&
      this.cell.mesh === 'sidecar' &&
      template.metadata?.labels?.[SIDECAR_INJECT_LABEL] !== 'false' &&
      !template.spec.hostNetwork;
    // Ambient: istio-cni redirects a new pod of a labelled namespace (never a host-network pod).
    const redirected =
      this.cell.mesh === 'ambient' && this.meshLabelled(job.metadata.namespace) && !template.spec.hostNetwork;
    const n = ++this.uid;
    const pod: NetworkPodState & { labels: Record<string, string> } = {
      name: `${job.metadata.name}-${n}`,
      namespace: job.metadata.namespace,
      uid: `uid-${n}`,
      ready: true,
      node: NODE,
      createdAt: this.clock.now().toISOString(),
      podIp: `10.42.0.${++this.ip}`,
      hasSidecar: injected,
      annotations: redirected ? { [AMBIENT_REDIRECTION_ANNOTATION]: 'enabled' } : {},
      phase: 'Running',
      labels: { 'job-name': job.metadata.name, ...job.metadata.labels },
    };
    const command = containerOf(job).command;
    const prober =
      job.metadata.labels['app.kubernetes.io/component'] === 'service-prober'
        ? {
            startMs: this.clock.ms + this.proberPodStartMs,
            targets: command.flatMap((arg, i) => (command[i - 1] === '--target' ? [arg] : [])),
            attemptTimeoutMs: Number(flag(command, '--attempt-timeout-ms')),
            giveUpMs: Number(flag(command, '--give-up-ms')),
            ...(this.coarseProber?.test(job.metadata.name) ? { stepMs: 200 } : {}),
            readyWritten: false,
          }
        : undefined;
    const entry: FakeJob = {
      job,
      createdAtMs: this.clock.ms,
      durationMs: this.hangJobs?.test(job.metadata.name) ? Number.POSITIVE_INFINITY : jobDurationMs(job),
      ...(prober ? { prober } : {}),
      pod,
      done: false,
      counts: { active: 1, succeeded: 0, failed: 0 },
    };
    this.jobs.set(key, entry);
    this.history.push(entry);
  }

  async getJob(namespace: string, name: string): Promise<JobCounts | undefined> {
    this.fail('getJob');
    this.reap();
    const entry = this.jobs.get(`${namespace}/${name}`);
    if (!entry) return undefined;
    // A Job being deleted is killed, not finished: its counts stay as they were.
    if (entry.deletedAtMs !== undefined) return entry.counts;
    if (entry.prober && !entry.done) advanceProber(this, entry, entry.prober);
    if (!entry.done && this.clock.ms >= entry.createdAtMs + entry.durationMs) {
      entry.done = true;
      const ok = this.finish(entry.job);
      entry.counts = ok ? { active: 0, succeeded: 1, failed: 0 } : { active: 0, succeeded: 0, failed: 1 };
      (entry.pod as { phase: string }).phase = ok ? 'Succeeded' : 'Failed';
    }
    return entry.counts;
  }

  async deleteJob(namespace: string, name: string): Promise<void> {
    this.fail('deleteJob');
    const entry = this.jobs.get(`${namespace}/${name}`);
    if (entry) entry.deletedAtMs ??= this.clock.ms;
  }

  async listJobNames(namespace: string, labelSelector: string): Promise<string[]> {
    this.fail('listJobNames');
    this.reap();
    return [...this.jobs.values()]
      .filter((j) => j.job.metadata.namespace === namespace && matches(j.job.metadata.labels, labelSelector))
      .map((j) => j.job.metadata.name);
  }

  async listPods(namespace: string, labelSelector?: string): Promise<NetworkPodState[]> {
    this.fail('listPods');
    this.reap();
    const pods = [
      ...this.servers.filter((p) => p.namespace === namespace),
      ...[...this.jobs.values()].map((j) => j.pod).filter((p) => p.namespace === namespace),
    ] as (NetworkPodState & { labels: Record<string, string> })[];
    return pods.filter((p) => matches(p.labels, labelSelector)).map((p) => ({ ...p }));
  }

  async deletePod(namespace: string, name: string): Promise<void> {
    this.fail('deletePod');
    const i = this.servers.findIndex((p) => p.namespace === namespace && p.name === name);
    if (i === -1) return;
    const [old] = this.servers.splice(i, 1);
    // The Deployment replaces it; in a namespace labelled for the mesh the new pod joins it.
    this.addServer(namespace, old.app, this.meshLabelled(namespace));
  }

  async podLog(namespace: string, name: string): Promise<string> {
    this.fail('podLog');
    if (namespace === 'kube-system') return this.ciliumAgentLog;
    return `${namespace}/${name}: fake log\n`;
  }

  async namespaceLabels(name: string): Promise<Readonly<Record<string, string>> | undefined> {
    this.fail('namespaceLabels');
    return this.namespaces[name];
  }

  async createService(service: ServiceObject): Promise<void> {
    this.fail('createService');
    const key = `${service.metadata.namespace}/${service.metadata.name}`;
    if (this.services.has(key)) throw new KubeApiError('POST', key, 409, 'AlreadyExists');
    const wanted = service.spec.clusterIP as string | undefined;
    if (wanted !== undefined && (SYSTEM_CLUSTER_IPS.includes(wanted) || this.serviceAt(wanted)))
      throw new KubeApiError(
        'POST',
        key,
        422,
        `spec.clusterIPs: Invalid value: ["${wanted}"]: failed to allocate IP ${wanted}: provided IP is already allocated`,
      );
    // Dynamic addresses come from the upper band (above the first 256 of a /16), as the API server's.
    const n = ++this.dynamicIps + 256;
    const clusterIp = wanted ?? `10.43.${Math.floor(n / 256)}.${n % 256}`;
    const delays = programmingDelays(this.cell.datapath, this.services.size, unit(`${key}-${this.clock.ms}`));
    this.services.set(key, {
      namespace: service.metadata.namespace,
      name: service.metadata.name,
      labels: { ...service.metadata.labels },
      clusterIp,
      createdAtMs: this.clock.ms,
      rejectsFromMs: this.clock.ms + delays.rejectMs,
      programmedAtMs: this.clock.ms + delays.programMs,
    });
  }

  serviceAt(ip: string): FakeService | undefined {
    return [...this.services.values()].find((s) => s.clusterIp === ip);
  }

  async listServices(namespace: string, labelSelector: string): Promise<ServiceState[]> {
    this.fail('listServices');
    return [...this.services.values()]
      .filter((s) => s.namespace === namespace && matches(s.labels, labelSelector))
      .map((s) => ({
        name: s.name,
        clusterIp: s.clusterIp,
        createdAt: new Date(s.createdAtMs).toISOString(),
      }));
  }

  async deleteService(namespace: string, name: string): Promise<void> {
    this.fail('deleteService');
    this.services.delete(`${namespace}/${name}`);
  }

  async servicesWithReadyEndpoints(namespace: string, labelSelector: string): Promise<Set<string>> {
    this.fail('servicesWithReadyEndpoints');
    // The backend is ready: a Service's EndpointSlice shows it ready a moment after creation.
    return new Set(
      [...this.services.values()]
        .filter((s) => s.namespace === namespace && matches(s.labels, labelSelector))
        .filter((s) => this.clock.ms >= s.createdAtMs + 500)
        .map((s) => s.name),
    );
  }

  async serverVersion(): Promise<string> {
    this.fail('serverVersion');
    return 'v1.36.4+k3s1';
  }

  // ---- SidecarMetrics ----

  scrape(podIp: string): Promise<string> {
    return scrapeProxy(this, podIp);
  }

  // ---- State the tests read ----

  scaleServices(): number {
    return [...this.services.values()].filter((s) => s.labels[SCALE_SERVICE_LABEL] === 'true').length;
  }

  allServices(): number {
    return this.services.size;
  }

  serverPods(namespace: string): ServerPod[] {
    return this.servers.filter((p) => p.namespace === namespace);
  }

  /** Names of the Jobs that exist (running, ended or still terminating) whose name matches. */
  activeJobsNamed(pattern: RegExp): string[] {
    this.reap();
    return [...this.jobs.values()].map((j) => j.job.metadata.name).filter((n) => pattern.test(n));
  }

  activeJobs(): number {
    this.reap();
    return this.jobs.size;
  }

  /** Jobs whose deletion is over: gone with their pods. */
  private reap(): void {
    for (const [key, entry] of this.jobs)
      if (entry.deletedAtMs !== undefined && this.clock.ms >= entry.deletedAtMs + POD_TERMINATION_MS)
        this.jobs.delete(key);
  }

  /**
   * Other pods loading the node now: Jobs of the loading components still within their run time
   * (whether or not anyone polls them: a killed runner's Job runs on), and not being deleted.
   */
  loadingPodsBesides(job: JobObject): number {
    return [...this.jobs.values()].filter((j) => {
      if (j.job === job || j.deletedAtMs !== undefined) return false;
      if (!LOADING_COMPONENTS.includes(j.job.metadata.labels['app.kubernetes.io/component'])) return false;
      if (j.prober && !j.done) advanceProber(this, j, j.prober);
      return this.clock.ms < j.createdAtMs + j.durationMs;
    }).length;
  }

  // ---- What each Job leaves ----

  /**
   * A grouped mTLS Job: each case's curl, from the same pod, writes its own file
   * (`curl-<case id>.json`); a case of `brokenCurlCases` writes what the test says, or nothing.
   */
  private finishMtlsCases(job: JobObject): boolean {
    const dir = join(this.root, jobOutputDir(job.metadata.name));
    mkdirSync(dir, { recursive: true });
    for (const { id, url } of mtlsCasesOf(containerOf(job).command)) {
      const broken = this.brokenCurlCases.get(id);
      if (broken === 'no-file') continue;
      const text = broken === undefined ? curlOutput(this, job, url, false) : broken;
      writeFileSync(join(dir, `curl-${id}.json`), text);
    }
    return true;
  }

  /** Writes the Job's output like the real tool would; false when the Job fails. */
  private finish(job: JobObject): boolean {
    const name = job.metadata.name;
    if (this.failJobs?.test(name)) return false;
    const component = job.metadata.labels['app.kubernetes.io/component'];
    const { command, args, env } = containerOf(job);
    let file: string;
    let text: string;
    let ok = true;
    switch (component) {
      case 'fortio-client':
        file = 'fortio.json';
        text = fortioOutput(this, job, args);
        break;
      case 'download-client':
        file = 'curl.json';
        text = curlOutput(this, job, env.URL, true);
        break;
      case 'mtls-client':
        return this.finishMtlsCases(job);
      case 'sse-client':
        file = 'sse.json';
        text = JSON.stringify(sseOutput(this, job, command));
        break;
      case 'service-prober':
        file = 'prober.json';
        text = JSON.stringify(proberOutput(this, job));
        break;
      case 'conntrack-driver':
        file = 'conntrack-driver.json';
        text = JSON.stringify(conntrackDriverOutput(this, command));
        break;
      case 'host-command':
      case 'cilium-command': {
        file = 'host.txt';
        const out = hostCommandOutput(this, command[2]);
        if (out === undefined) return false;
        text = out;
        break;
      }
      default:
        throw new Error(`fake cell: no behaviour for component ${component} of job/${name}`);
    }
    if (this.noOutput?.test(name)) return ok;
    const dir = join(this.root, jobOutputDir(name));
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, file), text);
    ok = true;
    return ok;
  }
}

/** The runner's deps on a fake cell, with the real file store on `root`. */
export function fakeDeps(fake: FakeCell, store: NetworkResultStore, lines: string[] = []): NetworkRunnerDeps {
  return {
    cluster: fake,
    sidecars: fake,
    // Its file I/O is real: fake time waits for it.
    store: fake.clock.outsideTime(store),
    clock: fake.clock,
    jobs: fake.context,
    serviceTemplate: fake.serviceTemplate,
    log: (line) => lines.push(line),
  };
}

/** Fast options for the fake clock: every wait is simulated. */
export const FAST: NetworkRunnerOptions = {
  pollIntervalMs: 1_000,
  retry: { attempts: 5, initialDelayMs: 10, maxDelayMs: 100 },
};
