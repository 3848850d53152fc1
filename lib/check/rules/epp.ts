import {
  clusterNamed,
  endpointAddresses,
  envoyConfigs,
  extProcClusterName,
  extProcFilters,
  usesTls,
} from '../envoy-config.ts';
import { eppFlags, eppSchedulerConfig, pluginRegistry, pluginsOf } from '../epp-config.ts';
import { goBool } from '../go-flags.ts';
import {
  fieldPath,
  type Json,
  type KubeObject,
  list,
  nameOf,
  namespaceOf,
  objectRef,
  record,
  sameNamespace,
  selects,
  stringMap,
  strings,
  text,
} from '../manifest.ts';
import { mountedConfigMapFile } from '../mounts.ts';
import { looksLikeEndpointPickerConfig } from '../schemas.ts';
import {
  type ContainerRef,
  findObject,
  hostOf,
  mainInvocation,
  ofKind,
  resolveDnsName,
  type Testbed,
} from '../testbed.ts';
import { type Violation, violation } from '../violation.ts';

/** Lesson 5: the Endpoint Picker starts, reads the right metric, is probed right, and may serve metrics. */

export const EPP_HEALTH_PORT = 9003;
export const KV_METRIC = 'vllm:kv_cache_usage_perc';

/** Lesson 5: a scheduler config is given, and a `--config-file` comes from a ConfigMap key that exists. */
export function eppConfigPresent(testbed: Testbed): Violation[] {
  return testbed.epps.flatMap((ref) => {
    const invocation = mainInvocation(ref);
    if (!invocation) return [];
    const object = ref.pod.object;
    const flags = eppFlags(ref);
    const file = flags.values.get('config-file');
    if (file === undefined) {
      if (flags.values.get('config-text') !== undefined) return [];
      return [
        violation(
          object,
          invocation.field,
          5,
          'neither --config-file nor --config-text is set: the EPP exits with "scheduler config must be set either by config api or through code"',
        ),
      ];
    }
    const mount = mountedConfigMapFile(ref, file);
    if (!mount) {
      return [
        violation(
          object,
          `${ref.path}.volumeMounts`,
          5,
          `--config-file ${file} is not mounted from a ConfigMap: the EPP exits without its scheduler config`,
        ),
      ];
    }
    const configMap = findObject(testbed, 'ConfigMap', mount.configMap, ref.pod.namespace);
    const missing = (why: string) => [
      violation(
        object,
        mount.volumeField,
        5,
        `--config-file ${file}: ${why}; the EPP exits without its scheduler config`,
      ),
    ];
    if (!configMap) return missing(`ConfigMap ${mount.configMap} is not among the manifests`);
    const source = mount.key === undefined ? undefined : text(record(configMap.data)[mount.key]);
    if (source === undefined)
      return missing(
        `${objectRef(configMap)} has no key ${mount.key ?? 'for this file (the volume lists items without it)'}`,
      );
    if (!looksLikeEndpointPickerConfig(source))
      return missing(`key ${mount.key} of ${objectRef(configMap)} is not an EndpointPickerConfig`);
    return [];
  });
}

/** Lesson 5: the kv-cache scorer reads the metric vLLM 0.11 actually exports. */
export function eppKvMetricOverridden(testbed: Testbed): Violation[] {
  return testbed.epps.flatMap((ref) => {
    const invocation = mainInvocation(ref);
    if (!invocation) return [];
    const metric = eppFlags(ref).values.get('kv-cache-usage-percentage-metric');
    if (metric === KV_METRIC) return [];
    const actual =
      metric === undefined
        ? 'is not set (its default vllm:gpu_cache_usage_perc is hidden in vLLM 0.11)'
        : `is ${metric}`;
    return [
      violation(
        ref.pod.object,
        invocation.field,
        5,
        `--kv-cache-usage-percentage-metric ${actual}: the kv-cache scorer silently reads nothing; set it to ${KV_METRIC}`,
      ),
    ];
  });
}

