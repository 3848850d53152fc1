/**
 * The Endpoint Picker's scheduler configuration (`EndpointPickerConfig`,
 * `inference.networking.x-k8s.io/v1alpha1`) as typed objects. The EPP decodes it strictly and
 * wants integer weights, so the builders below are the only place these documents are made.
 */

export const ENDPOINT_PICKER_CONFIG_API_VERSION = 'inference.networking.x-k8s.io/v1alpha1';
export const ENDPOINT_PICKER_CONFIG_KIND = 'EndpointPickerConfig';

/** One plugin instance; `name` defaults to `type` in the EPP. */
export interface PluginSpec {
  readonly type: string;
  readonly name?: string;
  readonly parameters?: Readonly<Record<string, unknown>>;
}

/** A plugin used by a scheduling profile; scorers carry an integer weight (default 1). */
export interface SchedulingPluginRef {
  readonly pluginRef: string;
  readonly weight?: number;
}

export interface SchedulingProfile {
  readonly name: string;
  readonly plugins: readonly SchedulingPluginRef[];
}

export interface EndpointPickerConfig {
  readonly apiVersion: typeof ENDPOINT_PICKER_CONFIG_API_VERSION;
  readonly kind: typeof ENDPOINT_PICKER_CONFIG_KIND;
  readonly plugins: readonly PluginSpec[];
  readonly schedulingProfiles: readonly SchedulingProfile[];
}

/** Scorer weights of the GAIE default scheduler (docs/facts.md §3.4). */
export interface GaieScorerWeights {
  readonly queue: number;
  readonly kvCacheUtilization: number;
  readonly prefixCache: number;
}

function integerWeight(name: string, weight: number): number {
  if (!Number.isInteger(weight) || weight < 0) {
    throw new Error(`${name} weight must be a non-negative integer, got ${weight}`);
  }
  return weight;
}

/**
 * GAIE v1.0.1's three scorers in one `default` profile. With one profile and no picker the EPP
 * adds its single-profile handler and max-score picker itself.
 */
export function gaieSchedulerConfig(weights: GaieScorerWeights): EndpointPickerConfig {
  return {
    apiVersion: ENDPOINT_PICKER_CONFIG_API_VERSION,
    kind: ENDPOINT_PICKER_CONFIG_KIND,
    plugins: [
      { type: 'queue-scorer' },
      { type: 'kv-cache-utilization-scorer' },
      { type: 'prefix-cache-scorer' },
    ],
    schedulingProfiles: [
      {
        name: 'default',
        plugins: [
          { pluginRef: 'queue-scorer', weight: integerWeight('queue-scorer', weights.queue) },
          {
            pluginRef: 'kv-cache-utilization-scorer',
            weight: integerWeight('kv-cache-utilization-scorer', weights.kvCacheUtilization),
          },
          {
            pluginRef: 'prefix-cache-scorer',
            weight: integerWeight('prefix-cache-scorer', weights.prefixCache),
          },
        ],
      },
    ],
  };
}

export interface PrecisePrefixCacheOptions {
  /** Tokens per KV block; must equal the replicas' `--block-size`. */
  readonly blockSize: number;
  /** Hash seed; must equal the replicas' PYTHONHASHSEED. */
  readonly hashSeed: string;
  /**
   * Writable folder the scorer loads tokenizers from: `<dir>/<request model>/tokenizer.json`.
   * Without it the cache dir is a path baked in at build time that the image (UID 65532) cannot create.
   */
  readonly tokenizersCacheDir: string;
  readonly weights: {
    readonly precisePrefixCache: number;
    readonly kvCacheUtilization: number;
    readonly queue: number;
  };
}

/** llm-d v0.3.2's precise prefix-cache scheduler (docs/facts.md §3.7), built on GAIE v1.0.0. */
export function precisePrefixCacheConfig(options: PrecisePrefixCacheOptions): EndpointPickerConfig {
  const { weights } = options;
  return {
    apiVersion: ENDPOINT_PICKER_CONFIG_API_VERSION,
    kind: ENDPOINT_PICKER_CONFIG_KIND,
    plugins: [
      { type: 'single-profile-handler' },
      {
        type: 'precise-prefix-cache-scorer',
        // llm-d-kv-cache-manager v0.3.2: kvcache.Config (json `tokenProcessorConfig`,
        // `tokenizersPoolConfig`); tokenization.Config embeds HFTokenizerConfig, so
        // `tokenizersCacheDir` sits directly in `tokenizersPoolConfig`. The scorer's factory
        // (llm-d-inference-scheduler v0.3.2 PrecisePrefixCachePluginFactory) unmarshals these over
        // the defaults, so unset fields (workersCount, ...) keep their default values.
        parameters: {
          indexerConfig: {
            tokenProcessorConfig: { blockSize: options.blockSize, hashSeed: options.hashSeed },
            // The runner's evidence that the scorer indexed KV events and looked prompts up:
            // kvblock.NewIndex registers the kvcache_index_* counters with controller-runtime's
            // registry (served on :9090) only when enableMetrics is true (kvblock/index.go).
            kvBlockIndexConfig: { enableMetrics: true },
            tokenizersPoolConfig: { tokenizersCacheDir: options.tokenizersCacheDir },
          },
        },
      },
      { type: 'kv-cache-utilization-scorer' },
      { type: 'queue-scorer' },
      { type: 'max-score-picker' },
    ],
    schedulingProfiles: [
      {
        name: 'default',
        plugins: [
          {
            pluginRef: 'precise-prefix-cache-scorer',
            weight: integerWeight('precise-prefix-cache-scorer', weights.precisePrefixCache),
          },
          {
            pluginRef: 'kv-cache-utilization-scorer',
            weight: integerWeight('kv-cache-utilization-scorer', weights.kvCacheUtilization),
          },
          { pluginRef: 'queue-scorer', weight: integerWeight('queue-scorer', weights.queue) },
          { pluginRef: 'max-score-picker' },
        ],
      },
    ],
  };
}
