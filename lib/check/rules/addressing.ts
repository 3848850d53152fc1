import { flagValues } from '../command-line.ts';
import { clusters, endpointAddresses, envoyConfigs } from '../envoy-config.ts';
import { eppFlags } from '../epp-config.ts';
import {
  fieldPath,
  type KubeObject,
  nameOf,
  namespaceOf,
  objectRef,
  record,
  sameNamespace,
  selects,
  stringMap,
  text,
} from '../manifest.ts';
import {
  hostOf,
  isHeadless,
  isIpLiteral,
  mainInvocation,
  ofKind,
  resolveDnsName,
  serverPods,
  servicesSelecting,
  type Testbed,
} from '../testbed.ts';
import { type Violation, violation } from '../violation.ts';

/**
 * Lesson 4: front ends find the replicas by stable name or label selector. Pasted pod IPs broke
 * the manual lab on every pod restart; a router behind kube-proxy loses its own choice.
 */

const PASTED_IP = 'pod IPs change on every restart and the front end keeps sending to the old address';

/** A stable per-replica name to suggest, from the first StatefulSet with a headless Service. */
function stableNameExample(testbed: Testbed): string {
  for (const pod of serverPods(testbed)) {
    const headless = servicesSelecting(testbed, pod).find(isHeadless);
    if (pod.object.kind === 'StatefulSet' && headless) return `${nameOf(pod.object)}-0.${nameOf(headless)}`;
  }
  return '<pod>.<headless-service>';
}

/** Services that balance over the replicas (kube-proxy) or name them as a whole. */
function replicaServices(testbed: Testbed): Set<KubeObject> {
  return new Set(serverPods(testbed).flatMap((pod) => servicesSelecting(testbed, pod)));
}

/** Lesson 4: router worker URLs name single replicas by DNS, never IPs or a balancing Service. */
export function routersAddressReplicasByName(testbed: Testbed): Violation[] {
  const behindReplicas = replicaServices(testbed);
  const example = stableNameExample(testbed);
  return testbed.routers.flatMap((ref) => {
    const invocation = mainInvocation(ref);
    const urls = invocation ? (flagValues(invocation.words, '--worker-urls') ?? []) : [];
    return urls.flatMap((url): Violation[] => {
      const object = ref.pod.object;
      const field = invocation?.field ?? ref.path;
      const host = hostOf(url);
      if (host === undefined) return [];
      if (isIpLiteral(host)) {
        return [
          violation(
            object,
            field,
            4,
            `--worker-urls ${url} is a pasted IP address: ${PASTED_IP}; use the headless Service name (${example})`,
          ),
        ];
      }
      const target = resolveDnsName(testbed, host, ref.pod.namespace);
      if (target?.kind !== 'service' || !behindReplicas.has(target.service)) return [];
      if (isHeadless(target.service)) {
        return [
          violation(
            object,
            field,
            4,
            `--worker-urls ${url} names the headless ${objectRef(target.service)} as a whole: the router sees one worker and DNS picks the replica; list each replica (${example})`,
          ),
        ];
      }
      const type = text(record(target.service.spec).type) ?? 'ClusterIP';
      return [
        violation(
          object,
          field,
          4,
          `--worker-urls ${url} points at ${objectRef(target.service)} (${type}), which kube-proxy balances over the replicas: it re-randomizes the router's choice; list each replica (${example})`,
        ),
      ];
    });
  });
}

const LOCAL_ADDRESSES = new Set(['0.0.0.0', '127.0.0.1', '::', '::1']);

/** Lesson 4: Envoy clusters resolve Service names; ORIGINAL_DST needs no addresses at all. */
export function envoyAddressesByName(testbed: Testbed): Violation[] {
  return envoyConfigs(testbed).flatMap(({ configMap, key, config }) => {
    if (!config) return [];
    return clusters(config).flatMap((cluster) =>
      endpointAddresses(cluster).flatMap(({ node, path }) => {
        const address = text(node.address);
        if (!address || LOCAL_ADDRESSES.has(address) || !isIpLiteral(address)) return [];
        return [
          violation(
            configMap,
            fieldPath(['data', key, ...path, 'address']),
            4,
            `is the literal IP ${address}: ${PASTED_IP}; use the Service's DNS name with STRICT_DNS`,
          ),
        ];
      }),
    );
  });
}

/** The label selector of an InferencePool, v1 (`matchLabels`) or v1alpha2 (flat). */
function poolSelector(pool: KubeObject): { labels: Record<string, string>; field: string } {
  const selector = record(record(pool.spec).selector);
  return pool.apiVersion.endsWith('/v1alpha2')
    ? { labels: stringMap(selector), field: 'spec.selector' }
    : { labels: stringMap(selector.matchLabels), field: 'spec.selector.matchLabels' };
}

/** Lesson 4: an InferencePool's selector picks the replicas; every EPP watches a pool that exists. */
export function poolsSelectReplicas(testbed: Testbed): Violation[] {
  const pools = ofKind(testbed, 'InferencePool');
  const pods = serverPods(testbed);
  const poolViolations =
    pods.length === 0
      ? []
      : pools.flatMap((pool) => {
          const { labels, field } = poolSelector(pool);
          const matches = pods.some(
            (pod) => sameNamespace(pod.namespace, namespaceOf(pool)) && selects(labels, pod.labels),
          );
          return matches
            ? []
            : [
                violation(
                  pool,
                  field,
                  4,
                  `selects no vLLM replica among the manifests (${JSON.stringify(labels)}): the EPP has no endpoints to pick`,
                ),
              ];
        });
  const eppViolations = testbed.epps.flatMap((ref) => {
    const invocation = mainInvocation(ref);
    const flags = eppFlags(ref);
    const name = flags.values.get('pool-name');
    if (!invocation || !name) return [];
    const namespace = flags.values.get('pool-namespace') ?? ref.pod.namespace;
    const exists = pools.some((pool) => nameOf(pool) === name && sameNamespace(namespaceOf(pool), namespace));
    return exists
      ? []
      : [
          violation(
            ref.pod.object,
            invocation.field,
            4,
            `--pool-name ${name} names no InferencePool among the manifests: the EPP finds no replicas and never becomes Ready`,
          ),
        ];
  });
  return [...poolViolations, ...eppViolations];
}