/** The EPP's gRPC ports (GAIE v1.0.1 runserver defaults: ext_proc 9002, health 9003). */
const DEFAULT_GRPC_PORT = 9002;

/**
 * The ports a probe may use: `--grpc-health-port` (default 9003), and the ext_proc port when
 * `--health-checking` also registers the health service there (GAIE v1.0.1 runserver).
 */
function healthPorts(ref: ContainerRef): { ports: number[]; flag: string } {
  const flags = eppFlags(ref);
  const health = Number(flags.values.get('grpc-health-port') ?? EPP_HEALTH_PORT);
  const grpc = Number(flags.values.get('grpc-port') ?? DEFAULT_GRPC_PORT);
  const custom = flags.values.has('grpc-health-port') ? ` (--grpc-health-port ${health})` : '';
  return goBool(flags, 'health-checking', false)
    ? { ports: [health, grpc], flag: `${health}${custom} or ${grpc} (--health-checking)` }
    : { ports: [health], flag: `${health}${custom}; on ${grpc} only with --health-checking=true` };
}

/** Lesson 5: readiness (and liveness, if any) are gRPC health checks on the EPP's health port. */
export function eppProbesOnHealthPort(testbed: Testbed): Violation[] {
  return testbed.epps.flatMap((ref) =>
    (['readinessProbe', 'livenessProbe'] as const).flatMap((probe): Violation[] => {
      const value = ref.container[probe];
      const field = `${ref.path}.${probe}`;
      const health = healthPorts(ref);
      if (value === undefined) {
        return probe === 'readinessProbe'
          ? [
              violation(
                ref.pod.object,
                field,
                5,
                `is not set: the EPP is ready only after its pool has synced; probe gRPC health on ${health.ports[0]}`,
              ),
            ]
          : [];
      }
      const grpc = record(value).grpc;
      if (grpc === undefined) {
        return [
          violation(
            ref.pod.object,
            field,
            5,
            `is not a gRPC probe: the EPP answers health over gRPC on ${health.ports[0]} (service inference-extension)`,
          ),
        ];
      }
      const port = record(grpc).port;
      return typeof port === 'number' && health.ports.includes(port)
        ? []
        : [
            violation(
              ref.pod.object,
              `${field}.grpc.port`,
              5,
              `is ${String(port)}: the EPP serves gRPC health on ${health.flag}`,
            ),
          ];
    }),
  );
}

/** EPP containers behind a Service (by its selector). */
function eppsBehind(testbed: Testbed, service: KubeObject): ContainerRef[] {
  const selector = record(record(service.spec).selector);
  return testbed.epps.filter(
    (ref) =>
      sameNamespace(ref.pod.namespace, namespaceOf(service)) && selects(stringMap(selector), ref.pod.labels),
  );
}

/**
 * Lesson 5: `--secure-serving` matches the Envoy side. A plaintext ext_proc cluster needs
 * `--secure-serving=false`; an upstream TLS context needs it on (the default).
 */
export function eppSecureServingMatchesEnvoy(testbed: Testbed): Violation[] {
  return envoyConfigs(testbed).flatMap(({ configMap, key, config }) => {
    if (!config) return [];
    return extProcFilters(config).flatMap((filter) => {
      const clusterName = extProcClusterName(filter.node);
      const cluster = clusterNamed(config, clusterName);
      if (!cluster) return [];
      const tls = usesTls(cluster.node);
      const hosts = endpointAddresses(cluster).map(({ node }) => text(node.address));
      return hosts.flatMap((address) => {
        const host = address ? hostOf(address) : undefined;
        const target = host ? resolveDnsName(testbed, host, namespaceOf(configMap)) : undefined;
        if (target?.kind !== 'service') return [];
        return eppsBehind(testbed, target.service).flatMap((ref) => {
          const invocation = mainInvocation(ref);
          if (!invocation) return [];
          const secure = goBool(eppFlags(ref), 'secure-serving', true);
          if (secure === tls) return [];
          const envoySide = `cluster ${clusterName} in ${objectRef(configMap)} (${fieldPath(['data', key, ...cluster.path])})`;
          const message = secure
            ? `--secure-serving is on (the default) but the Envoy ${envoySide} is plaintext: every ext_proc stream fails its TLS handshake; set --secure-serving=false`
            : `--secure-serving=false but the Envoy ${envoySide} speaks TLS: the handshake fails; drop the flag or the transport_socket`;
          return [violation(ref.pod.object, invocation.field, 5, message)];
        });
      });
    });
  });
}

