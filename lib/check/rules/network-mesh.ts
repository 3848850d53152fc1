import {
  AMBIENT_LABEL,
  type CellDescription,
  ISTIO_INJECTION_LABEL,
  MESH_DEFAULT_NAMESPACE,
  MESH_NAMESPACES,
  MTLS_ARM_LABEL,
  MTLS_ARMS,
  meshNamespaceLabels,
  PLAIN_NAMESPACE,
} from '../../network/topology.ts';
import { programName } from '../command-line.ts';
import {
  fieldPath,
  isRecord,
  type Json,
  type KubeObject,
  labelsOf,
  list,
  nameOf,
  namespaceOf,
  record,
  sameNamespace,
  selects,
  stringMap,
  text,
} from '../manifest.ts';
import { isIstioKind } from '../network/schemas.ts';
import { containersOf, imageRepository, type PodTemplate, podTemplateOf } from '../testbed.ts';
import { NETWORK_LESSONS, type Violation, violation } from '../violation.ts';

/**
 * `lab check` rules 1-5 of a network-lab cell (fortio's resolution and the mesh's wiring); the
 * rest and their entry point are in network.ts.
 */

export const podTemplates = (objects: readonly KubeObject[]): PodTemplate[] =>
  objects.map(podTemplateOf).filter((pod): pod is PodTemplate => pod !== undefined);

export const ofKind = (objects: readonly KubeObject[], kind: string): KubeObject[] =>
  objects.filter((o) => o.kind === kind);

// ---- network 1: fortio's histogram resolution ----------------------------------------------------

/** Whether a command line is `fortio load ...` (the fortio image's entrypoint is fortio). */
function isFortioLoad(words: readonly string[], image: string): boolean {
  if (programName(words[0]) === 'fortio') return words[1] === 'load';
  return words[0] === 'load' && imageRepository(image).endsWith('fortio');
}

/** The value of fortio's `-r` (Go flags: `-r x`, `-r=x`, `--r x`; the last one wins). */
function resolutionFlag(words: readonly string[]): string | undefined {
  let value: string | undefined;
  words.forEach((word, i) => {
    const match = /^--?r(?:=(.*))?$/.exec(word);
    if (match) value = match[1] ?? words[i + 1];
  });
  return value;
}

/**
 * Every `fortio load` sets `-r` to at most a tenth of the smallest expected latency: fortio's default
 * 0.001 s (periodic.DefaultRunnerOptions.Resolution in fortio v1.75.2) makes 1 ms buckets, and
 * sub-millisecond percentiles come out as 0.5/0.9/0.99 of a bucket.
 */
export function fortioResolution(
  objects: readonly KubeObject[],
  smallestExpectedLatencyMs: number,
): Violation[] {
  const finest = smallestExpectedLatencyMs / 10 / 1000;
  const lesson = NETWORK_LESSONS.resolution;
  return podTemplates(objects).flatMap((pod) =>
    containersOf(pod).flatMap((ref) =>
      ref.invocations
        .filter((inv) => isFortioLoad(inv.words, ref.image))
        .flatMap((inv) => {
          const raw = resolutionFlag(inv.words);
          if (raw === undefined) {
            return [
              violation(
                pod.object,
                inv.field,
                lesson,
                `fortio load without -r: fortio's default 0.001 s (1 ms buckets) turns sub-millisecond percentiles into bucket positions; add -r ${finest} (a tenth of the smallest expected latency, ${smallestExpectedLatencyMs} ms) or finer`,
              ),
            ];
          }
          const r = Number(raw);
          if (!Number.isFinite(r) || r <= 0 || r > finest) {
            return [
              violation(
                pod.object,
                inv.field,
                lesson,
                `fortio -r ${raw} is coarser than a tenth of the smallest expected latency (${smallestExpectedLatencyMs} ms): percentiles would be bucket positions; use -r ${finest} or finer`,
              ),
            ];
          }
          return [];
        }),
    ),
  );
}

// ---- network 2: which namespace gets the mesh ----------------------------------------------------

