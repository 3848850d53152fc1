/** The simulator's vocabulary: routing policies, front-end models, inputs, results and the physical model. */

export type RoutingPolicy =
  /** One replica alone: all traffic to replica 0 (the replicas parameter is ignored and taken as 1). */
  | 'single-replica'
  /** Uniformly random replica per request (seeded PRNG). */
  | 'random'
  /** kube-proxy with keep-alive: `concurrency` connections, each pinned to a random replica when opened;
   * a request goes out on the connection that just freed up, so it lands where that connection points. */
  | 'per-connection'
  | 'round-robin'
  /** Fewest in-flight requests, ties to the lowest index: what vllm-router's cache_aware does over chat. */
  | 'least-loaded'
  /** Each prefix pinned to one replica, prefixes split evenly in contiguous blocks (see routePrefixIdeal). */
  | 'ideal-partition'
  /**
   * Hypothetical: each prefix hashed onto a ring of replica points (ketama style); deterministic, can
   * be uneven. No front end of the study routes this way: vllm-router's `consistent_hash` hashes
   * headers or the whole request, not the prefix, hence the distinct name.
   */
  | 'prefix-hash';

/**
 * vllm-router's `cache_aware` policy (vllm-project/router, src/policies/cache_aware.rs,
 * CacheAwarePolicy::select_worker_cache_aware*; the 0.1.x line after sgl-router's `get_smallest_tenant`
 * was dropped from the selection):
 * - load = the router's own in-flight counter per worker (Worker::load, src/core/worker.rs): +1 after
 *   the pick, -1 when the response stream ends; the health checker resets it to 0 every 10th check;
 * - imbalanced when (max - min) > balanceAbsThreshold and max > min x balanceRelThreshold: the least
 *   loaded worker (`min_by_key(load)`, the first in registry order on a tie); the text still enters
 *   that worker's tree;
 * - otherwise the approximate radix tree of routed text: match rate = matched chars / text chars, 0.0
 *   for an empty text; above cacheThreshold the worker holding the match, else again the least loaded
 *   worker (tree size is not consulted);
 * - every evictionIntervalSecs a background thread trims each tree above maxTreeSize characters,
 *   least recently used first (`evict_tenant_by_size`).
 * The routing text of a chat request is `session_params.session_id` or "" (src/protocols/spec.rs):
 * `messages` is never read (docs/facts.md §3.3). Over chat every request takes the low-match branch, so
 * cache_aware routes on load alone, exactly as the `least-loaded` reference policy, and the balance
 * thresholds change nothing.
 */
export interface CacheAwareRouterModel {
  readonly kind: 'vllm-router-cache-aware';
  /** The router reads the prompt over this API (lib/study/prompt-visibility.ts). */
  readonly promptVisible: boolean;
  readonly cacheThreshold: number;
  readonly balanceAbsThreshold: number;
  readonly balanceRelThreshold: number;
  readonly evictionIntervalSecs: number;
  readonly maxTreeSize: number;
  /** Seconds between the health checker's load-counter resets (10 checks); absent or 0: never. */
  readonly loadResetIntervalSecs?: number;
  /**
   * Seconds from the load's start to the first reset; absent: one `loadResetIntervalSecs`. The checker
   * counts a check at its start (tokio's first tick is immediate), so the 10th comes 9 intervals later.
   */
  readonly loadResetFirstSecs?: number;
}

/**
 * The GAIE v1.0.1 Endpoint Picker with queue, kv-cache-utilization and prefix-cache scorers and the
 * max-score picker (pkg/epp/scheduling/framework/...):
 * - prefix-cache-scorer (plugins/multi/prefix/plugin.go, Score and hashPrompt): the prompt's bytes in
 *   blocks of hashBlockSize (64), at most maxPrefixBlocksToMatch (256) blocks, chained hashes; a pod's
 *   score is the blocks of the longest cached run it holds / the request's blocks. After the pick
 *   (PreRequest) every block hash is added to the picked pod's LRU (indexer.go, Add), lruCapacityPerServer
 *   (31,250) blocks per pod, least recently added evicted first. An empty prompt has no block: score 0.
 * - queue-scorer (scorer/queue.go): (max waiting - pod waiting) / (max - min), 1 when all are equal;
 * - kv-cache-utilization-scorer (scorer/kvcache_utilization.go): 1 - KV usage;
 * - the profile adds score x integer weight (scheduler_profile.go, runScorerPlugins) and the
 *   max-score picker (picker/max_score_picker.go) shuffles, then takes the highest: random ties.
 * Waiting queue and KV usage are what the EPP last scraped, every refreshMetricsMs (50 ms,
 * server/runserver.go DefaultRefreshMetricsInterval).
 */
