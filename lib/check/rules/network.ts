import { LAB_VPC_CIDR } from '../../config/network.ts';
import { cidrsOverlap } from '../../config/network-rules.ts';
import { K3S_API_PORT, NODE_IP_PLACEHOLDER } from '../../network/cilium-values.ts';
import { CILIUM_VALUES_KEY, SCALE_BACKEND } from '../../network/topology.ts';
import {
  fieldPath,
  isKubeObject,
  type Json,
  type KubeObject,
  list,
  nameOf,
  record,
  text,
} from '../manifest.ts';
import type { FoundCell } from '../network/cell.ts';
import { containersOf } from '../testbed.ts';
import { NETWORK_LESSONS, type Violation, violation } from '../violation.ts';
import {
  destinationRuleArms,
  fortioResolution,
  meshNamespaces,
  ofKind,
  podTemplates,
  portLevelMtls,
  protocolPorts,
} from './network-mesh.ts';

export { destinationRuleArms, fortioResolution, meshNamespaces, portLevelMtls, protocolPorts };

/**
 * `lab check` for a network-lab cell: one rule per lesson the manual study paid for
 * (docs/facts.md §N2, N3, N5). Each reads the objects as found, so hand-edited manifests are judged
 * by what they do, not by their names.
 */

// ---- network 6: Cilium values fit the cell --------------------------------------------------------

/**
 * The Cilium values recorded for the cell (docs/facts.md §N2): only on a Cilium cell; kube-proxy
 * replaced (K3s runs with --disable-kube-proxy there); the API server at the node's address; pod
 * IPs outside the VPC; an LB map large enough for the largest E9 step; and with Istio, socket LB in
 * the host namespace only and a non-exclusive CNI.
 */