function istioLabelsOn(labels: Record<string, string>): string[] {
  const found: string[] = [];
  if (labels[ISTIO_INJECTION_LABEL] === 'enabled') found.push(`${ISTIO_INJECTION_LABEL}=enabled`);
  if (labels[AMBIENT_LABEL] === 'ambient') found.push(`${AMBIENT_LABEL}=ambient`);
  if (labels['istio.io/rev'] !== undefined) found.push(`istio.io/rev=${labels['istio.io/rev']}`);
  return found;
}

/**
 * `mesh` and `mesh-default` carry the label of the cell's mesh mode (sidecar injection, or the
 * ambient data plane) and no other, and `mesh-default` holds no PeerAuthentication (E2's mesh
 * default); `plain` carries none, and no plain pod asks for a sidecar; a cell without a mesh has
 * no mesh namespace and no Istio object.
 */
export function meshNamespaces(
  objects: readonly KubeObject[],
  cell: CellDescription | undefined,
): Violation[] {
  const lesson = NETWORK_LESSONS.namespaces;
  const violations: Violation[] = [];
  const namespaces = ofKind(objects, 'Namespace');
  for (const ns of namespaces.filter((n) => nameOf(n) === PLAIN_NAMESPACE)) {
    const found = istioLabelsOn(labelsOf(ns));
    if (found.length > 0) {
      violations.push(
        violation(
          ns,
          'metadata.labels',
          lesson,
          `the out-of-mesh namespace is labelled ${found.join(', ')}: its pods would join the mesh and the plain arms would measure the mesh; remove the label`,
        ),
      );
    }
  }
  for (const pod of podTemplates(objects).filter((p) => p.namespace === PLAIN_NAMESPACE)) {
    if (pod.labels['sidecar.istio.io/inject'] === 'true') {
      violations.push(
        violation(
          pod.object,
          `${pod.path.replace(/\.spec$/, '')}.metadata.labels`,
          lesson,
          'sidecar.istio.io/inject=true on a pod of the out-of-mesh namespace: it would get a sidecar; remove the label',
        ),
      );
    }
  }
  const meshes = namespaces.filter((n) => (MESH_NAMESPACES as readonly string[]).includes(nameOf(n)));
  if (cell?.mesh === 'none') {
    for (const mesh of meshes) {
      violations.push(
        violation(
          mesh,
          'metadata.name',
          lesson,
          `cell ${cell.name} runs no mesh (mesh: none): no mesh namespace belongs on it`,
        ),
      );
    }
    for (const object of objects.filter(isIstioKind)) {
      violations.push(
        violation(
          object,
          'kind',
          lesson,
          `cell ${cell.name} runs no mesh (mesh: none): Istio objects belong only on cells with a mesh`,
        ),
      );
    }
    return violations;
  }
  for (const mesh of meshes) violations.push(...meshNamespaceLabelViolations(mesh, cell));
  // E2's mesh-default row measures the mesh default: a PeerAuthentication there measures a policy.
  for (const policy of objects.filter(
    (o) => o.kind === 'PeerAuthentication' && sameNamespace(namespaceOf(o), MESH_DEFAULT_NAMESPACE),
  )) {
    violations.push(
      violation(
        policy,
        'metadata.namespace',
        lesson,
        `a PeerAuthentication in ${MESH_DEFAULT_NAMESPACE}: E2's "no PeerAuthentication" row would measure this policy instead of the mesh default (PERMISSIVE); remove it`,
      ),
    );
  }
  return violations;
}

