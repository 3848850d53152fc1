import type { NetworkRun, ServiceScaleRunSpec } from '../../network/study/model.ts';
import { PLAIN_NAMESPACE, SCALE_BACKEND, SCALE_SERVICE_LABEL } from '../../network/topology.ts';
import { rethrowOutage } from '../call-policy.ts';
import type { ServiceObject } from '../ports.ts';
import { formatElapsed } from '../status.ts';
import { countOf, ENTRIES_COMMANDS, entriesScript, keyValues } from './host-output.ts';
import { PROBE_SERVICE_LABEL, type ProbeOutcome, probeNewServices } from './new-service-probe.ts';
import { forEachLimited, type KindOutcome, type StepContext } from './runner-context.ts';

/** The Cilium agent's pods (the Helm chart's DaemonSet label) and the phrase its log uses when a BPF map is full. */
export const CILIUM_AGENT_SELECTOR = 'k8s-app=cilium';
export { PROBE_SERVICE_LABEL } from './new-service-probe.ts';
export const MAP_FULL_PATTERN = /map (is )?full/i;

/** The name of E9's i-th Service (`scale-00000` of the template, renumbered). */
export function scaleServiceName(template: ServiceObject, i: number): string {
  return template.metadata.name.replace(/\d+$/, (digits) => String(i).padStart(digits.length, '0'));
}

/** E9 (Services at scale): the step's N Services, the datapath's entries, and the prober on new Services. */
export class ServiceScaleSteps {
  private probeServices = 0;

  constructor(private readonly ctx: StepContext) {}

  /** E9: entries and the prober on new Services (N Services exist: a precondition; the plan's next run measures new connections). */
  async scaleRun(run: NetworkRun, spec: ServiceScaleRunSpec): Promise<KindOutcome> {
    const reasons: string[] = [];
    const ready = await this.ctx.cluster.servicesWithReadyEndpoints(
      PLAIN_NAMESPACE,
      `${SCALE_SERVICE_LABEL}=true`,
    );
    await this.ctx.phase('counting datapath entries');
    let entries = 0;
    try {
      const text = await this.ctx.jobs.hostOutput(
        `entries-${run.id}`,
        run.id,
        entriesScript(this.ctx.cell.datapath),
        this.ctx.cell.datapath === 'cilium',
      );
      entries = countOf(keyValues(text), 'entries', `${ENTRIES_COMMANDS[this.ctx.cell.datapath]}`);
    } catch (error) {
      rethrowOutage(error);
      reasons.push(`datapath entries not counted: ${(error as Error).message}`);
    }
    const lbMapFull = this.ctx.cell.datapath === 'cilium' ? await this.ciliumMapFull(reasons) : undefined;

    await this.ctx.phase('probing new Services');
    let probed: ProbeOutcome = { prober: null, job: 'failed', pods: [] };
    try {
      probed = await probeNewServices(this.ctx, run, spec, () => `probe-${++this.probeServices}`, reasons);
    } finally {
      await this.deleteServices(PROBE_SERVICE_LABEL);
    }
    const { job, pods, prober } = probed;
    return {
      job,
      result: {
        kind: 'service-scale',
        scale: {
          servicesReady: ready.size,
          entries,
          entriesCommand: ENTRIES_COMMANDS[this.ctx.cell.datapath],
          ...(lbMapFull !== undefined ? { lbMapFull } : {}),
          prober,
        },
      },
      pods,
      reasons,
    };
  }

  /** Whether a Cilium agent's log says a BPF map is full (docs/facts.md §N5). */
  async ciliumMapFull(reasons: string[]): Promise<boolean | undefined> {
    try {
      const agents = await this.ctx.cluster.listPods('kube-system', CILIUM_AGENT_SELECTOR);
      if (agents.length === 0) throw new Error(`no pod matches ${CILIUM_AGENT_SELECTOR} in kube-system`);
      for (const agent of agents) {
        if (MAP_FULL_PATTERN.test(await this.ctx.cluster.podLog('kube-system', agent.name, 'cilium-agent')))
          return true;
      }
      return false;
    } catch (error) {
      rethrowOutage(error);
      reasons.push(`Cilium agent log not read ("map full" unknown): ${(error as Error).message}`);
      return undefined;
    }
  }

