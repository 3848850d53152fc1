import type { KubeObject } from '../kube/cluster-api.ts';

/**
 * When an applied object is ready for what comes after it, judged from the object as the API
 * returns it. Pure. The workload rules are kubectl's `rollout status` (kubectl
 * pkg/polymorphichelpers/rollout_status.go, DeploymentStatusViewer / DaemonSetStatusViewer /
 * StatefulSetStatusViewer, read through the code index at an unpinned commit), so `lab install`
 * waits exactly where docs/cluster.md's kubectl commands waited.
 */

export type Readiness = { readonly ready: true } | { readonly ready: false; readonly waiting: string };

const READY: Readiness = { ready: true };
const waiting = (why: string): Readiness => ({ ready: false, waiting: why });

interface Condition {
  readonly type?: string;
  readonly status?: string;
  readonly reason?: string;
  readonly message?: string;
}

interface WorkloadStatus {
  readonly observedGeneration?: number;
  readonly replicas?: number;
  readonly updatedReplicas?: number;
  readonly readyReplicas?: number;
  readonly availableReplicas?: number;
  readonly desiredNumberScheduled?: number;
  readonly updatedNumberScheduled?: number;
  readonly numberAvailable?: number;
  readonly conditions?: readonly Condition[];
}

/** The kinds `lab install` waits for; everything else is ready once the API accepted it. */
export const WAITED_KINDS = [
  'CustomResourceDefinition',
  'PersistentVolumeClaim',
  'Deployment',
  'StatefulSet',
  'DaemonSet',
] as const;

export function readinessOf(object: KubeObject): Readiness {
  const status = (object.status ?? {}) as WorkloadStatus;
  const generation = object.metadata.generation ?? 0;
  const observed = status.observedGeneration ?? 0;
  switch (object.kind) {
    case 'CustomResourceDefinition': {
      const established = status.conditions?.find((c) => c.type === 'Established');
      if (established?.status === 'True') return READY;
      const names = status.conditions?.find((c) => c.type === 'NamesAccepted');
      if (names?.status === 'False')
        return waiting(`names not accepted: ${names.message ?? names.reason ?? ''}`);
      return waiting('not established yet');
    }
    case 'PersistentVolumeClaim': {
      const phase = (object.status as { phase?: string } | undefined)?.phase ?? 'Pending';
      if (phase === 'Bound') return READY;
      return waiting(`${phase}, no volume bound yet (StorageClass ${claimClass(object)})`);
    }
    case 'Deployment': {
      if (observed < generation) return waiting('spec update not observed yet');
      const failed = status.conditions?.find(
        (c) => c.type === 'Progressing' && c.reason === 'ProgressDeadlineExceeded',
      );
      if (failed) return waiting(`exceeded its progress deadline: ${failed.message ?? ''}`);
      const wanted = specReplicas(object);
      const updated = status.updatedReplicas ?? 0;
      if (updated < wanted) return waiting(`${updated} of ${wanted} new replicas updated`);
      if ((status.replicas ?? 0) > updated)
        return waiting(`${(status.replicas ?? 0) - updated} old replicas pending termination`);
      const available = status.availableReplicas ?? 0;
      if (available < updated) return waiting(`${available} of ${updated} updated replicas available`);
      return READY;
    }
    case 'StatefulSet': {
      if (observed < generation) return waiting('spec update not observed yet');
      const wanted = specReplicas(object);
      const ready = status.readyReplicas ?? 0;
      if (ready < wanted) return waiting(`${ready} of ${wanted} pods ready`);
      const updated = status.updatedReplicas ?? 0;
      if (updated < wanted) return waiting(`${updated} of ${wanted} pods updated`);
      return READY;
    }
    case 'DaemonSet': {
      if (observed < generation) return waiting('spec update not observed yet');
      const desired = status.desiredNumberScheduled ?? 0;
      // kubectl calls a DaemonSet on no node rolled out; for the lab it means no node matched.
      if (desired === 0)
        return waiting('scheduled on no node: no node matches its node selector and tolerations');
      const updated = status.updatedNumberScheduled ?? 0;
      if (updated < desired) return waiting(`${updated} of ${desired} updated pods scheduled`);
      const available = status.numberAvailable ?? 0;
      if (available < desired) return waiting(`${available} of ${desired} updated pods available`);
      return READY;
    }
    default:
      return READY;
  }
}

function claimClass(object: KubeObject): string {
  return (
    (object.spec as { storageClassName?: string } | undefined)?.storageClassName ??
    '(none: no default StorageClass)'
  );
}

/** What to do when an object never became ready, where the lab knows more than "describe it". */
export function stopHint(object: KubeObject): string | undefined {
  if (object.kind !== 'PersistentVolumeClaim') return undefined;
  return `No volume was provisioned for the results claim from StorageClass ${claimClass(object)}: check that its provisioner runs (kubectl get storageclass; on EKS the EBS CSI driver add-on) and has room, or set runner.results.storageClassName to a class that provisions here`;
}

function specReplicas(object: KubeObject): number {
  const replicas = (object.spec as { replicas?: number } | undefined)?.replicas;
  return replicas ?? 1;
}