/** A mesh namespace carries the label of the cell's mesh mode, and not the other mode's. */
function meshNamespaceLabelViolations(mesh: KubeObject, cell: CellDescription | undefined): Violation[] {
  const lesson = NETWORK_LESSONS.namespaces;
  const violations: Violation[] = [];
  const name = nameOf(mesh);
  const labels = labelsOf(mesh);
  const expected = cell ? meshNamespaceLabels(cell.mesh) : undefined;
  if (expected) {
    for (const [key, value] of Object.entries(expected)) {
      if (labels[key] !== value) {
        violations.push(
          violation(
            mesh,
            fieldPath(['metadata', 'labels', key]),
            lesson,
            `is ${labels[key] === undefined ? 'missing' : `"${labels[key]}"`}; the cell's mesh is ${cell?.mesh}, so the mesh namespace ${name} needs ${key}=${value} (pods created before the label get no ${cell?.mesh === 'ambient' ? 'ztunnel redirection' : 'sidecar'})`,
          ),
        );
      }
    }
    const other = cell?.mesh === 'sidecar' ? AMBIENT_LABEL : ISTIO_INJECTION_LABEL;
    if (istioLabelsOn({ [other]: labels[other] ?? '' }).length > 0) {
      violations.push(
        violation(
          mesh,
          fieldPath(['metadata', 'labels', other]),
          lesson,
          `the cell's mesh is ${cell?.mesh}: ${other}=${labels[other]} would mix sidecar and ambient data planes; remove it`,
        ),
      );
    }
  } else if (istioLabelsOn(labels).length === 0) {
    violations.push(
      violation(
        mesh,
        'metadata.labels',
        lesson,
        `the mesh namespace ${name} has no Istio label: its pods get no sidecar; add ${ISTIO_INJECTION_LABEL}=enabled (or ${AMBIENT_LABEL}=ambient)`,
      ),
    );
  }
  return violations;
}

// ---- network 3: one protocol per target port ------------------------------------------------------

type Family = 'http' | 'tcp';
const HTTP_PROTOCOLS = new Set(['http', 'http2', 'https', 'grpc', 'grpc-web', 'h2c']);
const TCP_PROTOCOLS = new Set(['tcp', 'tls', 'mongo', 'mysql', 'redis']);

/** Istio's protocol selection: `appProtocol`, else the port name's prefix (`http-echo` -> http). */
function protocolFamily(port: Json): Family | undefined {
  const declared = text(port.appProtocol)?.toLowerCase() ?? text(port.name)?.toLowerCase().split('-')[0];
  if (declared === undefined) return undefined;
  if (HTTP_PROTOCOLS.has(declared)) return 'http';
  if (TCP_PROTOCOLS.has(declared)) return 'tcp';
  return undefined;
}

/** The container port a Service port reaches on a pod (a named targetPort resolved by name). */
function containerPortOf(pod: PodTemplate, target: unknown): number | undefined {
  if (typeof target === 'number') return target;
  const name = text(target);
  for (const ref of containersOf(pod)) {
    for (const p of list(ref.container.ports).map(record)) {
      if (name !== undefined && p.name === name && typeof p.containerPort === 'number')
        return p.containerPort;
    }
  }
  return undefined;
}

function selectedPods(
  objects: readonly KubeObject[],
  namespace: string | undefined,
  selector: Record<string, string>,
) {
  return podTemplates(objects).filter(
    (pod) => sameNamespace(namespace, pod.namespace) && selects(selector, pod.labels),
  );
}

interface PortUse {
  readonly service: KubeObject;
  readonly index: number;
  readonly name: string;
  readonly family: Family;
}

/**
 * An `http-` and a `tcp-` Service port never reach the same container port (in one Service or
 * across Services selecting the same pods): the inbound sidecar keys its listener by the target
 * port, so two protocols there are ambiguous and E4's L4 arm could be parsed as HTTP.
 */
