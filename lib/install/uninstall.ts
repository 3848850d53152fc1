import { labLabels } from '../../charts/labels.ts';
import { type ClusterApi, describeRef, type KubeObject, type ObjectRef, refOf } from '../kube/cluster-api.ts';
import { pollUntil } from '../runner/poll.ts';
import type { Clock } from '../runner/ports.ts';
import type { InstallPlan } from './plan.ts';

/**
 * `lab uninstall`: removes what `lab install` applied and what the study runner created, and
 * nothing else: an object is deleted only when it carries the lab's label. What it leaves (the
 * prerequisites, shared with other workloads) it names, with the command that would remove it.
 */

export interface UninstallDeps {
  readonly api: ClusterApi;
  readonly clock: Clock;
  readonly write: (line: string) => void;
  /**
   * Delete the results claim (and so the namespace that holds it) too.
   * @default false: the study's results outlive the lab until copied (`lab uninstall --delete-results`)
   */
  readonly deleteResults?: boolean;
}

/** Namespaces the lab never deletes, even when the configuration puts it there. */
const SHARED_NAMESPACES = new Set(['default', 'kube-system', 'kube-public', 'kube-node-lease']);

/** Kinds the runner creates at run time in the lab's namespace (Jobs, their pods, gates, its own RBAC). */
const RUN_TIME_KINDS = [
  ['batch/v1', 'Job'],
  ['v1', 'Pod'],
  ['v1', 'Service'],
  ['v1', 'ConfigMap'],
  ['v1', 'ServiceAccount'],
  ['rbac.authorization.k8s.io/v1', 'Role'],
  ['rbac.authorization.k8s.io/v1', 'RoleBinding'],
] as const;

const GONE_WITHIN_MS = 5 * 60_000;

export async function uninstallLab(plan: InstallPlan, namespace: string, deps: UninstallDeps): Promise<void> {
  const { api, write } = deps;
  write(`cluster: context ${api.target.context} at ${api.target.server}`);
  const [labelKey, labelValue] = Object.entries(labLabels())[0];
  const selector = `${labelKey}=${labelValue}`;
  const deleted: ObjectRef[] = [];
  const notOurs: string[] = [];

  const remove = async (ref: ObjectRef, current: KubeObject | undefined) => {
    if (!current) return;
    if (current.metadata.labels?.[labelKey] !== labelValue) {
      notOurs.push(describeRef(ref));
      return;
    }
    if ((await api.remove(ref)) === 'deleted') deleted.push(ref);
  };

  // What the runner made at run time first: a benchmark Job must not outlive the replicas it loads.
  for (const [apiVersion, kind] of RUN_TIME_KINDS) {
    for (const object of await api.list(apiVersion, kind, { namespace, labelSelector: selector })) {
      await remove(refOf(object), object);
    }
  }
  // The charts in reverse apply order; the namespace itself last.
  const charts = plan.steps.flatMap((step) => (step.kind === 'chart' ? [step] : [])).reverse();
  let namespaceObject: KubeObject | undefined;
  let keptResults: ObjectRef | undefined;
  for (const chart of charts) {
    for (const object of [...chart.objects].reverse()) {
      const ref = refOf(object);
      if (object.kind === 'Namespace') {
        namespaceObject = object;
        continue;
      }
      const current = await api.read(ref);
      if (object.kind === 'PersistentVolumeClaim' && current && !deps.deleteResults) {
        keptResults = ref;
        continue;
      }
      await remove(ref, current);
    }
  }
  if (keptResults) {
    write(
      `left ${describeRef(keptResults)} and namespace ${namespace}: the study's results (copy them with lab results; lab uninstall --delete-results removes them and the namespace)`,
    );
  } else if (namespaceObject) {
    const ref = refOf(namespaceObject);
    if (SHARED_NAMESPACES.has(ref.name)) {
      write(`namespace ${ref.name} is shared: left in place (only the lab's objects in it were deleted)`);
    } else {
      await remove(ref, await api.read(ref));
    }
  }
  write(`deleting ${deleted.length} object(s); waiting until they are gone`);
  const outcome = await pollUntil(
    async () => {
      const left: string[] = [];
      for (const ref of deleted) if (await api.read(ref)) left.push(describeRef(ref));
      return left.length === 0
        ? { done: true }
        : { waiting: `${left.length} still there: ${left.slice(0, 5).join(', ')}` };
    },
    {
      clock: deps.clock,
      timeoutMs: GONE_WITHIN_MS,
      intervalMs: 5_000,
      announce: async (waiting) => write(`  ${waiting}`),
    },
  );
  if ('timedOut' in outcome) {
    write(
      `warning: not gone after ${GONE_WITHIN_MS / 60_000} minutes: ${outcome.timedOut} (a finalizer may hold them; kubectl describe tells which)`,
    );
  } else {
    write(`removed ${deleted.length} object(s)`);
  }
  for (const name of notOurs)
    write(`left ${name}: it exists but does not carry ${selector}, so the lab did not create it`);
  for (const step of plan.steps) {
    if (step.kind === 'manifest' || step.kind === 'helm') {
      const how =
        step.kind === 'manifest'
          ? `kubectl delete -f ${step.prerequisite.url}`
          : `helm uninstall ${step.prerequisite.release} -n ${step.prerequisite.namespace}`;
      write(
        `left ${step.prerequisite.title} (a prerequisite other workloads may share; ${step.kind === 'helm' ? 'installed by you' : 'installed by lab install'}): remove it with ${how}`,
      );
    }
  }
}
