import type {
  MeshRestartEvidence,
  MtlsCaseResult,
  MtlsMetricEvidence,
  MtlsRunSpec,
  NetworkJobOutcome,
  NetworkRun,
  NetworkRunResult,
  PodMeshEvidence,
} from '../../network/study/model.ts';
import { mtlsClientGroups } from '../../network/study/mtls-groups.ts';
import {
  ISTIO_SYSTEM_NAMESPACE,
  MESH_NAMESPACE,
  meshNamespaceLabels,
  serviceOfUrl,
  ZTUNNEL_POD_SELECTOR,
} from '../../network/topology.ts';
import { rethrowOutage } from '../call-policy.ts';
import type { JobObject, NetworkPodState } from '../ports.ts';
import { curlOutcome, mtlsCounters, mtlsDelta, parseCurlResult } from './host-output.ts';
import { mtlsCaseFile, mtlsGroupJobName, OUTPUT_FILES, runJobs } from './jobs.ts';
import { networkJobName } from './layout.ts';
import { type KindOutcome, meshEvidence, type StepContext } from './runner-context.ts';

/**
 * Istio ambient's enrolment mark on a pod: istio-cni sets it to `enabled` once ztunnel accepted the
 * pod, `pending` while the redirection waits for one (docs/facts.md §N2).
 */
export const AMBIENT_REDIRECTION_ANNOTATION = 'ambient.istio.io/redirection';
export { serviceOfUrl };

/** The Job with the server's host in its URL argument replaced by `podIp` (the port and path kept). */
export function withServerAddress(job: JobObject, url: string, podIp: string): JobObject {
  const direct = url.replace(/^([a-z]+:\/\/)[^:/]+/i, `$1${podIp}`);
  const swap = (value: unknown) => (value === url ? direct : value);
  return JSON.parse(JSON.stringify(job), (_key, value) => swap(value));
}

/**
 * The client runs (fortio, download, SSE; E1-E7 and C), the mTLS matrix (E2, E8) and the mesh's
 * preconditions (the namespace's label, pods restarted into the mesh).
 */
export class ClientSteps {
  /** What podsRestarted found for each run since its last takeMeshRestarts: the run's evidence. */
  private readonly restarts = new Map<string, MeshRestartEvidence[]>();

  constructor(private readonly ctx: StepContext) {}

  /** A run's mesh restarts (each namespace checked, even with nothing restarted). */
  takeMeshRestarts(runId: string): MeshRestartEvidence[] {
    const taken = this.restarts.get(runId) ?? [];
    this.restarts.delete(runId);
    return taken;
  }

  planJob(run: NetworkRun, name: string): JobObject {
    const job = this.ctx.deps.planJobs?.[name] ?? runJobs(this.ctx.deps.jobs, run)[name];
    if (!job) throw new Error(`no Job ${name} for run ${run.id} (jobs.json is from another plan?)`);
    return job;
  }

