import { BENCHMARK_LABEL } from '../../charts/benchmark-job.ts';
import { KubeApiError } from '../../lib/runner/kube-cluster.ts';
import type {
  Cluster,
  DeploymentState,
  JobObject,
  PodState,
  ResourceRef,
  ServiceObject,
} from '../../lib/runner/ports.ts';
import { studyArms } from '../../lib/study/arms.ts';
import type { BenchmarkSpec } from '../../lib/study/plan.ts';
import { frontEnd } from '../../lib/study/topology.ts';
import type { JobCounts } from '../../lib/study/validity.ts';
import { type FakeClusterOptions, UNSCHEDULABLE_MESSAGE } from './fake-cluster-setup.ts';
import { FakeEpps } from './fake-epp.ts';
import { ClientLoads } from './fake-load.ts';
import type { FakeReplica } from './fake-servers.ts';

export {
  type ClientBehaviour,
  type FakeClusterOptions,
  rehearsalDeps,
  UNSCHEDULABLE_MESSAGE,
} from './fake-cluster-setup.ts';
export {
  FakeClock,
  FakeEndpointPickers,
  FakeFrontEnds,
  FakeReplica,
  type ResetBehaviour,
} from './fake-servers.ts';

/** The gate a staged client's `--base-url` names (`http://gate-<id>.<ns>.svc...`), if any. */
function gateOf(job: JobObject): string | undefined {
  const containers = (job.spec.template as { spec: { containers: { args?: string[] }[] } }).spec.containers;
  const base = containers[0].args?.find((a) => a.startsWith('--base-url='))?.slice('--base-url='.length);
  const host = base ? new URL(base).hostname.split('.')[0] : undefined;
  return host?.startsWith('gate-') ? host : undefined;
}

interface FakeJob {
  readonly manifest: JobObject;
  readonly createdAt: number;
  doneAt: number;
  readonly outcome: 'succeeded' | 'failed' | 'never';
  /** The gate a staged client waits at, until it opens (then it runs as any client). */
  waitingAt?: string;
  /** Set by deleteJob: when the Job and its pods are gone. */
  goneAt?: number;
}

/**
 * An in-process cluster: creating a benchmark Job makes the fake replicas "serve" its prompts
 * (their counters move by the run's target: one replica, or split over the replicas behind a
 * front end), writes the client's result file where the real Job would, and the Job reports
 * status.succeeded (or status.failed) when its time is up.
 */
export class FakeCluster implements Cluster {
  readonly created: JobObject[] = [];
  readonly deletedPods: string[] = [];
  readonly restarted: string[] = [];
  /** Job lifecycle in order: `create job/x`, `delete job/x`, `gone job/x` (when the runner sees it gone). */
  readonly events: string[] = [];
  private readonly jobs = new Map<string, FakeJob>();
  private readonly specs = new Map<string, BenchmarkSpec>();
  private readonly runOf = new Map<string, string>();
  private readonly deployments = new Map<
    string,
    { generation: number; observedAt: number; restartedAt?: number }
  >();
  private readonly podReadyAt = new Map<string, number>();
  /** Services by name: the front ends' in the lab namespace, and the gates the runner makes. */
  readonly services = new Map<
    string,
    { spec: Record<string, unknown>; labels: Readonly<Record<string, string>> }
  >();
  /** Happens once: the restarted runner finds the Job. */
  private leaveJobAtRun: string | undefined;
  private outageDone = false;
  private pollErrors = 0;
  /** Job polls answered with HTTP 500 so far. */
  pollErrorsAnswered = 0;
  /** The clients' loads, served over time (fake-load.ts). */
  private readonly loads: ClientLoads;
  /** The llm-d EPPs' pods and logs. */
  private readonly epps: FakeEpps;

  constructor(private readonly o: FakeClusterOptions) {
    this.leaveJobAtRun = o.leaveJobAtRun;
    this.epps = new FakeEpps(o.config, o.eppScorer);
    this.loads = new ClientLoads({
      config: o.config,
      clock: o.clock,
      resultsDir: o.resultsDir,
      hitRate: o.hitRate,
      pairReplicas: (pair) => this.pairReplicas(pair),
      onServed: (spec, index, before, add, rate, now) =>
        this.epps.scored(spec, index, before, add, rate, now),
    });
    for (const r of o.replicas) {
      r.clock = o.clock;
      r.beforeAnswer = () => this.tick();
    }
    for (let pair = 0; pair < o.config.study.parallelism; pair++) {
      for (const arm of studyArms(o.config)) {
        const fe = frontEnd(o.config, arm, pair);
        if (fe.namespace !== o.config.namespace) continue;
        this.services.set(fe.service, {
          spec: {
            type: 'ClusterIP',
            clusterIP: '10.43.7.12',
            clusterIPs: ['10.43.7.12'],
            selector: { app: fe.service },
            ports: [{ name: 'http', port: fe.port, targetPort: fe.port, protocol: 'TCP' }],
            sessionAffinity: 'None',
            internalTrafficPolicy: 'Cluster',
          },
          labels: {},
        });
      }
    }
    for (const gate of o.leftoverGates ?? []) {
      this.services.set(gate, {
        spec: { type: 'ClusterIP', ports: [{ port: 8000 }] },
        labels: { 'app.kubernetes.io/part-of': 'llm-gateway-lab', 'app.kubernetes.io/component': 'gate' },
      });
    }
    for (const run of o.plan.runs) {
      for (const spec of run.benchmarks) {
        this.specs.set(spec.id, spec);
        this.runOf.set(spec.id, run.id);
      }
    }
  }

