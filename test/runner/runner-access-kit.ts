import {
  describeRequest,
  type RbacPolicy,
  type RequestAttributes,
  ruleAllows,
  type Subject,
} from '../kube/fake-rbac-policy.ts';

/**
 * What a rehearsal's runner did on the API (kube-http-face.ts's AccessLog) against what the charts
 * grant its ServiceAccount: each granted permission (a rule's verb × group × resource × name, in
 * its namespace) that no request used, and the permissions used, named without object names.
 */

export interface GrantItem {
  /** `delete pods in mesh`, `get namespaces plain`, `get /metrics`. */
  readonly name: string;
  readonly matches: (request: RequestAttributes) => boolean;
}

/** Every single permission the charts grant the subject. */
export function grantItems(policy: RbacPolicy, subject: Subject): GrantItem[] {
  const items: GrantItem[] = [];
  for (const granted of policy.rulesFor(subject)) {
    const { rule, namespace } = granted;
    for (const verb of rule.verbs) {
      for (const url of rule.nonResourceURLs ?? []) {
        const one = { rule: { verbs: [verb], nonResourceURLs: [url] } };
        items.push({ name: `${verb} ${url}`, matches: (r) => ruleAllows(one, r) });
      }
      for (const group of rule.apiGroups ?? []) {
        for (const resource of rule.resources ?? []) {
          const names = rule.resourceNames?.length ? rule.resourceNames : [undefined];
          for (const name of names) {
            const one = {
              rule: {
                verbs: [verb],
                apiGroups: [group],
                resources: [resource],
                ...(name ? { resourceNames: [name] } : {}),
              },
              ...(namespace ? { namespace } : {}),
            };
            const [plain, sub] = resource.split('/');
            const described = describeRequest(
              {
                verb,
                group,
                resource: plain,
                ...(sub ? { subresource: sub } : {}),
                ...(namespace ? { namespace } : {}),
                ...(name ? { name } : {}),
              },
              true,
            );
            items.push({ name: described, matches: (r) => ruleAllows(one, r) });
          }
        }
      }
    }
  }
  return items;
}

/** The granted permissions no request of the log used. */
export function unusedGrants(
  policy: RbacPolicy,
  subject: Subject,
  requests: readonly RequestAttributes[],
): string[] {
  return grantItems(policy, subject)
    .filter((item) => !requests.some(item.matches))
    .map((item) => item.name)
    .sort();
}

/** The permissions the requests used, sorted, without object names (but a namespace's own name). */
export function usedPermissions(requests: readonly RequestAttributes[]): string[] {
  return [
    ...new Set(requests.map((r) => describeRequest(r, !('path' in r) && r.resource === 'namespaces'))),
  ].sort();
}
