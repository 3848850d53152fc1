import { flagIsOn, flagValue, flagValues, hasFlag, programName } from '../command-line.ts';
import { type KubeObject, list, namespaceOf, objectRef, record, text } from '../manifest.ts';
import {
  type ContainerRef,
  findObject,
  mainInvocation,
  ofKind,
  serverPods,
  servicesSelecting,
  type Testbed,
} from '../testbed.ts';
import { type Note, note, type Violation, violation } from '../violation.ts';

/** Lessons 3 and 9: what the vLLM replicas must run with, and who may reach them. */

/** The names a vLLM server answers to: `--served-model-name`, else the model itself. */
export function servedNames(words: readonly string[]): string[] {
  const served = flagValues(words, '--served-model-name');
  if (served && served.length > 0) return served;
  const model = flagValue(words, '--model');
  if (model) return [model];
  const serve = words.findIndex((word, i) => word === 'serve' && programName(words[i - 1]) === 'vllm');
  const positional = serve >= 0 ? words[serve + 1] : undefined;
  return positional && !positional.startsWith('-') ? [positional] : [];
}

/** The model name a benchmark client puts in its requests. */
export function requestedModel(words: readonly string[]): string | undefined {
  return flagValue(words, '--served-model-name') ?? flagValue(words, '--model');
}

/** Lesson 3: prefix caching on, metrics on. */
export function prefixCachingAndMetrics(testbed: Testbed): Violation[] {
  return testbed.servers.flatMap((ref) => {
    const invocation = mainInvocation(ref);
    if (!invocation) return [];
    const { words, field } = invocation;
    const object = ref.pod.object;
    const found: Violation[] = [];
    if (flagIsOn(words, '--enable-prefix-caching') !== true || hasFlag(words, '--no-enable-prefix-caching')) {
      found.push(
        violation(
          object,
          field,
          3,
          '--enable-prefix-caching is not set (or turned off); the study measures prefix-cache hits, so caching must be on explicitly',
        ),
      );
    }
    if (hasFlag(words, '--disable-log-stats')) {
      found.push(
        violation(
          object,
          field,
          3,
          '--disable-log-stats removes all vllm:* metrics; the study cannot measure hit rates',
        ),
      );
    }
    return found;
  });
}

/** Lesson 3: every benchmark client asks for a model name the replicas serve. */
export function servedModelNameMatches(testbed: Testbed): Violation[] {
  if (testbed.servers.length === 0) return [];
  const served = new Set(
    testbed.servers.flatMap((ref) => {
      const invocation = mainInvocation(ref);
      return invocation ? servedNames(invocation.words) : [];
    }),
  );
  const list = [...served].join(', ') || 'no name';
  return testbed.benchClients.flatMap((ref) => {
    const invocation = mainInvocation(ref);
    if (!invocation) return [];
    const name = requestedModel(invocation.words);
    if (name !== undefined && served.has(name)) return [];
    const what =
      name === undefined ? 'neither --served-model-name nor --model is set' : `--served-model-name "${name}"`;
    return [
      violation(
        ref.pod.object,
        invocation.field,
        3,
        `${what} does not match the replicas' --served-model-name (${list}); every request would fail with 404 "model does not exist"`,
      ),
    ];
  });
}

const DEV_ENDPOINTS = 'with VLLM_SERVER_DEV_MODE=1 this exposes /reset_prefix_cache, /sleep and /wake_up';

/**
 * Lesson 3: the replicas' Services stay inside the cluster. LoadBalancer, externalIPs and
 * Ingress rules are violations; NodePort is the lab's own baseline (docs/facts.md §3.2) and stays
 * private only because the instance has no inbound rule, so it is a note.
 */
export function replicasStayInternal(testbed: Testbed): { violations: Violation[]; notes: Note[] } {
  const violations: Violation[] = [];
  const notes: Note[] = [];
  const replicaServices = new Set<KubeObject>(
    serverPods(testbed).flatMap((pod) => servicesSelecting(testbed, pod)),
  );
  for (const service of replicaServices) {
    const spec = record(service.spec);
    if (spec.type === 'LoadBalancer') {
      violations.push(
        violation(
          service,
          'spec.type',
          3,
          `is LoadBalancer over the vLLM replicas; ${DEV_ENDPOINTS} outside the cluster`,
        ),
      );
    }
    if (list(spec.externalIPs).length > 0) {
      violations.push(
        violation(
          service,
          'spec.externalIPs',
          3,
          `routes external addresses to the vLLM replicas; ${DEV_ENDPOINTS}`,
        ),
      );
    }
    if (spec.type === 'NodePort') {
      const ports = list(spec.ports)
        .map((port) => record(port).nodePort)
        .filter((port) => port !== undefined);
      notes.push(
        note(
          service,
          `NodePort${ports.length ? ` ${ports.join(', ')}` : ''} over the vLLM replicas (the kube-proxy baseline) reaches their dev endpoints from every node's address; allowed because the lab's node has no inbound rule, never open that port`,
        ),
      );
    }
  }
  for (const ingress of ofKind(testbed, 'Ingress')) {
    for (const { name, field } of ingressBackends(ingress)) {
      const service = findObject(testbed, 'Service', name, namespaceOf(ingress));
      if (service && replicaServices.has(service)) {
        violations.push(
          violation(
            ingress,
            field,
            3,
            `sends outside traffic to ${objectRef(service)} of the vLLM replicas; ${DEV_ENDPOINTS}`,
          ),
        );
      }
    }
  }
  return { violations, notes };
}

function ingressBackends(ingress: KubeObject): { name: string; field: string }[] {
  const spec = record(ingress.spec);
  const backends: { name: string; field: string }[] = [];
  const fallback = text(record(record(spec.defaultBackend).service).name);
  if (fallback) backends.push({ name: fallback, field: 'spec.defaultBackend.service.name' });
  list(spec.rules).forEach((rule, r) => {
    list(record(record(rule).http).paths).forEach((path, p) => {
      const name = text(record(record(record(path).backend).service).name);
      if (name) backends.push({ name, field: `spec.rules[${r}].http.paths[${p}].backend.service.name` });
    });
  });
  return backends;
}

const DEV_MODE = 'VLLM_SERVER_DEV_MODE';

/** Whether the container's environment sets VLLM_SERVER_DEV_MODE=1, directly or from a ConfigMap. */
function devModeOn(testbed: Testbed, ref: ContainerRef): boolean {
  const direct = list(ref.container.env)
    .map(record)
    .find((entry) => entry.name === DEV_MODE);
  if (direct) return direct.value === '1';
  return list(ref.container.envFrom).some((source) => {
    const name = text(record(record(source).configMapRef).name);
    const configMap = name ? findObject(testbed, 'ConfigMap', name, ref.pod.namespace) : undefined;
    return configMap !== undefined && record(configMap.data)[DEV_MODE] === '1';
  });
}

/**
 * Lesson 9: prefix caches are reset between runs. The reset happens at run time; what the
 * manifests can show is its precondition, dev mode on every replica.
 */
export function devModeForCacheReset(testbed: Testbed): Violation[] {
  return testbed.servers
    .filter((ref) => !devModeOn(testbed, ref))
    .map((ref) =>
      violation(
        ref.pod.object,
        `${ref.path}.env`,
        9,
        `${DEV_MODE}=1 is not set: POST /reset_prefix_cache answers 404, so prefix caches cannot be reset between runs and each run starts on the previous run's warm cache (the manifests show only this precondition; the runner checks the reset itself)`,
      ),
    );
}