  /** fortio, download and SSE: one client Job, with the server sidecar's counters around it on mesh arms. */
  async clientRun(run: NetworkRun, clientNamespace: string, url: string): Promise<KindOutcome> {
    const name = networkJobName(run.id);
    const server = serviceOfUrl(url, clientNamespace);
    // The destination's counters: the server's sidecar, or on an ambient cell the node's ztunnel.
    const meshed = clientNamespace === MESH_NAMESPACE && this.ctx.cell.mesh !== 'none';
    const reasons: string[] = [];
    const serverPods = await this.ctx.cluster.listPods(server.namespace, `app=${server.service}`);
    let job = this.planJob(run, name);
    if (run.experiment === 'C') {
      // Calibration factors the host out, so it must not go through the datapath under test: the
      // client reaches the server pod by its IP, not through the Service's ClusterIP.
      const podIp = serverPods.find((p) => p.ready && p.podIp !== '')?.podIp;
      if (!podIp)
        return {
          job: 'failed',
          pods: [],
          reasons: [
            `not started: no ready ${server.service} pod with an IP in ${server.namespace} to calibrate against`,
          ],
        };
      job = withServerAddress(job, url, podIp);
    }
    let before: MtlsMetricEvidence | undefined;
    if (meshed) {
      await this.ctx.phase('scraping the destination proxy');
      before = await this.scrapeDestination(serverPods, server.namespace, reasons);
    }
    const file =
      run.spec.kind === 'fortio'
        ? OUTPUT_FILES.fortio
        : run.spec.kind === 'sse'
          ? OUTPUT_FILES.sse
          : OUTPUT_FILES.curl;
    const done = await this.ctx.jobs.runJob(run, job, file);
    const result = done.text === undefined ? undefined : this.readClientResult(run, done.text, reasons);
    if (done.text === undefined)
      reasons.push(`job/${name} ${done.outcome} and left no result file (${file})`);
    else if (done.outcome !== 'succeeded') reasons.push(`job/${name} ${done.outcome}`);
    let mtlsMetrics: MtlsMetricEvidence | undefined;
    if (meshed && before) {
      await this.ctx.phase('scraping the destination proxy');
      const after = await this.scrapeDestination(
        await this.ctx.cluster.listPods(server.namespace, `app=${server.service}`),
        server.namespace,
        reasons,
      );
      if (after) {
        try {
          mtlsMetrics = mtlsDelta(before, after);
        } catch (error) {
          rethrowOutage(error);
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

  readClientResult(run: NetworkRun, text: string, reasons: string[]): NetworkRunResult | undefined {
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

  /**
   * The destination's counters: on a sidecar cell the server pods' sidecars; on an ambient cell the
   * ztunnel pods (istio-system, `app=ztunnel`), counting only connections into the server's namespace.
   */
  async scrapeDestination(
    serverPods: readonly NetworkPodState[],
    serverNamespace: string,
    reasons: string[],
  ): Promise<MtlsMetricEvidence | undefined> {
    if (this.ctx.cell.mesh !== 'ambient') return this.scrapeSidecars(serverPods, reasons);
    const ztunnels = await this.ctx.cluster.listPods(ISTIO_SYSTEM_NAMESPACE, ZTUNNEL_POD_SELECTOR);
    if (ztunnels.length === 0) {
      reasons.push(
        `mTLS evidence missing: no ztunnel pod (${ISTIO_SYSTEM_NAMESPACE}, ${ZTUNNEL_POD_SELECTOR}) to read istio_tcp_connections_opened_total from`,
      );
      return undefined;
    }
    return this.scrapeSidecars(ztunnels, reasons, {
      destinationNamespace: serverNamespace,
      reporter: 'ztunnel',
    });
  }

  /** The pods' Istio counters, summed; undefined (with a reason) when a scrape fails. */
  async scrapeSidecars(
    pods: readonly NetworkPodState[],
    reasons: string[],
    options: Parameters<typeof mtlsCounters>[1] = {},
  ): Promise<MtlsMetricEvidence | undefined> {
    if (pods.length === 0) {
      reasons.push('mTLS evidence missing: no server pod found');
      return undefined;
    }
    const add = (into: Record<string, number>, from: Readonly<Record<string, number>> | undefined) => {
      for (const [p, n] of Object.entries(from ?? {})) into[p] = (into[p] ?? 0) + n;
    };
    const requestsBySecurityPolicy: Record<string, number> = {};
    const tcpConnectionsBySecurityPolicy: Record<string, number> = {};
    let tcpConnectionsOpened = 0;
    for (const pod of pods) {
      try {
        const counters = mtlsCounters(await this.ctx.sidecars.scrape(pod.podIp), options);
        add(requestsBySecurityPolicy, counters.requestsBySecurityPolicy);
        add(tcpConnectionsBySecurityPolicy, counters.tcpConnectionsBySecurityPolicy);
        tcpConnectionsOpened += counters.tcpConnectionsOpened;
      } catch (error) {
        rethrowOutage(error);
        reasons.push(
          `mTLS evidence missing: sidecar metrics of ${pod.namespace}/${pod.name} not read: ${(error as Error).message}`,
        );
        return undefined;
      }
    }
    return {
      requestsBySecurityPolicy,
      tcpConnectionsOpened,
      tcpConnectionsBySecurityPolicy,
      ...(options.reporter ? { reporter: options.reporter } : {}),
    };
  }

  /**
   * E2/E8: one curl Job per source (mtls-groups.ts), its curls one file per case; each case's
   * observed outcome beside the expected one, with the Job that observed it. A case whose file is
   * missing or does not parse is that case's reason alone: the other cases keep their outcomes.
   */
  async mtlsRun(run: NetworkRun, spec: MtlsRunSpec): Promise<KindOutcome> {
    const observedBy = new Map<string, MtlsCaseResult>();
    const pods: PodMeshEvidence[] = [];
    const reasons: string[] = [];
    let job: NetworkJobOutcome = 'succeeded';
    for (const group of mtlsClientGroups(spec.cases)) {
      await this.ctx.phase(`mTLS cases ${group.cases.map((c) => c.id).join(', ')}`);
      const name = mtlsGroupJobName(run.id, group.id);
      const files = group.cases.map((c) => mtlsCaseFile(c.id));
      const done = await this.ctx.jobs.runJob(run, this.planJob(run, name), files);
      pods.push(...done.pods.map(meshEvidence));
      if (done.outcome !== 'succeeded') job = done.outcome;
      for (const c of group.cases) {
        const text = done.files[mtlsCaseFile(c.id)];
        let observed = null;
        if (text === undefined)
          reasons.push(`case ${c.id}: job/${name} ${done.outcome} and left no ${mtlsCaseFile(c.id)}`);
        else {
          try {
            observed = curlOutcome(parseCurlResult(text));
          } catch (error) {
            rethrowOutage(error);
            reasons.push(`case ${c.id}: ${(error as Error).message}`);
          }
        }
        observedBy.set(c.id, { id: c.id, expected: c.expected, observed, job: name });
        await this.ctx.say(
          `${run.id} ${c.id}: expected HTTP ${c.expected.httpCode}/exit ${c.expected.curlExit}, observed ${observed ? `HTTP ${observed.httpCode}/exit ${observed.curlExit}` : 'nothing'} (job/${name})`,
        );
      }
    }
    // The record keeps the plan's case order, whatever the order of the Jobs.
    const cases = spec.cases.flatMap((c) => observedBy.get(c.id) ?? []);
    return { job, result: { kind: 'mtls', cases }, pods, reasons };
  }

  async namespaceLabelled(namespace: string): Promise<string | undefined> {
    const labels = await this.ctx.cluster.namespaceLabels(namespace);
    if (!labels) return `namespace ${namespace} does not exist`;
    const missing = Object.entries(meshNamespaceLabels(this.ctx.cell.mesh)).filter(
      ([k, v]) => labels[k] !== v,
    );
    if (missing.length === 0) return undefined;
    return `namespace ${namespace} lacks the label ${missing.map(([k, v]) => `${k}=${v}`).join(', ')} that mesh ${this.ctx.cell.mesh} needs (the cell's namespaces chart sets it)`;
  }

  /** Whether a pod joined the cell's mesh: a native sidecar, or ambient's redirection. */
  meshed(pod: NetworkPodState): boolean {
    if (this.ctx.cell.mesh === 'sidecar') return pod.hasSidecar;
    if (this.ctx.cell.mesh === 'ambient')
      return pod.annotations[AMBIENT_REDIRECTION_ANNOTATION] === 'enabled';
    return true;
  }

  /**
   * Pods outside the mesh are deleted and their replacements waited for; what was restarted is kept
   * for the run's record. On a sidecar cell such a pod was created before the label (or before
   * istiod's injector); on an ambient cell istio-cni did not enrol it, which it otherwise does for
   * every pod, retrying until ztunnel accepts it, except after a failure it does not retry
   * (docs/facts.md §N2): a new pod is then enrolled at its creation.
   */
  async podsRestarted(runId: string, namespace: string): Promise<string | undefined> {
    const selector = '!job-name';
    const stale = (await this.ctx.cluster.listPods(namespace, selector)).filter((pod) => !this.meshed(pod));
    for (const pod of stale) {
      await this.ctx.say(
        `pod ${namespace}/${pod.name} is not in the mesh (created before the label?): deleting it`,
      );
      await this.ctx.cluster.deletePod(namespace, pod.name);
    }
    // The evidence the smoke checklist shows: after a normal bootstrap there is none to restart
    // on a sidecar cell (docs/facts.md §N2), so a restart says the cell was set up otherwise.
    this.restarts.set(runId, [
      ...(this.restarts.get(runId) ?? []),
      { namespace, restarted: stale.map((p) => p.name) },
    ]);
    const staleUids = new Set(stale.map((p) => p.uid));
    return this.ctx.jobs.waitFor(`pods of ${namespace} in the mesh and ready`, async () => {
      const pods = await this.ctx.cluster.listPods(namespace, selector);
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
}
