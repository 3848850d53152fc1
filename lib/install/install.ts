import { type ClusterApi, describeRef, KubeApiError, type KubeObject, refOf } from '../kube/cluster-api.ts';
import type { HelmPrerequisite, ManifestPrerequisite, Prerequisite } from '../prereqs/prerequisites.ts';
import { installCommand } from '../prereqs/prerequisites.ts';
import { pollUntil } from '../runner/poll.ts';
import type { Clock } from '../runner/ports.ts';
import {
  type ClusterCheck,
  type ClusterNeeds,
  clusterChecks,
  GPU_RESOURCE,
  nodesFor,
  storageClassInfo,
} from './cluster-checks.ts';
import { readinessOf, stopHint } from './readiness.ts';
import {
  groupOf,
  HELM_RELEASE_SELECTOR,
  type InstallStep,
  objectsOfYaml,
  resourceOfKind,
  WAIT_LIMITS_MS,
} from './steps.ts';

/**
 * `lab install`: the prerequisites and the lab's charts onto a cluster the user brings, in order,
 * each waited for as docs/cluster.md's kubectl commands wait, with a line of progress per step and
 * a stop that names the object that did not become ready.
 */

export interface InstallDeps {
  readonly api: ClusterApi;
  readonly clock: Clock;
  readonly write: (line: string) => void;
  /** Fetches a release asset (the prerequisites' URLs). */
  readonly download: (url: string) => Promise<string>;
}

export interface InstallPlan {
  readonly needs: ClusterNeeds;
  readonly steps: readonly InstallStep[];
  /** The chart holding the NVIDIA device plugin: skipped when the cluster already advertises GPUs. */
  readonly devicePluginChart: string;
  /** The chart holding the replicas: the GPUs must be advertised before it. */
  readonly replicasChart: string;
}

/** Why `lab install` stopped; the CLI prints the message alone and exits 1. */
export class InstallStopped extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InstallStopped';
  }
}

/** How often a wait looks again, and how often it says it is still waiting. */
const POLL_MS = 5_000;
const PROGRESS_EVERY_MS = 60_000;

export async function installLab(plan: InstallPlan, deps: InstallDeps): Promise<void> {
  const { api, write, clock } = deps;
  const started = clock.now().getTime();
  const version = await api.version();
  write(`cluster: context ${api.target.context} at ${api.target.server}, Kubernetes ${version}`);

  const checks = await checkCluster(plan, deps);
  for (const check of checks) write(checkLine(check));
  const failed = checks.filter((c) => c.outcome === 'fail');
  if (failed.length > 0) {
    throw new InstallStopped(
      `the cluster cannot run this configuration (${failed.length} check(s) failed, nothing was applied):\n${failed
        .map((c) => `  - ${c.message}\n    fix: ${c.fix}`)
        .join('\n')}`,
    );
  }
  const gpusAdvertised = checks.some((c) => c.id === 'gpus' && c.outcome === 'pass');

  for (const step of plan.steps) {
    switch (step.kind) {
      case 'manifest':
        await applyRelease(step.prerequisite, deps);
        break;
      case 'helm':
        await requireHelmRelease(step.prerequisite, deps);
        break;
      case 'chart':
        if (step.chart === plan.devicePluginChart && gpusAdvertised) {
          write(
            `${step.chart}: skipped: the GPU nodes already advertise ${GPU_RESOURCE} (a device plugin or the GPU operator runs); a second plugin would register the GPUs twice`,
          );
          break;
        }
        if (step.chart === plan.replicasChart && !gpusAdvertised) await waitForGpus(plan, deps);
        await applyObjects(step.chart, step.objects, deps);
        break;
      case 'after-apply':
        await rolloutRestart(step.step.namespace, step.step.deployment, step.step.title, deps);
        break;
    }
  }
  write(`installed in ${minutes(clock.now().getTime() - started)}`);
}