interface Grant {
  readonly group: string;
  readonly resource: string;
  readonly verbs: readonly string[];
}

function allows(rules: readonly Json[], grant: Grant): boolean {
  const has = (values: unknown, wanted: string) => strings(values).some((v) => v === wanted || v === '*');
  return grant.verbs.every((verb) =>
    rules.some(
      (rule) =>
        has(rule.apiGroups, grant.group) && has(rule.resources, grant.resource) && has(rule.verbs, verb),
    ),
  );
}

function boundToServiceAccount(binding: KubeObject, account: string, namespace: string | undefined): boolean {
  return list(binding.subjects).some((value) => {
    const subject = record(value);
    const subjectNamespace = text(subject.namespace) ?? namespaceOf(binding);
    return (
      subject.kind === 'ServiceAccount' &&
      subject.name === account &&
      sameNamespace(subjectNamespace, namespace)
    );
  });
}

function roleRules(testbed: Testbed, binding: KubeObject): Json[] {
  const ref = record(binding.roleRef);
  const name = text(ref.name) ?? '';
  const role =
    ref.kind === 'ClusterRole'
      ? ofKind(testbed, 'ClusterRole').find((r) => nameOf(r) === name)
      : findObject(testbed, 'Role', name, namespaceOf(binding));
  return list(role?.rules).map(record);
}

/** Rules granted to a ServiceAccount cluster-wide, and in its namespace. */
function grantedRules(
  testbed: Testbed,
  account: string,
  namespace: string | undefined,
): { cluster: Json[]; local: Json[] } {
  const bound = (kind: string) =>
    ofKind(testbed, kind)
      .filter((binding) => boundToServiceAccount(binding, account, namespace))
      .flatMap((binding) => roleRules(testbed, binding));
  const cluster = bound('ClusterRoleBinding');
  return { cluster, local: [...cluster, ...bound('RoleBinding')] };
}

const REVIEW_GRANTS: Grant[] = [
  { group: 'authentication.k8s.io', resource: 'tokenreviews', verbs: ['create'] },
  { group: 'authorization.k8s.io', resource: 'subjectaccessreviews', verbs: ['create'] },
];

/**
 * Lesson 5: RBAC. Token and access reviews (cluster-scoped) through a bound ClusterRole, so the
 * metrics endpoint can authenticate scrapes; and read access to pods and pools in the namespace,
 * without which the EPP never syncs its pool.
 */
export function eppRbac(testbed: Testbed): Violation[] {
  return testbed.epps.flatMap((ref) => {
    const object = ref.pod.object;
    const field = `${ref.pod.path}.serviceAccountName`;
    const account = text(ref.pod.spec.serviceAccountName) ?? 'default';
    const namespace = ref.pod.namespace;
    const who = `ServiceAccount ${namespace ? `${namespace}/` : ''}${account}`;
    const found: Violation[] = [];
    if (account !== 'default' && !findObject(testbed, 'ServiceAccount', account, namespace)) {
      found.push(
        violation(object, field, 5, `${who} is not among the manifests: the pods are never created`),
      );
    }
    const rules = grantedRules(testbed, account, namespace);
    const missingReviews = REVIEW_GRANTS.filter((grant) => !allows(rules.cluster, grant));
    if (missingReviews.length > 0) {
      found.push(
        violation(
          object,
          field,
          5,
          `no ClusterRole bound to ${who} grants create on ${missingReviews.map((g) => g.resource).join(' and ')}: the metrics endpoint (9090) cannot authenticate scrapes`,
        ),
      );
    }
    const poolGroup = eppFlags(ref).values.get('pool-group') ?? 'inference.networking.k8s.io';
    const watches: Grant[] = [
      { group: '', resource: 'pods', verbs: ['get', 'list', 'watch'] },
      { group: poolGroup, resource: 'inferencepools', verbs: ['get', 'list', 'watch'] },
      {
        group: 'inference.networking.x-k8s.io',
        resource: 'inferenceobjectives',
        verbs: ['get', 'list', 'watch'],
      },
    ];
    const missingWatches = watches.filter((grant) => !allows(rules.local, grant));
    if (missingWatches.length > 0) {
      found.push(
        violation(
          object,
          field,
          5,
          `${who} may not get, list and watch ${missingWatches.map((g) => g.resource).join(' and ')}: the EPP cannot sync its pool and never becomes Ready`,
        ),
      );
    }
    return found;
  });
}