export function ciliumValuesFitCell(found: FoundCell | undefined): Violation[] {
  if (!found?.cell) return [];
  const { object, cell, cilium } = found;
  const lesson = NETWORK_LESSONS.ciliumValues;
  const at = (...path: (string | number)[]) => `${fieldPath(['data', CILIUM_VALUES_KEY])}.${fieldPath(path)}`;
  if (cell.datapath !== 'cilium') {
    return cilium
      ? [
          violation(
            object,
            fieldPath(['data', CILIUM_VALUES_KEY]),
            lesson,
            `cell ${cell.name} runs kube-proxy (${cell.datapath}): Cilium values do not belong to it`,
          ),
        ]
      : [];
  }
  if (!cilium) {
    return [
      violation(
        object,
        fieldPath(['data', CILIUM_VALUES_KEY]),
        lesson,
        `is missing: cell ${cell.name} runs Cilium and its values must be recorded with it`,
      ),
    ];
  }
  const violations: Violation[] = [];
  const kpr = cilium.kubeProxyReplacement;
  if (kpr !== true && kpr !== 'true') {
    violations.push(
      violation(
        object,
        at('kubeProxyReplacement'),
        lesson,
        `is ${JSON.stringify(kpr ?? null)}; must be true: K3s runs this cell with --disable-kube-proxy, so without the replacement no Service works`,
      ),
    );
  }
  const host = cilium.k8sServiceHost ?? '';
  if (host !== NODE_IP_PLACEHOLDER && !/^(\d{1,3}\.){3}\d{1,3}$/.test(host)) {
    violations.push(
      violation(
        object,
        at('k8sServiceHost'),
        lesson,
        `is ${JSON.stringify(host)}: without kube-proxy Cilium reaches the API server only at the node's IPv4 address (or ${NODE_IP_PLACEHOLDER}, which the bootstrap fills)`,
      ),
    );
  }
  if (Number(cilium.k8sServicePort) !== K3S_API_PORT) {
    violations.push(
      violation(
        object,
        at('k8sServicePort'),
        lesson,
        `is ${JSON.stringify(cilium.k8sServicePort ?? null)}; K3s's API server listens on ${K3S_API_PORT}`,
      ),
    );
  }
  const mode = cilium.ipam?.mode ?? 'cluster-pool';
  if (mode === 'kubernetes') {
    // Pods take K3s's --cluster-cidr (the configuration rules keep it out of the VPC).
  } else if (mode === 'cluster-pool') {
    const listed = cilium.ipam?.operator?.clusterPoolIPv4PodCIDRList;
    // Cilium's default pool is 10.0.0.0/8 (its values.yaml), which covers the lab VPC.
    const ranges = listed === undefined ? ['10.0.0.0/8'] : Array.isArray(listed) ? listed : [listed];
    for (const range of ranges.filter((r) => cidrsOverlap(r, LAB_VPC_CIDR))) {
      violations.push(
        violation(
          object,
          at('ipam', 'operator', 'clusterPoolIPv4PodCIDRList'),
          lesson,
          `pod range ${range}${listed === undefined ? " (Cilium's default)" : ''} overlaps the lab VPC ${LAB_VPC_CIDR}: pod routes would shadow node addresses; use ipam.mode kubernetes (K3s's ${cell.podCidr}) or a pool outside the VPC`,
        ),
      );
    }
  } else {
    violations.push(
      violation(
        object,
        at('ipam', 'mode'),
        lesson,
        `is "${mode}"; a K3s cell uses kubernetes (or cluster-pool outside the VPC)`,
      ),
    );
  }
  const lbMapMax = cilium.bpf?.lbMapMax ?? 65_536;
  if (lbMapMax < cell.lbEntriesNeeded) {
    violations.push(
      violation(
        object,
        at('bpf', 'lbMapMax'),
        lesson,
        `${lbMapMax.toLocaleString('en-US')} entries cannot hold the largest Services step (${cell.lbEntriesNeeded.toLocaleString('en-US')} entries): the map would fill; size it before install (resizing disrupts connections)`,
      ),
    );
  }
  if (cell.mesh !== 'none') {
    if (cilium.socketLB?.hostNamespaceOnly !== true) {
      violations.push(
        violation(
          object,
          at('socketLB', 'hostNamespaceOnly'),
          lesson,
          `must be true: Istio runs on cell ${cell.name}, and socket load balancing in pod namespaces rewrites Service addresses before the sidecar sees them`,
        ),
      );
    }
    if (cilium.cni?.exclusive !== false) {
      violations.push(
        violation(
          object,
          at('cni', 'exclusive'),
          lesson,
          `must be false: Istio runs on cell ${cell.name}, and an exclusive Cilium CNI removes Istio's CNI configuration`,
        ),
      );
    }
  }
  return violations;
}

// ---- network 7: nothing exposed beyond the node --------------------------------------------------

function serviceExposure(object: KubeObject, service: Json, prefix: (string | number)[]): Violation[] {
  const lesson = NETWORK_LESSONS.exposure;
  const spec = record(service.spec);
  const violations: Violation[] = [];
  const type = text(spec.type);
  if (type === 'NodePort' || type === 'LoadBalancer') {
    violations.push(
      violation(
        object,
        fieldPath([...prefix, 'spec', 'type']),
        lesson,
        `is ${type}: the lab exposes nothing beyond the cluster (a node port answers on every node address); use ClusterIP`,
      ),
    );
  }
  if (list(spec.externalIPs).length > 0) {
    violations.push(
      violation(
        object,
        fieldPath([...prefix, 'spec', 'externalIPs']),
        lesson,
        'routes outside traffic into the cluster; remove it',
      ),
    );
  }
  return violations;
}

/** Services embedded in ConfigMaps as JSON (the E9 template the runner copies N times). */
function embeddedServices(configMap: KubeObject): { key: string; service: Json }[] {
  return Object.entries(record(configMap.data)).flatMap(([key, value]) => {
    const source = text(value);
    if (!source?.trimStart().startsWith('{')) return [];
    try {
      const parsed: unknown = JSON.parse(source);
      return isKubeObject(parsed) && parsed.kind === 'Service' ? [{ key, service: parsed as Json }] : [];
    } catch {
      return [];
    }
  });
}

