import { parse as parseYaml } from 'yaml';
import { flagValue } from './command-line.ts';
import { isRecord, type Json, type KubeObject, list, namespaceOf, record, text } from './manifest.ts';
import { type MountedFile, mountedConfigMapFile } from './mounts.ts';
import { type ContainerRef, findObject, ofKind, type Testbed } from './testbed.ts';

/** Reading a standalone Envoy's bootstrap configuration (docs/facts.md §3.5) out of its ConfigMap. */

/** The conventional key; any ConfigMap carrying it is read as an Envoy configuration. */
export const ENVOY_CONFIG_KEY = 'envoy.yaml';

export interface EnvoyConfig {
  readonly configMap: KubeObject;
  readonly key: string;
  /** The parsed document, or the parse error. */
  readonly config: Json | undefined;
  readonly parseError?: string;
}

/** A node found inside the configuration, with its path from the document root. */
export interface Found {
  readonly node: Json;
  readonly path: (string | number)[];
}

/** The `-c` file of an Envoy container, as a ConfigMap key. */
export function envoyConfigFile(ref: ContainerRef): { path: string; mount?: MountedFile } | undefined {
  for (const invocation of ref.invocations) {
    const path = flagValue(invocation.words, '-c', '--config-path');
    if (path) return { path, mount: mountedConfigMapFile(ref, path) };
  }
  return undefined;
}

/** Every Envoy configuration among the manifests: keys mounted by Envoys, and every `envoy.yaml` key. */
export function envoyConfigs(testbed: Testbed): EnvoyConfig[] {
  const seen = new Set<string>();
  const configs: EnvoyConfig[] = [];
  const add = (configMap: KubeObject | undefined, key: string | undefined) => {
    const source = configMap && key ? text(record(configMap.data)[key]) : undefined;
    if (!configMap || !key || source === undefined) return;
    const id = `${namespaceOf(configMap)}/${record(configMap.metadata).name}/${key}`;
    if (seen.has(id)) return;
    seen.add(id);
    configs.push({ configMap, key, ...parseConfig(source) });
  };
  for (const ref of testbed.envoys) {
    const mount = envoyConfigFile(ref)?.mount;
    if (mount) add(findObject(testbed, 'ConfigMap', mount.configMap, ref.pod.namespace), mount.key);
  }
  for (const configMap of ofKind(testbed, 'ConfigMap')) {
    if (ENVOY_CONFIG_KEY in record(configMap.data)) add(configMap, ENVOY_CONFIG_KEY);
  }
  return configs;
}

function parseConfig(source: string): { config: Json | undefined; parseError?: string } {
  try {
    const config: unknown = parseYaml(source);
    return isRecord(config) ? { config } : { config: undefined, parseError: 'is not a YAML mapping' };
  } catch (error) {
    return { config: undefined, parseError: `is not valid YAML: ${(error as Error).message}` };
  }
}

/** Every mapping under `node` that satisfies the test, depth first. */
export function findAll(
  node: unknown,
  test: (node: Json) => boolean,
  path: (string | number)[] = [],
): Found[] {
  if (Array.isArray(node)) return node.flatMap((item, i) => findAll(item, test, [...path, i]));
  if (!isRecord(node)) return [];
  const here = test(node) ? [{ node, path }] : [];
  return [...here, ...Object.entries(node).flatMap(([key, value]) => findAll(value, test, [...path, key]))];
}

/** The ext_proc HTTP filters, with their typed_config. */
export function extProcFilters(config: Json): Found[] {
  return findAll(
    config,
    (node) =>
      node.name === 'envoy.filters.http.ext_proc' ||
      (text(record(node.typed_config)['@type'])?.endsWith('ext_proc.v3.ExternalProcessor') ?? false),
  );
}

export function clusters(config: Json): Found[] {
  return list(record(config.static_resources).clusters).map((cluster, i) => ({
    node: record(cluster),
    path: ['static_resources', 'clusters', i],
  }));
}

export function clusterNamed(config: Json, name: string | undefined): Found | undefined {
  return clusters(config).find((cluster) => cluster.node.name === name);
}

/** The cluster an ext_proc filter sends its gRPC stream to. */
export function extProcClusterName(filter: Json): string | undefined {
  return text(record(record(record(filter.typed_config).grpc_service).envoy_grpc).cluster_name);
}

/** Socket addresses of a cluster's endpoints. */
export function endpointAddresses(cluster: Found): Found[] {
  return findAll(cluster.node.load_assignment, (node) => isRecord(node.socket_address), [
    ...cluster.path,
    'load_assignment',
  ]).map(({ node, path }) => ({ node: record(node.socket_address), path: [...path, 'socket_address'] }));
}

/** An upstream TLS transport socket: what a cluster needs to talk to an EPP with secure serving. */
export function usesTls(cluster: Json): boolean {
  const socket = record(cluster.transport_socket);
  const type = text(record(socket.typed_config)['@type']) ?? '';
  return (text(socket.name) ?? '').includes('tls') || type.includes('UpstreamTlsContext');
}

/** HTTP/2 upstream, the old way or through typed_extension_protocol_options. */
export function usesHttp2(cluster: Json): boolean {
  if (isRecord(cluster.http2_protocol_options)) return true;
  return Object.values(record(cluster.typed_extension_protocol_options)).some((options) => {
    const http = record(options);
    return isRecord(record(http.explicit_http_config).http2_protocol_options);
  });
}
