import { parse as parseYaml } from 'yaml';
import { type GoFlags, parseGoFlags } from './go-flags.ts';
import { isRecord, type Json, type KubeObject, list, record, text } from './manifest.ts';
import { mountedConfigMapFile } from './mounts.ts';
import { looksLikeEndpointPickerConfig } from './schemas.ts';
import { type ContainerRef, findObject, imageRepository, mainInvocation, type Testbed } from './testbed.ts';

/** An Endpoint Picker as `lab check` reads it: its Go flags and its scheduler configuration. */

/** The EPP's flags as its Go flag package parses them. */
export function eppFlags(ref: ContainerRef): GoFlags {
  return parseGoFlags(mainInvocation(ref)?.words ?? []);
}

export interface SchedulerConfig {
  /** The parsed EndpointPickerConfig. */
  readonly document: Json;
  /** Where it lives: the ConfigMap (file) or the EPP workload (`--config-text`). */
  readonly object: KubeObject;
  readonly field: string;
}

/** The EndpointPickerConfig an EPP starts with, when the manifests hold it and it parses. */
export function eppSchedulerConfig(testbed: Testbed, ref: ContainerRef): SchedulerConfig | undefined {
  const flags = eppFlags(ref);
  const inline = flags.values.get('config-text');
  if (inline !== undefined) {
    const document = parseDocument(inline);
    const field = mainInvocation(ref)?.field ?? ref.path;
    return document ? { document, object: ref.pod.object, field } : undefined;
  }
  const file = flags.values.get('config-file');
  const mount = file === undefined ? undefined : mountedConfigMapFile(ref, file);
  if (!mount?.key) return undefined;
  const configMap = findObject(testbed, 'ConfigMap', mount.configMap, ref.pod.namespace);
  const source = configMap ? text(record(configMap.data)[mount.key]) : undefined;
  if (!configMap || source === undefined || !looksLikeEndpointPickerConfig(source)) return undefined;
  const document = parseDocument(source);
  return document ? { document, object: configMap, field: `data[${JSON.stringify(mount.key)}]` } : undefined;
}

function parseDocument(source: string): Json | undefined {
  try {
    const document: unknown = parseYaml(source);
    return isRecord(document) ? document : undefined;
  } catch {
    return undefined;
  }
}

/** The plugins of a scheduler configuration, with their index. */
export function pluginsOf(config: SchedulerConfig): { plugin: Json; index: number }[] {
  return list(config.document.plugins).map((plugin, index) => ({ plugin: record(plugin), index }));
}

/**
 * Plugin types each pinned EPP image registers. GAIE v1.0.1: Runner.registerInTreePlugins in
 * cmd/epp/runner/runner.go. llm-d-inference-scheduler v0.3.2: plugins.RegisterAllPlugins in
 * pkg/plugins/register.go, called by its cmd/epp/main.go before GAIE's runner (GAIE v1.0.0, whose
 * in-tree registrations are the same as v1.0.1's) adds its own.
 */
const GAIE_V1_0_PLUGINS = [
  'prefix-cache-scorer',
  'max-score-picker',
  'random-picker',
  'weighted-random-picker',
  'single-profile-handler',
  'kv-cache-utilization-scorer',
  'queue-scorer',
  'lora-affinity-scorer',
  'header-based-testing-filter',
] as const;

const LLMD_V0_3_PLUGINS = [
  ...GAIE_V1_0_PLUGINS,
  'by-label',
  'by-label-selector',
  'decode-filter',
  'prefill-filter',
  'prefill-header-handler',
  'pd-profile-handler',
  'precise-prefix-cache-scorer',
  'load-aware-scorer',
  'session-affinity-scorer',
  'active-request-scorer',
] as const;

export interface PluginRegistry {
  /** `GAIE v1.0.1`, `llm-d inference scheduler v0.3.2` */
  readonly component: string;
  readonly types: ReadonlySet<string>;
}

const REGISTRIES: { repository: RegExp; tag: RegExp; registry: PluginRegistry }[] = [
  {
    repository: /(^|\/)gateway-api-inference-extension\/epp$/,
    tag: /^v1\.0\.\d+$/,
    registry: { component: 'GAIE v1.0', types: new Set(GAIE_V1_0_PLUGINS) },
  },
  {
    repository: /(^|\/)llm-d\/llm-d-inference-scheduler$/,
    tag: /^v0\.3\.\d+$/,
    registry: { component: 'llm-d inference scheduler v0.3', types: new Set(LLMD_V0_3_PLUGINS) },
  },
];

/** The registry of an EPP image, when the checker knows that image and version. */
export function pluginRegistry(image: string): PluginRegistry | undefined {
  const repository = imageRepository(image);
  const rest = image.split('@')[0].slice(repository.length);
  const tag = rest.startsWith(':') ? rest.slice(1) : '';
  return REGISTRIES.find((entry) => entry.repository.test(repository) && entry.tag.test(tag))?.registry;
}
