import {
  type AccessQuestion,
  type AccessSubject,
  type ClusterApi,
  describeAccess,
  KubeApiError,
  type KubeObject,
  type UrlAccessQuestion,
} from '../kube/cluster-api.ts';
import type { ClusterCheck } from './cluster-checks.ts';

/**
 * Whether the study runner's ServiceAccount may do, on this cluster, everything the runner does
 * at run time: one SubjectAccessReview per permission its chart grants (charts/study-runner.ts;
 * test/runner/runner-rbac.test.ts proves those are exactly the runner's API calls), plus what the
 * cluster's default roles must grant it. Without this a missing permission (another authorizer,
 * a hardened default role) would surface only in the middle of a study, as a 403. The facts it
 * relies on (RBAC's matching, the default roles, a ServiceAccount's user and groups) are
 * docs/facts.md §6.6.
 */

/** The runner's access, as `lab install` applies it and reviews it. */
export interface RunnerAccess {
  /** The ServiceAccount the runner's pod runs as. */
  readonly serviceAccount: { readonly namespace: string; readonly name: string };
  /** Its ServiceAccount, Roles, ClusterRoles and bindings (the runner chart without its Job and ConfigMap). */
  readonly objects: readonly KubeObject[];
  /** Every permission the runner needs, one per review. */
  readonly questions: readonly (AccessQuestion | UrlAccessQuestion)[];
}

/**
 * What the runner calls that no lab chart grants: `GET /version` (lib/runner/kube-cluster.ts
 * serverVersion, the recorded k3s version), which the default roles `system:discovery` and
 * `system:public-info-viewer` grant every authenticated user (kubernetes
 * plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go `clusterRoles`, `clusterRoleBindings`;
 * docs/facts.md §6.6). Hardened clusters may remove it, so it is reviewed like the chart's grants.
 */
export const CLUSTER_DEFAULT_ACCESS: readonly UrlAccessQuestion[] = [{ verb: 'get', path: '/version' }];

const RBAC_KINDS = new Set(['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding']);

/** One rule of a Role or ClusterRole (rbac.authorization.k8s.io/v1 PolicyRule). */
export interface Rule {
  readonly verbs: readonly string[];
  readonly apiGroups?: readonly string[];
  readonly resources?: readonly string[];
  readonly resourceNames?: readonly string[];
  readonly nonResourceURLs?: readonly string[];
}

/** The runner's access from its chart's objects (studyRunnerObjects). */
export function runnerAccess(
  chartObjects: readonly KubeObject[],
  serviceAccount: RunnerAccess['serviceAccount'],
): RunnerAccess {
  const objects = chartObjects.filter((o) => RBAC_KINDS.has(o.kind));
  const questions: (AccessQuestion | UrlAccessQuestion)[] = [];
  for (const binding of objects) {
    if (binding.kind !== 'RoleBinding' && binding.kind !== 'ClusterRoleBinding') continue;
    const subjects = (binding.subjects ?? []) as { kind: string; name: string; namespace?: string }[];
    const bound = subjects.some(
      (s) =>
        s.kind === 'ServiceAccount' &&
        s.name === serviceAccount.name &&
        s.namespace === serviceAccount.namespace,
    );
    if (!bound) continue;
    const ref = binding.roleRef as { kind: string; name: string };
    const namespace = binding.kind === 'RoleBinding' ? binding.metadata.namespace : undefined;
    const role = objects.find(
      (o) =>
        o.kind === ref.kind &&
        o.metadata.name === ref.name &&
        (o.kind === 'ClusterRole' || o.metadata.namespace === namespace),
    );
    for (const rule of (role?.rules ?? []) as Rule[]) questions.push(...questionsOf(rule, namespace));
  }
  return { serviceAccount, objects, questions: [...questions, ...CLUSTER_DEFAULT_ACCESS] };
}

function questionsOf(rule: Rule, namespace: string | undefined): (AccessQuestion | UrlAccessQuestion)[] {
  const out: (AccessQuestion | UrlAccessQuestion)[] = [];
  for (const verb of rule.verbs) {
    for (const path of rule.nonResourceURLs ?? []) out.push({ verb, path });
    for (const group of rule.apiGroups ?? []) {
      for (const combined of rule.resources ?? []) {
        const [resource, subresource] = combined.split('/');
        const names = rule.resourceNames?.length ? rule.resourceNames : [undefined];
        for (const name of names) {
          // A namespace object's own namespace is itself, as the API server reads its path.
          const where = namespace ?? (resource === 'namespaces' ? name : undefined);
          out.push({
            verb,
            group,
            resource,
            ...(subresource ? { subresource } : {}),
            ...(where ? { namespace: where } : {}),
            ...(name ? { name } : {}),
          });
        }
      }
    }
  }
  return out;
}

