import { programName, shellCommands, shellScript } from './command-line.ts';
import { mentionsGoFlag } from './go-flags.ts';
import {
  type Json,
  type KubeObject,
  list,
  nameOf,
  namespaceOf,
  record,
  sameNamespace,
  selects,
  stringMap,
  strings,
  text,
} from './manifest.ts';

/**
 * The testbed as found in a folder of manifests: which objects are vLLM replicas, benchmark
 * clients, Endpoint Pickers, Envoys, routers and the device plugin. Roles come from what a
 * container runs, never from object names, so hand-edited manifests are understood too.
 */

/** The pod template of a workload, wherever its kind keeps it. */
export interface PodTemplate {
  readonly object: KubeObject;
  /** Path of the pod spec inside the object: `spec.template.spec`. */
  readonly path: string;
  readonly spec: Json;
  readonly labels: Record<string, string>;
  readonly namespace: string | undefined;
}

/** One simple command a container runs, and the field it was read from. */
export interface Invocation {
  readonly words: readonly string[];
  readonly field: string;
}

export interface ContainerRef {
  readonly pod: PodTemplate;
  readonly index: number;
  readonly container: Json;
  /** `spec.template.spec.containers[0]` */
  readonly path: string;
  readonly image: string;
  readonly invocations: readonly Invocation[];
}

export type Role = 'server' | 'bench' | 'epp' | 'envoy' | 'router' | 'device-plugin';

export interface Testbed {
  readonly objects: readonly KubeObject[];
  readonly servers: readonly ContainerRef[];
  readonly benchClients: readonly ContainerRef[];
  readonly epps: readonly ContainerRef[];
  readonly envoys: readonly ContainerRef[];
  readonly routers: readonly ContainerRef[];
  readonly devicePlugins: readonly ContainerRef[];
}

const TEMPLATE_PATHS: Record<string, string[]> = {
  Pod: ['spec'],
  Deployment: ['spec', 'template', 'spec'],
  StatefulSet: ['spec', 'template', 'spec'],
  DaemonSet: ['spec', 'template', 'spec'],
  ReplicaSet: ['spec', 'template', 'spec'],
  Job: ['spec', 'template', 'spec'],
  CronJob: ['spec', 'jobTemplate', 'spec', 'template', 'spec'],
};

export function podTemplateOf(object: KubeObject): PodTemplate | undefined {
  const segments = TEMPLATE_PATHS[object.kind];
  if (!segments) return undefined;
  // The template's labels sit in the metadata beside its spec (the object's own, for a Pod).
  let template: Json = object;
  for (const segment of segments.slice(0, -1)) template = record(template[segment]);
  return {
    object,
    path: segments.join('.'),
    spec: record(template[segments[segments.length - 1]]),
    labels: stringMap(record(template.metadata).labels),
    namespace: namespaceOf(object),
  };
}

export function containersOf(pod: PodTemplate): ContainerRef[] {
  return list(pod.spec.containers).map((value, index) => {
    const container = record(value);
    const path = `${pod.path}.containers[${index}]`;
    const image = text(container.image) ?? '';
    return { pod, index, container, path, image, invocations: invocationsOf(container, path, image) };
  });
}

/**
 * The simple commands a container runs. A vLLM image without a command runs its entrypoint,
 * `vllm serve`, with the args.
 */
export function invocationsOf(container: Json, path: string, image: string): Invocation[] {
  const command = strings(container.command);
  const args = strings(container.args);
  const argv = [...command, ...args];
  const shell = shellScript(argv);
  if (shell) {
    const field =
      shell.index < command.length
        ? `${path}.command[${shell.index}]`
        : `${path}.args[${shell.index - command.length}]`;
    return shellCommands(shell.script).map((words) => ({ words, field }));
  }
  const field = args.length > 0 ? `${path}.args` : `${path}.command`;
  if (command.length === 0 && isVllmImage(image)) return [{ words: ['vllm', 'serve', ...args], field }];
  return argv.length > 0 ? [{ words: argv, field }] : [];
}

/** Image repository without registry tag or digest: `vllm/vllm-openai`. */
export function imageRepository(image: string): string {
  const withoutDigest = image.split('@')[0];
  const lastSlash = withoutDigest.lastIndexOf('/');
  const colon = withoutDigest.lastIndexOf(':');
  return colon > lastSlash ? withoutDigest.slice(0, colon) : withoutDigest;
}

export function isVllmImage(image: string): boolean {
  const name = programName(imageRepository(image));
  return name.includes('vllm') && !name.includes('router');
}

export function isEnvoyImage(image: string): boolean {
  return /(^|\/)envoyproxy\/envoy(-[a-z]+)?$/.test(imageRepository(image));
}

/** `vllm <sub> <subsub>`: the words after the vllm program, if this command runs vllm. */
function vllmSubcommands(words: readonly string[]): string[] | undefined {
  const at = words.findIndex((word) => programName(word) === 'vllm');
  return at < 0 ? undefined : words.slice(at + 1, at + 3);
}

export function runsVllmBench(words: readonly string[]): boolean {
  const sub = vllmSubcommands(words);
  return sub?.[0] === 'bench' && sub[1] === 'serve';
}

export function runsVllmServer(words: readonly string[]): boolean {
  return vllmSubcommands(words)?.[0] === 'serve' || words.includes('vllm.entrypoints.openai.api_server');
}

