import { status } from './fake-api-util.ts';
import { RbacPolicy, type RequestAttributes } from './fake-rbac-policy.ts';

/**
 * The fake API server's RBAC (test/kube/fake-api-server.ts): one list of refused permissions
 * (FakeApiOptions.denied), applied alike to requests (403 Forbidden) and to
 * SelfSubjectAccessReviews (allowed: false), subresources included, as the apiserver's one
 * authorizer answers both.
 */

/** One permission as an RBAC rule names it. */
export interface Permission {
  readonly verb: string;
  /** "" for the core group. */
  readonly group: string;
  readonly resource: string;
  readonly subresource?: string;
}

/** How `denied` names a permission: `get pods/proxy`, `patch jobs.batch`. */
export function permissionName(p: Permission): string {
  return `${p.verb} ${p.resource}${p.subresource ? `/${p.subresource}` : ''}${p.group ? `.${p.group}` : ''}`;
}

/** The Forbidden Status a refused request gets, or undefined when RBAC allows it. */
export function forbidden(
  denied: readonly string[],
  request: Permission & { readonly name?: string; readonly namespace?: string },
) {
  if (!denied.includes(permissionName(request))) return undefined;
  // The apiserver's Forbidden message (RBAC's authorizer reason left out).
  const what = `${request.resource}${request.subresource ? `/${request.subresource}` : ''}`;
  const group = request.group ? `.${request.group}` : '';
  const where = request.namespace ? ` in the namespace "${request.namespace}"` : ' at the cluster scope';
  return status(
    403,
    `${what}${group} "${request.name ?? ''}" is forbidden: User "tester" cannot ${request.verb} resource "${what}" in API group "${request.group}"${where}`,
  );
}

/** A SelfSubjectAccessReview as the client posts it (authorization.k8s.io/v1 ResourceAttributes). */
export interface AccessReview {
  readonly spec: {
    readonly resourceAttributes: {
      readonly verb: string;
      readonly group?: string;
      readonly resource: string;
      readonly subresource?: string;
      readonly namespace?: string;
    };
  };
}

/** The review answered: the same decision a request for it would get. */
export function answerReview(denied: readonly string[], review: AccessReview) {
  const a = review.spec.resourceAttributes;
  const allowed = !denied.includes(
    permissionName({
      verb: a.verb,
      group: a.group ?? '',
      resource: a.resource,
      ...(a.subresource ? { subresource: a.subresource } : {}),
    }),
  );
  return { ...review, status: { allowed } };
}

/** A SubjectAccessReview as the client posts it (authorization.k8s.io/v1 SubjectAccessReviewSpec). */
export interface SubjectReview {
  readonly spec: {
    readonly user: string;
    readonly groups?: readonly string[];
    readonly resourceAttributes?: AccessReview['spec']['resourceAttributes'] & { readonly name?: string };
    readonly nonResourceAttributes?: { readonly verb: string; readonly path: string };
  };
}

/**
 * A SubjectAccessReview answered as the apiserver's authorizer chain answers it: `othersDeny`
 * (another authorizer in front of RBAC: a webhook, a policy engine; `get pods/log`, `get /version`)
 * refuses first, then RBAC over the cluster's Roles, ClusterRoles and bindings (`objects`, as
 * applied) with the default roles every authenticated user has (fake-rbac-policy.ts).
 */
export function answerSubjectReview(
  objects: readonly Record<string, unknown>[],
  othersDeny: readonly string[],
  review: SubjectReview,
) {
  const { spec } = review;
  const r = spec.resourceAttributes;
  const request: RequestAttributes = spec.nonResourceAttributes
    ? { verb: spec.nonResourceAttributes.verb, path: spec.nonResourceAttributes.path }
    : {
        verb: r?.verb ?? '',
        group: r?.group ?? '',
        resource: r?.resource ?? '',
        ...(r?.subresource ? { subresource: r.subresource } : {}),
        ...(r?.namespace ? { namespace: r.namespace } : {}),
        ...(r?.name ? { name: r.name } : {}),
      };
  const named =
    'path' in request
      ? `${request.verb} ${request.path}`
      : permissionName({
          verb: request.verb,
          group: request.group,
          resource: request.resource,
          ...(request.subresource ? { subresource: request.subresource } : {}),
        });
  const denied = othersDeny.includes(named);
  const allowed =
    !denied && new RbacPolicy(objects).allows({ user: spec.user, groups: spec.groups ?? [] }, request);
  return {
    ...review,
    status: { allowed, ...(denied ? { denied: true, reason: 'denied by a webhook' } : {}) },
  };
}
