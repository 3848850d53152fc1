import type { FakeClusterState, FakeStorageClass, Stored } from './fake-api-types.ts';
import { keyOf, podSpecOf } from './fake-api-util.ts';

/**
 * Storage on the fake API server (test/kube/fake-api-server.ts): its StorageClasses, the
 * DefaultStorageClass admission, and claims that bind on the fake clock (Immediate, or
 * WaitForFirstConsumer once a live workload mounts them).
 */

/** The StorageClass objects of the options (the default one annotated as the cluster marks it). */
export function storageClassObjects(classes: readonly FakeStorageClass[]): Record<string, unknown>[] {
  return classes.map((sc) => ({
    apiVersion: 'storage.k8s.io/v1',
    kind: 'StorageClass',
    metadata: {
      name: sc.name,
      ...(sc.default ? { annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } } : {}),
    },
    provisioner: 'ebs.csi.aws.com',
    volumeBindingMode: sc.waitForFirstConsumer ? 'WaitForFirstConsumer' : 'Immediate',
  }));
}

/** The DefaultStorageClass admission: a claim that names no class gets the default one. */
export function withDefaultClass(state: FakeClusterState, claim: Stored['object']): void {
  const spec = (claim.spec ?? {}) as { storageClassName?: string };
  const fallback = (state.options.storageClasses ?? []).find((sc) => sc.default);
  if (spec.storageClassName === undefined && fallback) {
    claim.spec = { ...spec, storageClassName: fallback.name };
  }
}

/** The claims a workload's pod template mounts. */
export function claimsOf(object: Record<string, unknown>): string[] {
  const volumes =
    (podSpecOf(object) as { volumes?: { persistentVolumeClaim?: { claimName: string } }[] }).volumes ?? [];
  return volumes.flatMap((v) => (v.persistentVolumeClaim ? [v.persistentVolumeClaim.claimName] : []));
}

/** Bound once its class exists, after claimBindMs; with WaitForFirstConsumer only once a live workload mounts it. */
export function claimBound(state: FakeClusterState, stored: Stored): boolean {
  const spec = (stored.object.spec ?? {}) as { storageClassName?: string };
  const sc = (state.options.storageClasses ?? []).find((c) => c.name === spec.storageClassName);
  if (!sc || sc.provisions === false) return false;
  const name = stored.object.metadata.name;
  const consumer = [...state.objects.values()].some(
    (s) =>
      s.deletedAt === undefined &&
      ['Deployment', 'Job', 'StatefulSet'].includes(String(s.object.kind)) &&
      claimsOf(s.object).includes(String(name)),
  );
  if (sc.waitForFirstConsumer && !consumer) return false;
  return state.now - stored.changedAt >= (state.options.claimBindMs ?? 5_000);
}

/** Every claim the workload mounts is bound. */
export function claimsReady(state: FakeClusterState, object: Record<string, unknown>): boolean {
  const namespace = object.metadata as { namespace?: string } | undefined;
  return claimsOf(object).every((claim) => {
    const stored = state.objects.get(keyOf('v1', 'PersistentVolumeClaim', namespace?.namespace, claim));
    return stored !== undefined && claimBound(state, stored);
  });
}