export function runsRouter(words: readonly string[]): boolean {
  return programName(words[0]) === 'vllm-router';
}

/** An Endpoint Picker names its pool; Go accepts `-pool-name` as well as `--pool-name`. */
export function runsEpp(words: readonly string[]): boolean {
  return mentionsGoFlag(words, 'pool-name');
}

/** What a container is in the lab, judged by what it runs. */
export function roleOf(ref: ContainerRef): Role | undefined {
  const runs = (test: (words: readonly string[]) => boolean) =>
    ref.invocations.some((invocation) => test(invocation.words));
  if (runs(runsVllmBench)) return 'bench';
  if (runs(runsVllmServer)) return 'server';
  if (runs(runsEpp)) return 'epp';
  if (runs(runsRouter)) return 'router';
  if (isEnvoyImage(ref.image)) return 'envoy';
  if (ref.pod.object.kind === 'DaemonSet' && ref.image.includes('k8s-device-plugin')) return 'device-plugin';
  return undefined;
}

/** The invocation that made a container what it is (the `vllm-router ...` after `pip install`). */
export function mainInvocation(ref: ContainerRef): Invocation | undefined {
  const tests: Partial<Record<Role, (words: readonly string[]) => boolean>> = {
    bench: runsVllmBench,
    server: runsVllmServer,
    epp: runsEpp,
    router: runsRouter,
  };
  const role = roleOf(ref);
  const test = role ? tests[role] : undefined;
  return (test && ref.invocations.find((invocation) => test(invocation.words))) ?? ref.invocations[0];
}

export function findTestbed(objects: readonly KubeObject[]): Testbed {
  const byRole = new Map<Role, ContainerRef[]>();
  for (const object of objects) {
    const pod = podTemplateOf(object);
    if (!pod) continue;
    for (const ref of containersOf(pod)) {
      const role = roleOf(ref);
      if (role) byRole.set(role, [...(byRole.get(role) ?? []), ref]);
    }
  }
  const of = (role: Role) => byRole.get(role) ?? [];
  return {
    objects,
    servers: of('server'),
    benchClients: of('bench'),
    epps: of('epp'),
    envoys: of('envoy'),
    routers: of('router'),
    devicePlugins: of('device-plugin'),
  };
}

/** Objects of one kind. */
export function ofKind(testbed: Testbed, kind: string): KubeObject[] {
  return testbed.objects.filter((object) => object.kind === kind);
}

/** The object of this kind and name visible from `namespace`. */
export function findObject(
  testbed: Testbed,
  kind: string,
  name: string,
  namespace: string | undefined,
): KubeObject | undefined {
  return ofKind(testbed, kind).find(
    (object) => nameOf(object) === name && sameNamespace(namespaceOf(object), namespace),
  );
}

/** Pod templates of the vLLM replicas, one per workload. */
export function serverPods(testbed: Testbed): PodTemplate[] {
  return unique(testbed.servers.map((ref) => ref.pod));
}

export function unique<T>(items: readonly T[]): T[] {
  return [...new Set(items)];
}

/** Services whose selector picks pods of this template. */
export function servicesSelecting(testbed: Testbed, pod: PodTemplate): KubeObject[] {
  return ofKind(testbed, 'Service').filter(
    (service) =>
      sameNamespace(namespaceOf(service), pod.namespace) &&
      selects(stringMap(record(service.spec).selector), pod.labels),
  );
}

/** Replicas a workload asks for (`spec.replicas`, 1 when unset, as Kubernetes defaults it). */
export function replicasOf(object: KubeObject): number {
  const replicas = record(object.spec).replicas;
  return typeof replicas === 'number' ? replicas : 1;
}

/** Host and port of a URL or `host:port`; undefined when it cannot be read. */
export function hostOf(address: string): string | undefined {
  try {
    return new URL(address.includes('://') ? address : `http://${address}`).hostname || undefined;
  } catch {
    return undefined;
  }
}

export function isIpLiteral(host: string): boolean {
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(host) || host.startsWith('[') || host.includes(':');
}

/** What a cluster DNS name points at among the manifests. */
export type DnsTarget =
  | { readonly kind: 'service'; readonly service: KubeObject }
  | { readonly kind: 'pod'; readonly service: KubeObject; readonly pod: string };

/**
 * Resolves `svc`, `svc.ns`, `svc.ns.svc.cluster.local` to a Service, and
 * `pod.svc.ns.svc.cluster.local` to one pod behind a headless Service.
 */
export function resolveDnsName(
  testbed: Testbed,
  host: string,
  fromNamespace: string | undefined,
): DnsTarget | undefined {
  const labels = host.split('.');
  const namespaceAt = (i: number) => (labels[i] && labels[i] !== 'svc' ? labels[i] : fromNamespace);
  const service = findObject(testbed, 'Service', labels[0], namespaceAt(1));
  if (service) return { kind: 'service', service };
  if (labels.length > 1) {
    const headless = findObject(testbed, 'Service', labels[1], namespaceAt(2));
    if (headless) return { kind: 'pod', service: headless, pod: labels[0] };
  }
  return undefined;
}

export function isHeadless(service: KubeObject): boolean {
  return record(service.spec).clusterIP === 'None';
}