/** Nodes, RuntimeClasses and the access reviews, then the pure checks. */
async function checkCluster(plan: InstallPlan, deps: InstallDeps): Promise<ClusterCheck[]> {
  const { api } = deps;
  const nodes = await api.list('v1', 'Node');
  const runtimeClasses = (await api.list('node.k8s.io/v1', 'RuntimeClass')).map((rc) => rc.metadata.name);
  const storageClasses = (await api.list('storage.k8s.io/v1', 'StorageClass')).map(storageClassInfo);
  const questions = accessQuestions(plan);
  const refused: string[] = [];
  for (const q of questions) {
    if (!(await api.canI(q))) {
      refused.push(
        `${q.verb} ${q.resource}${q.group ? `.${q.group}` : ''}${q.namespace ? ` in ${q.namespace}` : ''}`,
      );
    }
  }
  const checks = clusterChecks(plan.needs, { nodes, runtimeClasses, refused, storageClasses });
  // Without a device plugin yet, a GPU count of zero is expected: the lab installs one first.
  return checks.map((check) =>
    check.id === 'gpus' &&
    check.outcome === 'fail' &&
    nodesFor(plan.needs.placement.replicas, nodes).length > 0 &&
    noGpuAdvertised(nodes, plan)
      ? {
          ...check,
          outcome: 'warn' as const,
          message: `${check.message}; no GPU is advertised yet, so the lab's device plugin (${plan.devicePluginChart}) is installed first and the GPUs are counted before the replicas`,
        }
      : check,
  );
}

function noGpuAdvertised(nodes: readonly KubeObject[], plan: InstallPlan): boolean {
  return nodesFor(plan.needs.placement.replicas, nodes).every((node) => {
    const allocatable = (node.status as { allocatable?: Record<string, string> } | undefined)?.allocatable;
    return !allocatable?.[GPU_RESOURCE] || allocatable[GPU_RESOURCE] === '0';
  });
}

/** One `patch` per kind and namespace the lab applies (server-side apply is a patch). */
function accessQuestions(plan: InstallPlan) {
  const seen = new Map<string, { verb: string; group: string; resource: string; namespace?: string }>();
  for (const step of plan.steps) {
    if (step.kind !== 'chart') continue;
    for (const object of step.objects) {
      const group = groupOf(object.apiVersion);
      const resource = resourceOfKind(object.kind);
      const namespace = object.metadata.namespace;
      const key = `${group}/${resource}/${namespace ?? ''}`;
      if (!seen.has(key))
        seen.set(key, { verb: 'patch', group, resource, ...(namespace ? { namespace } : {}) });
    }
  }
  return [...seen.values()];
}

function checkLine(check: ClusterCheck): string {
  return `  ${check.outcome.padEnd(4)}  ${check.message}`;
}