  async createJob(job: JobObject): Promise<void> {
    const id = job.metadata.labels[BENCHMARK_LABEL];
    const spec = this.specs.get(id);
    if (!spec) throw new Error(`fake cluster: no benchmark ${id}`);
    if (this.o.throwAtRun && this.runOf.get(id) === this.o.throwAtRun) {
      throw new Error(`fake cluster: interrupted at ${this.o.throwAtRun}`);
    }
    if (this.liveJob(job.metadata.name))
      throw new KubeApiError(
        'POST',
        `/apis/batch/v1/namespaces/${job.metadata.namespace}/jobs`,
        409,
        `{"kind":"Status","reason":"AlreadyExists","message":"jobs.batch "${job.metadata.name}" already exists"}`,
      );
    if (this.leaveJobAtRun && this.runOf.get(id) === this.leaveJobAtRun) {
      this.leaveJobAtRun = undefined;
      this.events.push(`create job/${job.metadata.name}`);
      // The client runs on without its runner: its load reaches the replicas until it is deleted.
      const now = this.o.clock.ms;
      const running = this.startClient(job, spec, now, now + (this.o.jobStartSeconds ?? 0) * 1000);
      this.jobs.set(job.metadata.name, { ...running, outcome: 'never' });
      throw new Error(`fake cluster: runner killed after creating job/${job.metadata.name}`);
    }
    this.created.push(job);
    this.events.push(`create job/${job.metadata.name}`);
    const now = this.o.clock.ms;
    this.pollErrors = this.o.pollErrorsAfterCreate ?? 0;
    if (this.o.unschedulableAtRun && this.runOf.get(id) === this.o.unschedulableAtRun) {
      this.jobs.set(job.metadata.name, { manifest: job, createdAt: now, doneAt: 0, outcome: 'never' });
      return;
    }
    const startMs = (this.o.jobStartSeconds ?? 0) * 1000;
    const gate = gateOf(job);
    if (gate) {
      const waiting: FakeJob = this.o.stagedClientsEnd
        ? { manifest: job, createdAt: now, doneAt: now + startMs, outcome: 'failed' }
        : {
            manifest: job,
            createdAt: now,
            doneAt: Number.POSITIVE_INFINITY,
            outcome: 'succeeded',
            waitingAt: gate,
          };
      this.jobs.set(job.metadata.name, waiting);
      return;
    }
    this.jobs.set(job.metadata.name, this.startClient(job, spec, now, now + startMs));
  }

  /** A client sends its load from `from` on, spread over the `jobSeconds` until it ends. */
  private startClient(job: JobObject, spec: BenchmarkSpec, createdAt: number, from: number): FakeJob {
    const outage = this.o.outageAtRun;
    if (outage && this.runOf.get(spec.id) === outage.run && !this.outageDone) {
      this.outageDone = true;
      const at = from + outage.afterSeconds * 1000;
      this.o.replicas[outage.replica].outage = {
        from: at,
        until: at + outage.seconds * 1000,
        keepsUid: outage.keepsUid,
      };
    }
    const b = this.o.behaviour?.[spec.id] ?? {};
    if (b.failAfterSeconds !== undefined) {
      return { manifest: job, createdAt, doneAt: from + b.failAfterSeconds * 1000, outcome: 'failed' };
    }
    const completed = b.completed ?? spec.prompts;
    const doneAt = from + (this.o.jobSeconds ?? 120) * 1000;
    this.loads.serve(
      job.metadata.name,
      spec,
      completed + 1,
      from,
      doneAt,
      b.noResultFile ? undefined : completed,
    );
    if (b.metricsVanish) for (const r of this.o.replicas) r.blankScrapes = 1;
    return { manifest: job, createdAt, doneAt, outcome: b.hangs ? 'never' : 'succeeded' };
  }

  async getServiceSpec(name: string): Promise<Record<string, unknown> | undefined> {
    const service = this.services.get(name);
    return service ? structuredClone(service.spec) : undefined;
  }