/**
 * Lesson 5: Go parses the EPP's whole command line. A boolean flag followed by a separate value
 * (`--secure-serving false`) turns the flag on and stops parsing at "false", so every later flag,
 * `--config-file` included, is silently ignored (Go flag.FlagSet.parseOne).
 */
export function eppFlagsParse(testbed: Testbed): Violation[] {
  return testbed.epps.flatMap((ref) => {
    const invocation = mainInvocation(ref);
    if (!invocation) return [];
    const flags = eppFlags(ref);
    const object = ref.pod.object;
    if (flags.error) {
      return [
        violation(
          object,
          invocation.field,
          5,
          `Go's flag parser rejects it (${flags.error}): the EPP exits at start`,
        ),
      ];
    }
    const stop = flags.stoppedAt;
    if (!stop) return [];
    const previous = invocation.words[stop.index - 1] ?? '';
    const boolFlag = previous.replace(/^--?/, '');
    const why = ['true', 'false'].includes(stop.word.toLowerCase())
      ? `"${previous} ${stop.word}" is read by Go as ${previous} (true) followed by the positional word "${stop.word}"; a boolean flag takes its value only as ${previous}=${stop.word}`
      : `Go's flag parser stops at the positional word "${stop.word}"`;
    const ignored = stop.ignored.filter((word) => word.startsWith('-'));
    return [
      violation(
        object,
        invocation.field,
        5,
        `${why}, so every later flag is ignored (${ignored.join(' ') || 'none'})${boolFlag === 'secure-serving' ? ' and secure serving stays on' : ''}; write ${previous}=${stop.word}`,
      ),
    ];
  });
}

/**
 * Lesson 5: every plugin type in the scheduler configuration is registered by the EPP image that
 * reads it; otherwise the EPP exits with "plugin type '<type>' is not found in registry"
 * (GAIE v1.0.1 pkg/epp/config/loader instantiatePlugins).
 */
export function eppPluginTypesRegistered(testbed: Testbed): Violation[] {
  return testbed.epps.flatMap((ref) => {
    const registry = pluginRegistry(ref.image);
    const config = registry ? eppSchedulerConfig(testbed, ref) : undefined;
    if (!registry || !config) return [];
    return pluginsOf(config).flatMap(({ plugin, index }) => {
      const type = text(plugin.type);
      if (type === undefined || registry.types.has(type)) return [];
      return [
        violation(
          config.object,
          `${config.field}.plugins[${index}].type`,
          5,
          `"${type}" is not a plugin type ${ref.image} registers (${registry.component}: ${[...registry.types].join(', ')}): ${objectRef(ref.pod.object)} exits with "plugin type '${type}' is not found in registry"`,
        ),
      ];
    });
  });
}

/** EPP images whose plugin registry the checker does not know: their plugin types are not judged. */
export function unknownPluginRegistries(testbed: Testbed): { ref: ContainerRef; image: string }[] {
  return testbed.epps.filter((ref) => !pluginRegistry(ref.image)).map((ref) => ({ ref, image: ref.image }));
}
