import type { FakeClusterState, Stored } from './fake-api-types.ts';

/**
 * The kinds the fake API server serves (test/kube/fake-api-server.ts): the built-in ones the lab
 * touches, and those of every CRD once it is established (crdEstablishMs).
 */

export interface Resource {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly plural: string;
  readonly namespaced: boolean;
}

const BUILTIN: readonly Resource[] = [
  ['', 'v1', 'Namespace', 'namespaces', false],
  ['', 'v1', 'Node', 'nodes', false],
  ['', 'v1', 'Service', 'services', true],
  ['', 'v1', 'ConfigMap', 'configmaps', true],
  ['', 'v1', 'Secret', 'secrets', true],
  ['', 'v1', 'ServiceAccount', 'serviceaccounts', true],
  ['', 'v1', 'Pod', 'pods', true],
  ['', 'v1', 'PersistentVolumeClaim', 'persistentvolumeclaims', true],
  ['apps', 'v1', 'Deployment', 'deployments', true],
  ['apps', 'v1', 'StatefulSet', 'statefulsets', true],
  ['apps', 'v1', 'DaemonSet', 'daemonsets', true],
  ['batch', 'v1', 'Job', 'jobs', true],
  ['rbac.authorization.k8s.io', 'v1', 'Role', 'roles', true],
  ['rbac.authorization.k8s.io', 'v1', 'RoleBinding', 'rolebindings', true],
  ['rbac.authorization.k8s.io', 'v1', 'ClusterRole', 'clusterroles', false],
  ['rbac.authorization.k8s.io', 'v1', 'ClusterRoleBinding', 'clusterrolebindings', false],
  ['node.k8s.io', 'v1', 'RuntimeClass', 'runtimeclasses', false],
  ['storage.k8s.io', 'v1', 'StorageClass', 'storageclasses', false],
  ['apiextensions.k8s.io', 'v1', 'CustomResourceDefinition', 'customresourcedefinitions', false],
  ['authorization.k8s.io', 'v1', 'SelfSubjectAccessReview', 'selfsubjectaccessreviews', false],
  ['authorization.k8s.io', 'v1', 'SubjectAccessReview', 'subjectaccessreviews', false],
].map(([group, version, kind, plural, namespaced]) => ({
  group: group as string,
  version: version as string,
  kind: kind as string,
  plural: plural as string,
  namespaced: namespaced as boolean,
}));

/** A CRD is established crdEstablishMs after its last change. */
export function established(state: FakeClusterState, stored: Stored): boolean {
  return state.now - stored.changedAt >= (state.options.crdEstablishMs ?? 2_000);
}

/** The built-in kinds and every served version of each established, live CRD. */
export function servedResources(state: FakeClusterState): Resource[] {
  const crds = [...state.objects.values()].filter(
    (s) => s.object.kind === 'CustomResourceDefinition' && s.deletedAt === undefined && established(state, s),
  );
  const served = crds.flatMap((s) => {
    const spec = s.object.spec as {
      group: string;
      scope: string;
      names: { kind: string; plural: string };
      versions: { name: string; served?: boolean }[];
    };
    return spec.versions
      .filter((v) => v.served !== false)
      .map((v) => ({
        group: spec.group,
        version: v.name,
        kind: spec.names.kind,
        plural: spec.names.plural,
        namespaced: spec.scope === 'Namespaced',
      }));
  });
  return [...BUILTIN, ...served];
}

/** `GET /api/v1`, `GET /apis/<group>/<version>`: the kinds served there. */
export function resourceList(group: string, version: string, served: readonly Resource[]) {
  return {
    kind: 'APIResourceList',
    groupVersion: group === '' ? version : `${group}/${version}`,
    resources: served.map((r) => ({
      name: r.plural,
      kind: r.kind,
      namespaced: r.namespaced,
      singularName: '',
      verbs: [],
    })),
  };
}