export interface EndpointPickerModel {
  readonly kind: 'gaie-epp';
  readonly promptVisible: boolean;
  readonly weights: {
    readonly queue: number;
    readonly kvCacheUtilization: number;
    readonly prefixCache: number;
  };
  readonly hashBlockSize: number;
  readonly maxPrefixBlocksToMatch: number;
  readonly lruCapacityPerServer: number;
  readonly refreshMetricsMs: number;
}

/**
 * llm-d inference scheduler v0.3.2's precise-prefix-cache-scorer (pkg/plugins/scorer/precise_prefix_cache.go,
 * Score; utils.go indexedScoresToNormalizedScoredPods) with the GAIE queue and KV scorers and the
 * max-score picker. The index is fed by the replicas' KV events, so it mirrors their caches: a pod's
 * raw score is its longest run of cached blocks from the prompt's start (llm-d-kv-cache-manager v0.3.2,
 * pkg/kvcache/kvblock_scorer.go LongestPrefixScorer); pods without a hit are absent and score 0, the
 * others are min-max normalized (one pod alone, or all equal: 1). Event delivery lag is not modelled.
 */
export interface PrecisePrefixModel {
  readonly kind: 'llmd-precise';
  readonly promptVisible: boolean;
  readonly weights: {
    readonly precisePrefixCache: number;
    readonly kvCacheUtilization: number;
    readonly queue: number;
  };
  readonly refreshMetricsMs: number;
}

/** A real front end of the study, derived from its source at the pinned version. */
export type FrontEndModel = CacheAwareRouterModel | EndpointPickerModel | PrecisePrefixModel;

/** What simulate() routes by: a generic reference policy or a front-end model. */
export type Routing = RoutingPolicy | FrontEndModel;

/** The name a result carries: the policy, or the front-end model's kind. */
export function routingName(routing: Routing): string {
  return typeof routing === 'string' ? routing : routing.kind;
}

export const ROUTING_POLICIES: readonly RoutingPolicy[] = [
  'single-replica',
  'random',
  'per-connection',
  'round-robin',
  'least-loaded',
  'ideal-partition',
  'prefix-hash',
];

export interface SimulationInput {
  /** R >= 1. */
  replicas: number;
  /** "GPU KV cache size" from the vLLM log, e.g. 163,472 on an L4 at 0.85 utilization. */
  kvCacheTokensPerReplica: number;
  /** vLLM --block-size, e.g. 16. */
  blockSize: number;
  /** Distinct prefixes, e.g. 128. */
  prefixes: number;
  /** Prefix tokens, e.g. 2048. */
  prefixLen: number;
  /** Unique suffix tokens per request, e.g. 128. */
  suffixLen: number;
  /** Tokens the chat template adds, e.g. 10 (2048 + 128 + 10 = 2186 looked-up tokens). */
  chatTemplateTokens: number;
  /** Generated tokens per request, e.g. 128. */
  outputLen: number;
  /** Requests, e.g. 1024; prefix i gets floor(prompts/prefixes) of them, the first prompts % prefixes one more. */
  prompts: number;
  /** Maximum requests in flight (the client's --max-concurrency), e.g. 32. */
  concurrency: number;
  /** Seeds the prompt order, the routing draws and the prefix hashes. */
  seed: number;
}

export interface ReplicaResult {
  requests: number;
  /** Looked-up prompt tokens (vllm:prefix_cache_queries_total). */
  queriedTokens: number;
  /** Tokens served from the prefix cache (vllm:prefix_cache_hits_total). */
  hitTokens: number;
  /** hitTokens / queriedTokens, 0 for a replica without requests. */
  hitRate: number;
  /** Most requests running at once (the peak of vllm:num_requests_running). */
  peakRunning: number;
}