  async createService(service: ServiceObject): Promise<void> {
    const { name, namespace, labels } = service.metadata;
    const path = `/api/v1/namespaces/${namespace}/services`;
    if (namespace !== this.o.config.namespace)
      throw new Error(`fake cluster: service/${name} in ${namespace}`);
    if (this.services.has(name))
      throw new KubeApiError(
        'POST',
        path,
        409,
        `{"kind":"Status","message":"services "${name}" already exists"}`,
      );
    if ('selector' in service.spec) throw new Error(`fake cluster: gate service/${name} has a selector`);
    this.events.push(`create service/${name}`);
    this.services.set(name, { spec: structuredClone({ ...service.spec }), labels });
  }

  /** A gate opens: the clients waiting at it send their load once their own start is done. */
  async setServiceSelector(name: string, selector: Readonly<Record<string, string>>): Promise<void> {
    const service = this.services.get(name);
    if (!service)
      throw new KubeApiError('PATCH', `/api/v1/namespaces/x/services/${name}`, 404, '{"kind":"Status"}');
    service.spec.selector = { ...selector };
    this.events.push(`open service/${name}`);
    const now = this.o.clock.ms;
    for (const [jobName, job] of this.jobs) {
      if (job.waitingAt !== name || job.goneAt !== undefined) continue;
      const spec = this.specs.get(job.manifest.metadata.labels[BENCHMARK_LABEL]) as BenchmarkSpec;
      const ready = job.createdAt + (this.o.jobStartSeconds ?? 0) * 1000;
      this.jobs.set(jobName, this.startClient(job.manifest, spec, job.createdAt, Math.max(now, ready)));
    }
  }

  async deleteService(name: string): Promise<void> {
    if (this.services.delete(name)) this.events.push(`delete service/${name}`);
  }

  async listServiceNames(labelSelector: string): Promise<string[]> {
    const wanted = labelSelector.split(',').map((kv) => kv.split('='));
    return [...this.services]
      .filter(([, s]) => wanted.every(([k, v]) => s.labels[k] === v))
      .map(([name]) => name);
  }

  async getJob(name: string): Promise<JobCounts | undefined> {
    this.tick();
    const path = `/apis/batch/v1/namespaces/${this.o.config.namespace}/jobs/${name}`;
    if (this.o.pollStatus !== undefined) {
      throw new KubeApiError(
        'GET',
        path,
        this.o.pollStatus,
        '{"kind":"Status","message":"jobs.batch is forbidden"}',
      );
    }
    if (this.pollErrors > 0) {
      this.pollErrors--;
      this.pollErrorsAnswered++;
      throw new KubeApiError('GET', path, 500, '{"kind":"Status","message":"etcdserver: request timed out"}');
    }
    const job = this.liveJob(name);
    if (!job) return undefined;
    if (job.goneAt !== undefined) return { active: job.outcome === 'never' ? 1 : 0 };
    if (job.outcome === 'never' || this.o.clock.ms < job.doneAt) return { active: 1 };
    return job.outcome === 'succeeded' ? { succeeded: 1 } : { failed: 1 };
  }

  async deleteJob(name: string): Promise<void> {
    this.tick();
    const job = this.liveJob(name);
    if (!job || job.goneAt !== undefined) return;
    this.events.push(`delete job/${name}`);
    job.goneAt = this.o.clock.ms + (this.o.jobDeleteSeconds ?? 0) * 1000;
    // Its pod is being terminated: its client sends nothing more.
    this.loads.stop(name, this.o.clock.ms);
  }

  /** The benchmark Jobs that exist (the runner's selector is the component label). */
  async listJobNames(labelSelector: string): Promise<string[]> {
    this.tick();
    const wanted = labelSelector.split(',').map((kv) => kv.split('='));
    return [...this.jobs.keys()].filter((name) => {
      const job = this.liveJob(name);
      return job && wanted.every(([k, v]) => job.manifest.metadata.labels[k] === v);
    });
  }

  /** A Job that still exists; a deleted one whose time is up is removed here. */
  private liveJob(name: string): FakeJob | undefined {
    const job = this.jobs.get(name);
    if (job?.goneAt !== undefined && this.o.clock.ms >= job.goneAt) {
      this.jobs.delete(name);
      this.events.push(`gone job/${name}`);
      return undefined;
    }
    return job;
  }