export function protocolPorts(objects: readonly KubeObject[]): Violation[] {
  const uses = new Map<string, PortUse[]>();
  for (const service of ofKind(objects, 'Service')) {
    const spec = record(service.spec);
    const selector = stringMap(spec.selector);
    const pods = selectedPods(objects, namespaceOf(service), selector);
    list(spec.ports).forEach((value, index) => {
      const port = record(value);
      const family = protocolFamily(port);
      if (!family) return;
      const target = port.targetPort ?? port.port;
      const keys =
        pods.length > 0
          ? pods.map(
              (pod) =>
                `${pod.object.kind}/${namespaceOf(pod.object)}/${nameOf(pod.object)}:${containerPortOf(pod, target) ?? String(target)}`,
            )
          : [`${namespaceOf(service)}/${nameOf(service)}:${String(target)}`];
      for (const key of new Set(keys)) {
        uses.set(key, [...(uses.get(key) ?? []), { service, index, name: text(port.name) ?? '', family }]);
      }
    });
  }
  const reported = new Set<string>();
  const violations: Violation[] = [];
  for (const [key, portUses] of uses) {
    const first = portUses[0];
    for (const use of portUses.slice(1)) {
      const id = `${namespaceOf(use.service)}/${nameOf(use.service)}#${use.index}`;
      if (use.family === first.family || reported.has(id)) continue;
      reported.add(id);
      const target = key.slice(key.lastIndexOf(':') + 1);
      const where = use.service === first.service ? '' : ` of Service ${nameOf(first.service)}`;
      violations.push(
        violation(
          use.service,
          fieldPath(['spec', 'ports', use.index, 'targetPort']),
          NETWORK_LESSONS.protocolPorts,
          `port "${use.name}" (${use.family}) reaches container port ${target}, like port "${first.name}" (${first.family})${where}: two protocols on one target port are ambiguous for the inbound sidecar; give the ${use.family === 'tcp' ? 'tcp-' : 'http-'} port its own container port`,
        ),
      );
    }
  }
  return violations;
}

// ---- network 4: port-level mTLS needs a selector and a container port -----------------------------

function containerPorts(pod: PodTemplate): number[] {
  return containersOf(pod).flatMap((ref) =>
    list(ref.container.ports)
      .map((p) => record(p).containerPort)
      .filter((n): n is number => typeof n === 'number'),
  );
}

/**
 * A PeerAuthentication's `portLevelMtls` applies only with a workload selector (Istio's API:
 * "These only apply when a workload selector is specified"; the v1 CRD rejects it: "portLevelMtls
 * requires selector"), and its keys are container ports of the selected pods, not Service ports.
 */
export function portLevelMtls(objects: readonly KubeObject[]): Violation[] {
  const lesson = NETWORK_LESSONS.portLevelMtls;
  return objects
    .filter((o) => o.kind === 'PeerAuthentication')
    .flatMap((policy) => {
      const spec = record(policy.spec);
      const ports = Object.keys(record(spec.portLevelMtls));
      if (ports.length === 0) return [];
      const selector = stringMap(record(spec.selector).matchLabels);
      if (Object.keys(selector).length === 0) {
        return [
          violation(
            policy,
            'spec.portLevelMtls',
            lesson,
            'port-level mTLS without spec.selector.matchLabels: Istio applies port-level settings only to selected workloads (and its CRD rejects the object); select the workload the exception is for',
          ),
        ];
      }
      const pods = selectedPods(objects, namespaceOf(policy), selector);
      if (pods.length === 0) return [];
      const known = [...new Set(pods.flatMap(containerPorts))].sort((a, b) => a - b);
      return ports
        .filter((key) => !known.includes(Number(key)))
        .map((key) =>
          violation(
            policy,
            fieldPath(['spec', 'portLevelMtls', key]),
            lesson,
            `${key} is no container port of the selected pods (${known.join(', ') || 'none declared'}): the key is the workload's port, not the Service's; the exception would never apply`,
          ),
        );
    });
}

// ---- network 5: a DestinationRule's TLS mode is its arm's ------------------------------------------

interface TlsSetting {
  readonly field: string;
  readonly mode: string | undefined;
  /** The Service port it is limited to. */
  readonly port?: number;
}

function tlsSettings(rule: KubeObject): TlsSetting[] {
  const policy = record(record(rule.spec).trafficPolicy);
  const settings: TlsSetting[] = [];
  if (isRecord(policy.tls))
    settings.push({ field: 'spec.trafficPolicy.tls.mode', mode: text(policy.tls.mode) });
  list(policy.portLevelSettings).forEach((value, i) => {
    const setting = record(value);
    if (!isRecord(setting.tls)) return;
    const port = record(setting.port).number;
    settings.push({
      field: `spec.trafficPolicy.portLevelSettings[${i}].tls.mode`,
      mode: text(setting.tls.mode),
      ...(typeof port === 'number' ? { port } : {}),
    });
  });
  return settings;
}

