import type { Rule } from '../../lib/install/runner-access.ts';
import type { AccessQuestion, UrlAccessQuestion } from '../../lib/kube/cluster-api.ts';
import { status } from './fake-api-util.ts';

/**
 * The RBAC authorizer of the fake API servers, evaluated over Role, ClusterRole, RoleBinding and
 * ClusterRoleBinding objects as the charts synthesize them, for one subject (the study runner's
 * ServiceAccount). The rule matching is Kubernetes' own (kubernetes/kubernetes
 * pkg/apis/rbac/v1/evaluation_helpers.go at 03bf11a: VerbMatches, APIGroupMatches,
 * ResourceMatches with `resource/subresource` and `*\/subresource`, ResourceNameMatches with an
 * empty list matching every name, NonResourceURLMatches with a trailing `*`). A RoleBinding
 * grants only in its own namespace, a ClusterRoleBinding everywhere (docs/facts.md §6.6).
 */

/**
 * What the authorizer is asked: a request's attributes (k8s.io/apiserver authorizer.Attributes),
 * the same shape as the product's access questions.
 */
export type RequestAttributes = AccessQuestion | UrlAccessQuestion;

/** Who asks: a user name and its groups, as the authenticator gives them. */
export interface Subject {
  readonly user: string;
  readonly groups: readonly string[];
}

/**
 * A ServiceAccount as the API server authenticates its token: `system:serviceaccount:<ns>:<name>`
 * in the groups `system:serviceaccounts`, `system:serviceaccounts:<ns>` and `system:authenticated`.
 */