/** Rough performance figures of the simulated run; the hit rates are the calibrated output. */
export interface SimulationTiming {
  /** Virtual time from the first request to the last response. */
  durationSeconds: number;
  /** Dispatch to first token, queueing included. */
  meanTtftMs: number;
  /** Median of the requests' TTFTs. */
  medianTtftMs: number;
  /** 99th percentile of the requests' TTFTs (nearest rank). */
  p99TtftMs: number;
  /**
   * The same over the requests sent after the opening burst (the first `concurrency`, sent at once,
   * all cold): the steady-state tail, which docs/planning.md holds apart from the burst's.
   */
  p99TtftAfterOpeningMs: number;
  /** Mean time between output tokens after the first; with every request generating the same
   * number of tokens (--ignore-eos) it is also the mean TPOT. */
  meanItlMs: number;
  /** (prompt tokens without the chat template + output tokens) / duration, as the benchmark client counts. */
  totalTokensPerSecond: number;
  /** Output tokens / duration. */
  outputTokensPerSecond: number;
  /** Requests / duration. */
  requestsPerSecond: number;
}

export interface SimulationResult {
  /** The reference policy, or the front-end model's kind. */
  policy: string;
  /** Sum of hits / sum of queries over all replicas. */
  hitRate: number;
  perReplica: ReplicaResult[];
  timing: SimulationTiming;
}

/**
 * Physically meaningful tunables. Defaults describe Qwen3-0.6B-FP8 on an NVIDIA L4 under vLLM 0.11
 * (docs/facts.md §3.1). None is fitted per data point: the five timing coefficients (step overhead,
 * bandwidth, prefill cost, the API server's time per request and per token) were fitted once to
 * docs/facts.md §4.1's calibration table (scripts/bench-calibration.ts prints the in-sample error), inside
 * physical bounds (lib/study/calibration.ts COEFFICIENT_BOUNDS); the rest come from the model's
 * shape and the L4 datasheet.
 */
export interface SimulationModel {
  /** Fraction of the reported KV cache the simulator may use (1 = all of it). */
  kvCacheUsableFraction: number;
  /** Blocks never available to requests: vLLM v1 reserves block 0 as the null block. */
  reservedBlocks: number;
  /** Token budget of one engine step (max_num_batched_tokens; vLLM 0.11 serves 2048 on GPUs under 70 GB). */
  maxNumBatchedTokens: number;
  /** Running-request cap of one engine (max_num_seqs; default 256). */
  maxNumSeqs: number;
  /** Per-step cost that does not scale with the batch: weight reads (~0.8 GB at 300 GB/s = 2.7 ms),
   * kernel launches, the Python scheduler and sampling. */
  stepOverheadMs: number;
  /** KV bytes per token: 2 (K,V) x 28 layers x 8 KV heads x 128 head dim x 2 bytes (bf16) for Qwen3-0.6B. */
  kvBytesPerToken: number;
  /** Effective GPU memory bandwidth in GB/s (L4 datasheet: 300). Every distinct pinned block is read once per step. */
  memoryBandwidthGBps: number;
  /** Compute cost of one prefill token inside a step (about 1.2 GFLOP per token plus attention over the context). */
  prefillMsPerToken: number;
  /**
   * API-server time per request before its first token can be streamed: HTTP parsing, the chat
   * template and tokenizing the prompt (vLLM's API server process, separate from the engine core).
   */
  frontEndMsPerRequest: number;
  /** API-server time per streamed output token: detokenizing and one SSE chunk. */
  frontEndMsPerOutputToken: number;
  /** Points per replica on the prefix-hash ring (ketama uses 160). */
  hashRingVirtualNodes: number;
  /**
   * Characters (and UTF-8 bytes) of prompt text per token, for the front ends that hash or match text
   * rather than tokens (vllm-router's tree, the EPP's 64-byte blocks). An assumption (UNCONFIRMED for
   * prefix_repetition's random tokens): it moves where the EPP's 256-block window ends.
   */
  promptCharsPerToken: number;
}

export const DEFAULT_SIMULATION_MODEL: SimulationModel = {
  kvCacheUsableFraction: 1,
  reservedBlocks: 1,
  maxNumBatchedTokens: 2048,
  maxNumSeqs: 256,
  stepOverheadMs: 12.6,
  kvBytesPerToken: 114_688,
  memoryBandwidthGBps: 300,
  // 0.028 ms per token is about 3.4 GFLOP at 121 TFLOP/s FP8: 1.2 GFLOP of weights plus attention.
  prefillMsPerToken: 0.028,
  // One Python API-server process per replica; fitted, consistent with its CPU time per 2k-token chat
  // request (template, tokenizer, scheduling the request) and per streamed SSE chunk.
  frontEndMsPerRequest: 46,
  frontEndMsPerOutputToken: 0.117,
  hashRingVirtualNodes: 160,
  promptCharsPerToken: 4,
};
