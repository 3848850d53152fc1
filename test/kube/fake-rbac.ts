import { status } from './fake-api-util.ts';

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