/**
 * Nothing of a cell is reachable from outside the node: no NodePort or LoadBalancer Service (nor
 * in the Service template), no external IPs, no host ports, no listening port declared on a
 * host-network pod, no Ingress or Gateway.
 */
export function noExposure(objects: readonly KubeObject[]): Violation[] {
  const lesson = NETWORK_LESSONS.exposure;
  const violations: Violation[] = [];
  for (const object of objects) {
    if (object.kind === 'Service') violations.push(...serviceExposure(object, object as Json, []));
    if (object.kind === 'ConfigMap') {
      for (const { key, service } of embeddedServices(object)) {
        violations.push(...serviceExposure(object, service, ['data', key]));
      }
    }
    if (
      object.kind === 'Ingress' ||
      (object.kind === 'Gateway' && object.apiVersion.startsWith('gateway.networking.k8s.io/'))
    ) {
      violations.push(
        violation(
          object,
          'kind',
          lesson,
          `an ${object.kind} exposes the cell; the lab has no entry from outside`,
        ),
      );
    }
  }
  for (const pod of podTemplates(objects)) {
    const hostNetwork = pod.spec.hostNetwork === true;
    for (const ref of containersOf(pod)) {
      list(ref.container.ports).forEach((value, i) => {
        const port = record(value);
        if (port.hostPort !== undefined) {
          violations.push(
            violation(
              pod.object,
              `${ref.path}.ports[${i}].hostPort`,
              lesson,
              `${String(port.hostPort)} publishes the container on the node's address; remove it`,
            ),
          );
        } else if (hostNetwork) {
          violations.push(
            violation(
              pod.object,
              `${ref.path}.ports[${i}]`,
              lesson,
              `port ${String(port.containerPort)} on a host-network pod listens on the node's address; the lab's host-network pods listen on nothing`,
            ),
          );
        }
      });
    }
  }
  return violations;
}

// ---- network 8: E9's backend has the endpoints the cell was planned with ------------------------

/**
 * E9's Services select the scale backend: its replicas are the endpoints behind every Service, so
 * the entries per Service `lab plan` predicted and the runner's readiness wait count on them. The
 * Deployment must have the cell's `backendsPerService` replicas.
 */
export function scaleBackends(objects: readonly KubeObject[], found: FoundCell | undefined): Violation[] {
  const wanted = found?.cell?.backendsPerService;
  if (wanted === undefined) return [];
  return ofKind(objects, 'Deployment')
    .filter((d) => nameOf(d) === SCALE_BACKEND)
    .flatMap((d) => {
      const replicas = record(d.spec).replicas ?? 1;
      return replicas === wanted
        ? []
        : [
            violation(
              d,
              'spec.replicas',
              NETWORK_LESSONS.scaleBackends,
              `is ${String(replicas)}, but cell ${found?.cell?.name} was planned with ${wanted} backends per Service (experiments.serviceScale.backendsPerService): E9's entries per Service and its readiness wait would not match`,
            ),
          ];
    });
}

/** Every network-lab lesson, in order. */
export function networkLessonViolations(
  objects: readonly KubeObject[],
  found: FoundCell | undefined,
  smallestExpectedLatencyMs: number,
): Violation[] {
  return [
    ...fortioResolution(objects, found?.cell?.smallestExpectedLatencyMs ?? smallestExpectedLatencyMs),
    ...meshNamespaces(objects, found?.cell),
    ...protocolPorts(objects),
    ...portLevelMtls(objects),
    ...destinationRuleArms(objects),
    ...ciliumValuesFitCell(found),
    ...noExposure(objects),
    ...scaleBackends(objects, found),
  ];
}