async function applyRelease(prerequisite: ManifestPrerequisite, deps: InstallDeps): Promise<void> {
  deps.write(`${prerequisite.id}: downloading ${prerequisite.url}`);
  let text: string;
  try {
    text = await deps.download(prerequisite.url);
  } catch (error) {
    throw new InstallStopped(
      `${prerequisite.title}: ${prerequisite.url} could not be downloaded: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const objects = objectsOfYaml(text, prerequisite.url);
  await applyObjects(prerequisite.id, objects, deps);
}

async function requireHelmRelease(prerequisite: HelmPrerequisite, deps: InstallDeps): Promise<void> {
  const secrets = await deps.api.list('v1', 'Secret', {
    namespace: prerequisite.namespace,
    labelSelector: `${HELM_RELEASE_SELECTOR(prerequisite.release)},status=deployed`,
  });
  if (secrets.length > 0) {
    deps.write(
      `${prerequisite.id}: Helm release ${prerequisite.release} is deployed in ${prerequisite.namespace}`,
    );
    return;
  }
  throw new InstallStopped(helmMissing(prerequisite));
}

function helmMissing(prerequisite: Prerequisite & { kind: 'helm' }): string {
  return `${prerequisite.title} is not installed: lab install does not run Helm. Install it, then run lab install again (what is applied stays applied):\n  ${installCommand(prerequisite)}`;
}

/** Applies a file's objects in order, then waits for each that has a readiness. */
async function applyObjects(step: string, objects: readonly KubeObject[], deps: InstallDeps): Promise<void> {
  const applied: KubeObject[] = [];
  for (const object of objects) {
    try {
      applied.push(await deps.api.apply(object));
    } catch (error) {
      if (error instanceof KubeApiError) {
        throw new InstallStopped(`${step}: applying ${describeRef(refOf(object))} failed: ${error.message}`);
      }
      throw error;
    }
  }
  deps.write(`${step}: applied ${objects.length} object(s)`);
  for (const object of applied) {
    const limit = WAIT_LIMITS_MS[object.kind];
    if (limit === undefined) continue;
    await waitReady(object, limit, deps);
  }
}

async function waitReady(object: KubeObject, limitMs: number, deps: InstallDeps): Promise<void> {
  const ref = refOf(object);
  const name = describeRef(ref);
  let lastProgress = deps.clock.now().getTime();
  const outcome = await pollUntil(
    async () => {
      const current = await deps.api.read(ref);
      if (!current) return { waiting: 'it is gone (deleted by someone else?)' };
      const readiness = readinessOf(current);
      return readiness.ready ? { done: true } : { waiting: readiness.waiting };
    },
    {
      clock: deps.clock,
      timeoutMs: limitMs,
      // A wait of minutes needs no look every 5 s: one every 1/60 of the limit, at least every 5 s.
      intervalMs: Math.max(POLL_MS, Math.round(limitMs / 60)),
      announce: async (waiting) => deps.write(`  waiting up to ${minutes(limitMs)} for ${name}: ${waiting}`),
      onWait: async () => {
        const now = deps.clock.now().getTime();
        if (now - lastProgress >= PROGRESS_EVERY_MS) {
          lastProgress = now;
          const current = await deps.api.read(ref);
          const readiness = current ? readinessOf(current) : undefined;
          deps.write(
            `  still waiting for ${name}: ${readiness && !readiness.ready ? readiness.waiting : 'gone'}`,
          );
        }
      },
    },
  );
  if ('timedOut' in outcome) {
    const last = await deps.api.read(ref);
    const hint = last ? stopHint(last) : undefined;
    throw new InstallStopped(
      `${name} did not become ready within ${minutes(limitMs)}: ${outcome.timedOut}. ${hint ? `${hint}. ` : ''}See why with: kubectl${ref.namespace ? ` -n ${ref.namespace}` : ''} describe ${ref.kind.toLowerCase()}/${ref.name} (and its pods' events); run lab install again once it is fixed.`,
    );
  }
  if (outcome.afterMs > 0) deps.write(`  ${name} ready after ${minutes(outcome.afterMs)}`);
}

/** After the lab's device plugin: the replicas need the GPUs advertised, which takes the plugin's registration. */
async function waitForGpus(plan: InstallPlan, deps: InstallDeps): Promise<void> {
  const outcome = await pollUntil(
    async () => {
      const nodes = await deps.api.list('v1', 'Node');
      const check = clusterChecks(plan.needs, { nodes, runtimeClasses: [], refused: [] }).find(
        (c) => c.id === 'gpus',
      );
      return check?.outcome === 'pass'
        ? { done: check.message }
        : { waiting: check?.message ?? 'no GPU nodes' };
    },
    {
      clock: deps.clock,
      timeoutMs: WAIT_LIMITS_MS.DaemonSet,
      intervalMs: POLL_MS,
      announce: async (waiting) => deps.write(`  waiting for the GPUs to be advertised: ${waiting}`),
    },
  );
  if ('timedOut' in outcome) {
    throw new InstallStopped(
      `the GPU nodes do not advertise enough ${GPU_RESOURCE}: ${outcome.timedOut}. Check the device plugin's pods (kubectl -n kube-system logs daemonset/nvidia-device-plugin) and that the nodes have the NVIDIA driver and container toolkit.`,
    );
  }
  deps.write(`  ${outcome.done}`);
}

/** `kubectl rollout restart`: a new pod-template annotation, then the rollout waited for. */
async function rolloutRestart(
  namespace: string,
  deployment: string,
  title: string,
  deps: InstallDeps,
): Promise<void> {
  const ref = { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment, namespace };
  const current = await deps.api.read(ref);
  if (!current) {
    throw new InstallStopped(`${title}: ${describeRef(ref)} does not exist: is its prerequisite installed?`);
  }
  deps.write(`${title}: restarting ${describeRef(ref)}`);
  // The annotation kubectl rollout restart sets (kubectl pkg/polymorphichelpers/objectrestarter.go).
  const restarted = await deps.api.apply({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: deployment, namespace },
    spec: {
      template: {
        metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': deps.clock.now().toISOString() } },
      },
    },
  });
  await waitReady(restarted, WAIT_LIMITS_MS.Deployment, deps);
}

function minutes(ms: number): string {
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
}