  async listPods(labelSelector: string): Promise<PodState[]> {
    this.tick();
    const [key, value] = labelSelector.split('=');
    const served = this.o.config.model.servedName;
    if (key === 'app' && [served, `${served}-kv`, `${served}-b`].includes(value)) {
      return this.pairReplicas(value.endsWith('-b') ? 1 : 0).map((r, i) => {
        const down = r.down();
        return {
          name: `${value}-${i}`,
          uid: r.uid,
          ready: !down && this.o.clock.ms >= (this.podReadyAt.get(r.pod) ?? 0),
        };
      });
    }
    const epp = key === 'app' ? this.epps.podsOf(value) : undefined;
    if (epp) return epp;
    const job = key === 'job-name' ? this.liveJob(value) : undefined;
    if (job) {
      const id = job.manifest.metadata.labels[BENCHMARK_LABEL];
      const stuck =
        this.o.unschedulableAtRun !== undefined && this.runOf.get(id) === this.o.unschedulableAtRun;
      return [
        {
          name: `${value}-x7k2p`,
          uid: value,
          ready: false,
          ...(stuck ? { unschedulable: UNSCHEDULABLE_MESSAGE } : {}),
        },
      ];
    }
    return [];
  }

  /**
   * The fake replica behind a pod of either server set (`qwen3-1` and `qwen3-kv-1` are
   * replicas[1]); with two replica pairs `qwen3-b-1` is the second pair's (replicas[R + 1]).
   */
  private replicaOf(name: string): FakeReplica | undefined {
    const match = new RegExp(`^${this.o.config.model.servedName}(-kv)?(-b)?-(\\d+)$`).exec(name);
    return match ? this.pairReplicas(match[2] ? 1 : 0)[Number(match[3])] : undefined;
  }

  /** The fake replicas of a replica pair: `vllm.replicas` of them each, pair 0 first. */
  private pairReplicas(pair: number): readonly FakeReplica[] {
    const size = this.o.config.vllm.replicas;
    return this.o.config.study.parallelism > 1
      ? this.o.replicas.slice(pair * size, (pair + 1) * size)
      : this.o.replicas;
  }

  async deletePod(name: string, uid?: string): Promise<void> {
    this.tick();
    const replica = this.replicaOf(name);
    if (!replica) throw new Error(`fake cluster: no pod ${name}`);
    // The uid precondition (the Cluster port's contract): the pod of that name is now another
    // one, its replacement, which stays.
    if (uid !== undefined && uid !== replica.uid) {
      this.events.push(`kept pod/${name}: not uid ${uid}`);
      return;
    }
    this.deletedPods.push(name);
    this.events.push(`delete pod/${name}`);
    replica.restart();
    // The new pod loads its model for a while.
    this.podReadyAt.set(
      name,
      replica.neverReadyAfterRestart ? Number.POSITIVE_INFINITY : this.o.clock.ms + 90_000,
    );
  }

  async podLog(name: string, container?: string, since?: Date): Promise<string> {
    const replica = this.replicaOf(name);
    if (replica) {
      if (container !== 'vllm') throw new Error(`fake cluster: ${name} has no container ${container}`);
      // sinceTime has whole seconds.
      return replica.logSince(since ? Math.floor(since.getTime() / 1000) * 1000 : undefined);
    }
    const epp = this.epps.logOf(
      name,
      container,
      since ? Math.floor(since.getTime() / 1000) * 1000 : undefined,
    );
    if (epp !== undefined) return epp;
    return `============ Serving Benchmark Result ============\n(log of ${name})\n`;
  }

  async resourceStatus(ref: ResourceRef): Promise<Record<string, unknown> | undefined> {
    this.events.push(`status ${ref.plural}/${ref.name}`);
    return this.o.statuses?.[`${ref.plural}/${ref.name}`];
  }

  async restartDeployment(name: string, at: Date): Promise<void> {
    if (!/^(vllm-router-|qwen3-)/.test(name)) throw new Error(`fake cluster: no deployment ${name}`);
    const d = this.deployments.get(name) ?? { generation: 1, observedAt: 0 };
    // The same restartedAt again changes nothing in the pod template: no new generation, no rollout.
    if (d.restartedAt === at.getTime()) return;
    this.restarted.push(name);
    this.epps.restart(name, at.getTime());
    // The new pod is ready 20 s after the restart.
    this.deployments.set(name, {
      generation: d.generation + 1,
      observedAt: at.getTime() + 20_000,
      restartedAt: at.getTime(),
    });
  }

  async getDeployment(name: string): Promise<DeploymentState | undefined> {
    const d = this.deployments.get(name) ?? { generation: 1, observedAt: 0 };
    const rolled = this.o.clock.ms >= d.observedAt;
    return {
      generation: d.generation,
      observedGeneration: rolled ? d.generation : d.generation - 1,
      desired: 1,
      total: rolled ? 1 : 2,
      updated: rolled ? 1 : 0,
      available: 1,
    };
  }

  async serverVersion(): Promise<string> {
    return 'v1.33.4+k3s1';
  }

  /** Serves every client's load up to now (fake-load.ts). */
  tick(): void {
    this.loads.tick();
  }
}