/**
 * The user the API server authenticates a ServiceAccount's token as, with its groups
 * (`system:serviceaccount:<ns>:<name>`; k8s.io/apiserver pkg/authentication/serviceaccount
 * MakeUsername and MakeGroupNames, plus `system:authenticated`).
 */
export function serviceAccountUser(sa: RunnerAccess['serviceAccount']): AccessSubject {
  return {
    user: `system:serviceaccount:${sa.namespace}:${sa.name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${sa.namespace}`, 'system:authenticated'],
  };
}

/** `kubectl auth can-i` for one question, as the ServiceAccount. */
export function canICommand(access: RunnerAccess, q: AccessQuestion | UrlAccessQuestion): string {
  const as = `--as=${serviceAccountUser(access.serviceAccount).user}`;
  if ('path' in q) return `kubectl auth can-i ${q.verb} ${q.path} ${as}`;
  const resource = `${q.resource}${q.group ? `.${q.group}` : ''}${q.name ? `/${q.name}` : ''}`;
  const sub = q.subresource ? ` --subresource=${q.subresource}` : '';
  const ns = q.namespace && q.resource !== 'namespaces' ? ` -n ${q.namespace}` : '';
  return `kubectl auth can-i ${q.verb} ${resource}${sub}${ns} ${as}`;
}

/**
 * The `runner-rbac` check. `applied`: the runner's Roles and bindings are in the cluster (after
 * `lab install` applied them), and every permission is reviewed; before, only what the cluster's
 * default roles must grant (CLUSTER_DEFAULT_ACCESS). A user who may not create
 * SubjectAccessReviews gets a warning with the commands that check it by hand.
 */
export async function checkRunnerAccess(
  api: ClusterApi,
  access: RunnerAccess,
  applied: boolean,
): Promise<ClusterCheck> {
  const sa = `${access.serviceAccount.namespace}/${access.serviceAccount.name}`;
  const subject = `ServiceAccount ${sa}`;
  const user = serviceAccountUser(access.serviceAccount);
  const notChecked = (why: string): ClusterCheck => ({
    id: 'runner-rbac',
    subject,
    outcome: 'warn',
    message: `not checked: ${why}, so whether the study runner may do the ${access.questions.length} things it does at run time was not asked; a missing permission would stop it mid-study with a 403`,
    fix: `ask someone who may (or impersonate it, which needs 'impersonate serviceaccounts'): kubectl auth can-i --list -n ${access.serviceAccount.namespace} --as=${user.user}, or each one, e.g. ${canICommand(access, access.questions[0])}`,
  });
  const reviewsAllowed = await api.canI({
    verb: 'create',
    group: 'authorization.k8s.io',
    resource: 'subjectaccessreviews',
  });
  if (!reviewsAllowed)
    return notChecked('the kubeconfig user may not create subjectaccessreviews.authorization.k8s.io');
  // Before the Roles are applied only what the cluster's default roles grant can be asked.
  const asked = applied ? access.questions : CLUSTER_DEFAULT_ACCESS;
  const refused: (AccessQuestion | UrlAccessQuestion)[] = [];
  for (const question of asked) {
    try {
      if (!(await api.canSubject(user, question))) refused.push(question);
    } catch (error) {
      if (error instanceof KubeApiError && error.kind === 'forbidden')
        return notChecked('the API server refused the kubeconfig user a SubjectAccessReview');
      throw error;
    }
  }
  if (refused.length === 0) {
    return {
      id: 'runner-rbac',
      subject,
      outcome: 'pass',
      message: applied
        ? `the study runner (${user.user}) may do all ${access.questions.length} things it does at run time (SubjectAccessReview each)`
        : `the study runner (${user.user}) may ${asked.map(describeAccess).join(', ')} (the cluster's default roles); its Roles and bindings are not applied yet: lab install applies them, then reviews each of its ${access.questions.length} permissions`,
    };
  }
  const missing = refused.map(describeAccess).join('; ');
  const defaults = refused.filter((q) => 'path' in q);
  return {
    id: 'runner-rbac',
    subject,
    outcome: 'fail',
    message: `the study runner (${user.user}) may not: ${missing}; it would stop mid-study on a 403`,
    fix: [
      ...(applied && refused.length > defaults.length
        ? [
            `the cluster has the Roles and bindings that grant these (${access.objects
              .filter((o) => o.kind.endsWith('Binding'))
              .map(
                (o) =>
                  `${o.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`,
              )
              .join(
                ', ',
              )}), so something else refuses them: another authorizer (a webhook, a policy engine) or an edited Role`,
          ]
        : []),
      ...(defaults.length > 0
        ? [
            `${defaults.map(describeAccess).join(', ')} is granted to every authenticated user by the default ClusterRoles system:discovery and system:public-info-viewer, which this cluster has narrowed: grant it to ${user.user}`,
          ]
        : []),
      `check each with ${canICommand(access, refused[0])}`,
    ].join('; '),
  };
}