/** The Service a DestinationRule host names (`name`, `name.ns`, `name.ns.svc.cluster.local`). */
function serviceOfHost(objects: readonly KubeObject[], host: string, namespace: string | undefined) {
  const [name, ns = namespace] = host.split('.');
  return ofKind(objects, 'Service').find((s) => nameOf(s) === name && sameNamespace(ns, namespaceOf(s)));
}

/** The mTLS mode a pod's sidecar enforces on a container port (workload policy, else namespace's). */
function peerMode(objects: readonly KubeObject[], pod: PodTemplate, port: number): string {
  const policies = objects.filter(
    (o) => o.kind === 'PeerAuthentication' && sameNamespace(namespaceOf(o), pod.namespace),
  );
  const workload = policies.find((p) =>
    selects(stringMap(record(record(p.spec).selector).matchLabels), pod.labels),
  );
  const namespaceWide = policies.find(
    (p) => Object.keys(stringMap(record(record(p.spec).selector).matchLabels)).length === 0,
  );
  for (const policy of [workload, namespaceWide]) {
    if (!policy) continue;
    const spec = record(policy.spec);
    const mode = text(record(record(spec.portLevelMtls)[String(port)]).mode) ?? text(record(spec.mtls).mode);
    if (mode && mode !== 'UNSET') return mode;
  }
  return 'PERMISSIVE';
}

/**
 * Every DestinationRule names its encryption arm (label network-lab/mtls: on|off) and sets the TLS
 * mode of that arm: ISTIO_MUTUAL for on, DISABLE for off. An off arm towards a port its server
 * enforces STRICT on would have every connection dropped: the arm would measure resets.
 */
export function destinationRuleArms(objects: readonly KubeObject[]): Violation[] {
  const lesson = NETWORK_LESSONS.destinationRules;
  return objects
    .filter((o) => o.kind === 'DestinationRule')
    .flatMap((rule) => {
      const arm = labelsOf(rule)[MTLS_ARM_LABEL];
      if (arm !== 'on' && arm !== 'off') {
        return [
          violation(
            rule,
            fieldPath(['metadata', 'labels', MTLS_ARM_LABEL]),
            lesson,
            `is ${arm === undefined ? 'missing' : `"${arm}"`}: a DestinationRule of the lab names its encryption arm, on (ISTIO_MUTUAL) or off (DISABLE)`,
          ),
        ];
      }
      const expected = MTLS_ARMS[arm];
      const settings = tlsSettings(rule);
      if (settings.length === 0) {
        return [
          violation(
            rule,
            'spec.trafficPolicy.tls.mode',
            lesson,
            `is not set: the mTLS-${arm} arm needs ${expected} (without it Istio's auto mTLS decides)`,
          ),
        ];
      }
      const violations = settings
        .filter((s) => s.mode !== expected)
        .map((s) =>
          violation(
            rule,
            s.field,
            lesson,
            `is ${s.mode ?? 'missing'}, but the rule serves the mTLS-${arm} arm (${MTLS_ARM_LABEL}=${arm}): use ${expected}`,
          ),
        );
      const service = serviceOfHost(objects, text(record(rule.spec).host) ?? '', namespaceOf(rule));
      if (!service) return violations;
      const pods = selectedPods(objects, namespaceOf(service), stringMap(record(service.spec).selector));
      for (const setting of settings.filter((s) => s.mode === 'DISABLE')) {
        list(record(service.spec).ports).forEach((value) => {
          const port = record(value);
          if (setting.port !== undefined && port.port !== setting.port) return;
          for (const pod of pods) {
            const target = containerPortOf(pod, port.targetPort ?? port.port);
            if (target !== undefined && peerMode(objects, pod, target) === 'STRICT') {
              violations.push(
                violation(
                  rule,
                  setting.field,
                  lesson,
                  `DISABLE sends plaintext to ${nameOf(service)} port ${String(port.port)}, where ${nameOf(pod.object)} enforces STRICT mTLS on container port ${target}: every connection would be dropped; limit the rule to ports with a PERMISSIVE exception`,
                ),
              );
              return;
            }
          }
        });
      }
      return violations;
    });
}