export function serviceAccountSubject(namespace: string, name: string): Subject {
  return {
    user: `system:serviceaccount:${namespace}:${name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
  };
}

interface RbacObject {
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string };
  readonly rules?: readonly Rule[];
  readonly roleRef?: { readonly kind: string; readonly name: string };
  readonly subjects?: readonly { kind: string; name: string; namespace?: string }[];
}

/**
 * What every authenticated user may read on a cluster with the default RBAC policy: the
 * bootstrap ClusterRoles `system:discovery` and `system:public-info-viewer`, bound to
 * `system:authenticated` (kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go).
 * `GET /version` is the runner's only use of them. Some hardened clusters remove `/version`
 * from these roles, which `lab install` finds by its access review.
 */
export const DEFAULT_AUTHENTICATED_RULES: readonly Rule[] = [
  { verbs: ['get'], nonResourceURLs: ['/healthz', '/livez', '/readyz', '/version', '/version/'] },
  { verbs: ['get'], nonResourceURLs: ['/api', '/api/*', '/apis', '/apis/*'] },
];

/** The rules that grant `subject` something, each with the namespace it applies in (none: everywhere). */
export interface GrantedRule {
  readonly rule: Rule;
  readonly namespace?: string;
}

export class RbacPolicy {
  private readonly objects: readonly RbacObject[];

  /** `objects` may hold anything: only the RBAC kinds are read. */
  constructor(objects: readonly Record<string, unknown>[]) {
    this.objects = (objects as unknown as RbacObject[]).filter((o) =>
      ['Role', 'ClusterRole', 'RoleBinding', 'ClusterRoleBinding'].includes(o.kind),
    );
  }

  /** Every rule bound to the subject, by the charts' bindings (the cluster's defaults left out). */
  rulesFor(subject: Subject): GrantedRule[] {
    const granted: GrantedRule[] = [];
    for (const binding of this.objects) {
      if (binding.kind !== 'RoleBinding' && binding.kind !== 'ClusterRoleBinding') continue;
      if (!(binding.subjects ?? []).some((s) => appliesTo(s, subject))) continue;
      const bindingNamespace = binding.kind === 'RoleBinding' ? binding.metadata.namespace : undefined;
      const ref = binding.roleRef;
      const role = this.objects.find(
        (o) =>
          o.kind === ref?.kind &&
          o.metadata.name === ref.name &&
          (o.kind === 'ClusterRole' || o.metadata.namespace === bindingNamespace),
      );
      for (const rule of role?.rules ?? []) {
        granted.push({ rule, ...(bindingNamespace ? { namespace: bindingNamespace } : {}) });
      }
    }
    return granted;
  }

  allows(subject: Subject, request: RequestAttributes): boolean {
    const defaults = subject.groups.includes('system:authenticated')
      ? DEFAULT_AUTHENTICATED_RULES.map((rule) => ({ rule }))
      : [];
    return [...this.rulesFor(subject), ...defaults].some((granted) => ruleAllows(granted, request));
  }

  /**
   * The 403 Status a refused request gets, or undefined: apiserver's forbiddenMessage
   * (pkg/endpoints/handlers/responsewriters/errors.go) inside apimachinery's NewForbidden, which
   * quotes the name only when there is one.
   */
  forbidden(subject: Subject, request: RequestAttributes): Record<string, unknown> | undefined {
    if (this.allows(subject, request)) return undefined;
    if ('path' in request) {
      return forbiddenStatus(
        `forbidden: User "${subject.user}" cannot ${request.verb} path "${request.path}"`,
      );
    }
    const what = `${request.resource}${request.subresource ? `/${request.subresource}` : ''}`;
    const group = request.group ? `.${request.group}` : '';
    const where = request.namespace ? ` in the namespace "${request.namespace}"` : ' at the cluster scope';
    return {
      ...forbiddenStatus(
        `${what}${group}${request.name ? ` "${request.name}"` : ''} is forbidden: User "${subject.user}" cannot ${request.verb} resource "${what}" in API group "${request.group}"${where}`,
      ),
      details: {
        ...(request.name ? { name: request.name } : {}),
        group: request.group,
        kind: request.resource,
      },
    };
  }
}

/** metav1.Status with reason Forbidden, as the apiserver writes it. */
function forbiddenStatus(message: string) {
  return { ...status(403, message), metadata: {}, reason: 'Forbidden' };
}

function appliesTo(s: { kind: string; name: string; namespace?: string }, subject: Subject): boolean {
  if (s.kind === 'ServiceAccount') return subject.user === `system:serviceaccount:${s.namespace}:${s.name}`;
  if (s.kind === 'User') return subject.user === s.name;
  if (s.kind === 'Group') return subject.groups.includes(s.name);
  return false;
}

export function ruleAllows(granted: GrantedRule, request: RequestAttributes): boolean {
  const { rule } = granted;
  if (!matches(rule.verbs, request.verb)) return false;
  if ('path' in request) {
    if (granted.namespace !== undefined) return false;
    return (rule.nonResourceURLs ?? []).some(
      (url) =>
        url === '*' ||
        url === request.path ||
        (url.endsWith('*') && request.path.startsWith(url.slice(0, -1))),
    );
  }
  if (granted.namespace !== undefined && granted.namespace !== request.namespace) return false;
  if (!matches(rule.apiGroups ?? [], request.group)) return false;
  const combined = request.subresource ? `${request.resource}/${request.subresource}` : request.resource;
  const resourceMatches = (rule.resources ?? []).some(
    (r) =>
      r === '*' || r === combined || (request.subresource !== undefined && r === `*/${request.subresource}`),
  );
  if (!resourceMatches) return false;
  const names = rule.resourceNames ?? [];
  return names.length === 0 || (request.name !== undefined && names.includes(request.name));
}

function matches(list: readonly string[], wanted: string): boolean {
  return list.includes('*') || list.includes(wanted);
}

/**
 * A request's attributes as the API server derives them from its method and path
 * (k8s.io/apiserver pkg/endpoints/request/requestinfo.go, RequestInfoFactory.NewRequestInfo):
 * `/api/v1/...` is the core group, `/apis/<group>/<version>/...` a named one, anything else a
 * non-resource URL; GET is `get` with a name and `list` (or `watch` with `watch=true`) without,
 * POST `create`, PUT `update`, PATCH `patch`, DELETE `delete` (or `deletecollection` without a
 * name); `/namespaces/<ns>` sets the namespace, and a namespace object's own path has itself as
 * both name and namespace.
 */
export function requestAttributes(method: string, pathAndQuery: string): RequestAttributes {
  const url = new URL(pathAndQuery, 'http://api');
  const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  const isResource = (parts[0] === 'api' && parts.length >= 3) || (parts[0] === 'apis' && parts.length >= 4);
  if (!isResource) return { verb: method.toLowerCase(), path: url.pathname };
  const group = parts[0] === 'api' ? '' : parts[1];
  let rest = parts.slice(parts[0] === 'api' ? 2 : 3);
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length > 1) {
    namespace = rest[1];
    if (rest.length > 2) rest = rest.slice(2);
  }
  const [resource, name, subresource] = rest;
  const verbs: Record<string, string> = {
    POST: 'create',
    PUT: 'update',
    PATCH: 'patch',
    DELETE: name ? 'delete' : 'deletecollection',
    GET: name ? 'get' : url.searchParams.get('watch') === 'true' ? 'watch' : 'list',
  };
  return {
    verb: verbs[method] ?? method.toLowerCase(),
    group,
    resource,
    ...(subresource ? { subresource } : {}),
    ...(namespace ? { namespace } : {}),
    ...(name ? { name } : {}),
  };
}

/** `list pods in vllm`, `get pods/log in kube-system`, `get namespaces plain`, `get /version`. */
export function describeRequest(request: RequestAttributes, withName = false): string {
  if ('path' in request) return `${request.verb} ${request.path}`;
  const resource = `${request.resource}${request.subresource ? `/${request.subresource}` : ''}${request.group ? `.${request.group}` : ''}`;
  const name = withName && request.name ? ` ${request.name}` : '';
  return `${request.verb} ${resource}${name}${request.namespace ? ` in ${request.namespace}` : ''}`;
}