  /** Exactly `count` E9 Services (created or deleted through the API, bounded concurrency), each with a ready endpoint. */
  async servicesReady(run: NetworkRun, count: number): Promise<string | undefined> {
    const template = this.ctx.deps.serviceTemplate;
    const selector = `${SCALE_SERVICE_LABEL}=true`;
    const concurrency =
      run.spec.kind === 'service-scale'
        ? run.spec.createConcurrency
        : this.ctx.config.network.experiments.serviceScale.createConcurrency;
    const wanted = new Set(Array.from({ length: count }, (_, i) => scaleServiceName(template, i)));
    const existing = new Set(
      (await this.ctx.cluster.listServices(PLAIN_NAMESPACE, selector)).map((s) => s.name),
    );
    const extra = [...existing].filter((n) => !wanted.has(n));
    const missing = [...wanted].filter((n) => !existing.has(n));
    if (extra.length > 0 || missing.length > 0) {
      await this.ctx.phase(
        `Services: creating ${missing.length}, deleting ${extra.length} (${concurrency} at once)`,
      );
      const started = this.ctx.deps.clock.now().getTime();
      await forEachLimited(extra, concurrency, (name) =>
        this.ctx.cluster.deleteService(PLAIN_NAMESPACE, name),
      );
      await forEachLimited(missing, concurrency, (name) =>
        this.ctx.cluster.createService({ ...template, metadata: { ...template.metadata, name } }),
      );
      await this.ctx.say(
        `${run.id}: ${count} Services wanted: ${missing.length} created, ${extra.length} deleted in ${formatElapsed(this.ctx.deps.clock.now().getTime() - started)}`,
      );
    }
    const backends = this.ctx.config.network.experiments.serviceScale.backendsPerService;
    return this.ctx.jobs.waitFor(`${count} Services with ${backends} ready backends each`, async () => {
      // Every E9 Service selects the same backend: its ready pods are each Service's endpoints.
      const backendPods = (await this.ctx.cluster.listPods(PLAIN_NAMESPACE, `app=${SCALE_BACKEND}`)).filter(
        (p) => p.ready && p.phase === 'Running',
      ).length;
      if (backendPods !== backends)
        return `${backendPods} ready ${SCALE_BACKEND} pods, ${backends} wanted (experiments.serviceScale.backendsPerService)`;
      const ready = await this.ctx.cluster.servicesWithReadyEndpoints(PLAIN_NAMESPACE, selector);
      const notReady = [...wanted].filter((n) => !ready.has(n)).length;
      const surplus = [...ready].filter((n) => !wanted.has(n)).length;
      if (notReady === 0 && surplus === 0) return undefined;
      return `${notReady} of ${count} without a ready endpoint${surplus ? `, ${surplus} not wanted still there` : ''}`;
    });
  }

  async deleteServices(label: string): Promise<number> {
    const services = await this.ctx.cluster.listServices(PLAIN_NAMESPACE, `${label}=true`);
    await forEachLimited(services, this.ctx.config.network.experiments.serviceScale.createConcurrency, (s) =>
      this.ctx.cluster.deleteService(PLAIN_NAMESPACE, s.name),
    );
    return services.length;
  }

  /** The end of the study (or its stop): the E9 Services go, so the cell is as the charts left it. */
  async deleteScaleServices(): Promise<void> {
    try {
      const scale = await this.deleteServices(SCALE_SERVICE_LABEL);
      const probes = await this.deleteServices(PROBE_SERVICE_LABEL);
      if (scale + probes > 0) await this.ctx.say(`deleted the ${scale + probes} Services the study created`);
    } catch (error) {
      rethrowOutage(error);
      await this.ctx.say(
        `the study's Services were not all deleted (kubectl -n ${PLAIN_NAMESPACE} delete service -l ${SCALE_SERVICE_LABEL}): ${(error as Error).message}`,
      );
    }
  }
}
