/**
 * A pure, deterministic simulator of vLLM's automatic prefix cache behind different routing policies.
 *
 * It replays the benchmark client of docs/facts.md §3.8 (prefix_repetition dataset, closed loop at
 * `concurrency`, request rate inf) against R replicas, each modelled as a vLLM v1 engine:
 *
 * - KV cache: a block pool of floor(kvCacheTokensPerReplica / blockSize) blocks minus vLLM's null block.
 *   Full blocks are identified by a hash chain, so a request hits the longest run of leading blocks
 *   already cached. Freed blocks join an LRU free queue in reverse order (a sequence's last block is
 *   evicted first); blocks of running requests are pinned and never evicted.
 * - Prompt layout: [chat template header][prefix][suffix]. All template tokens are placed before the
 *   prefix (Qwen3 puts about 3 before the user content and 5 after it): the shared part of two requests
 *   with the same prefix is then floor((template + prefix) / blockSize) blocks, 128 blocks = 2,048 hit
 *   tokens for the default workload either way. Suffix blocks are unique per request.
 * - Scheduling: per engine step, running decodes first, then continuing chunked prefills, then waiting
 *   requests first-come-first-served up to a token budget (max_num_batched_tokens). A waiting request
 *   that cannot get blocks blocks the queue behind it, as in vLLM's FCFS scheduler.
 * - Memory: a request reserves blocks for its prompt and all its output tokens when it is admitted
 *   (vLLM allocates decode blocks as it goes; reserving up front removes preemption from the model
 *   and moves an eviction earlier by at most one request lifetime).
 * - Time: step time = fixed overhead + distinct pinned KV blocks read / memory bandwidth + prefill
 *   tokens x per-token prefill cost. Requests sharing a prefix share physical blocks, which are read
 *   once per layer (the per-layer slice of a prefix fits the GPU's L2), so fewer distinct prefixes in a
 *   batch make decode faster - which is what the calibration ITLs show (22 ms at 8 prefixes, 43 ms at 128).
 *
 * Everything here is pure: no I/O, no clock, no Math.random. The same input gives the same result.
 */

export type RoutingPolicy =
  /** One replica alone: all traffic to replica 0 (the replicas parameter is ignored and taken as 1). */
  | 'single-replica'
  /** Uniformly random replica per request (seeded PRNG). */
  | 'random'
  /** kube-proxy with keep-alive: `concurrency` connections, each pinned to a random replica when opened;
   * a request goes out on the connection that just freed up, so it lands where that connection points. */
  | 'per-connection'
  | 'round-robin'
  /** Fewest in-flight requests, ties to the lowest index: vllm-router cache_aware without the prompt. */
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
 * CacheAwarePolicy::select_worker, the 0.1.x line with `tree.get_smallest_tenant()`):
 * - load = requests in flight per worker (the router increments it only for cache_aware);
 * - imbalanced when (max - min) > balanceAbsThreshold and max > min x balanceRelThreshold: the least
 *   loaded worker (first one on a tie), and the text is still inserted into that worker's tree;
 * - otherwise the approximate radix tree of routed text: match rate = matched chars / text chars;
 *   above cacheThreshold the worker with the match, else the worker whose tree holds the fewest
 *   characters (`get_smallest_tenant`), ties to the first of the router's hash map (replica 0 here);
 * - every evictionIntervalSecs a background thread trims each tree above maxTreeSize characters,
 *   least recently used first (`evict_tenant_by_size`).
 * Without the prompt (chat, docs/facts.md §3.3) the text is "": the match is 0, nothing enters the trees,
 * every tree stays at 0 characters, so every request goes to the same worker until the load
 * imbalance crosses both thresholds - the manual lab's "20/0 to one worker".
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
 * (docs/facts.md §3.1). None is fitted per data point: the three step-time coefficients were chosen once so
 * that the simulated ITLs across the four calibration runs land near the measured 22-43 ms, and the
 * bandwidth is the L4's datasheet figure.
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
  stepOverheadMs: 12,
  kvBytesPerToken: 114_688,
  memoryBandwidthGBps: 300,
  prefillMsPerToken: 0.02,
  hashRingVirtualNodes: 160,
  promptCharsPerToken: 4,
};

// ---------------------------------------------------------------------------------------------------
// Deterministic randomness

/** mulberry32: a 32-bit state PRNG, plenty for shuffles and routing draws, returns [0, 1). */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** murmur3's 32-bit finalizer: a cheap avalanche mix for hashing integers. */
export function mix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

// Separate streams so that the prompt order does not depend on the routing policy's draws.
const ROUTING_STREAM = 0x9e3779b9;
const PREFIX_HASH_STREAM = 0x7f4a7c15;

// ---------------------------------------------------------------------------------------------------
// Workload

/**
 * Prefix id of each prompt in send order: every prefix repeated, then the whole list shuffled
 * (Fisher-Yates with the seed), as vLLM's prefix_repetition dataset does. vLLM drops the remainder of
 * prompts / prefixes; here it goes to the first prefixes so that exactly `prompts` requests are sent.
 */
export function promptOrder(input: Pick<SimulationInput, 'prefixes' | 'prompts' | 'seed'>): Int32Array {
  const { prefixes, prompts, seed } = input;
  const order = new Int32Array(prompts);
  const base = Math.floor(prompts / prefixes);
  const extra = prompts % prefixes;
  let k = 0;
  for (let p = 0; p < prefixes; p++) {
    const n = base + (p < extra ? 1 : 0);
    order.fill(p, k, k + n);
    k += n;
  }
  const rng = mulberry32(seed);
  for (let i = prompts - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    const t = order[i] as number;
    order[i] = order[j] as number;
    order[j] = t;
  }
  return order;
}

/** Block geometry of one request; all requests of the workload have the same shape. */
export interface RequestShape {
  /** Template + prefix + suffix: what vLLM looks up and counts as queries. */
  lookedUpTokens: number;
  /** Leading full blocks identical for every request with the same prefix. */
  sharedBlocks: number;
  /** Most blocks a request can hit: vLLM always recomputes the last prompt token. */
  maxHitBlocks: number;
  /** Blocks reserved on admission: prompt plus output tokens. */
  totalBlocks: number;
}

export function requestShape(
  input: Pick<SimulationInput, 'blockSize' | 'prefixLen' | 'suffixLen' | 'chatTemplateTokens' | 'outputLen'>,
): RequestShape {
  const { blockSize, prefixLen, suffixLen, chatTemplateTokens, outputLen } = input;
  const lookedUpTokens = chatTemplateTokens + prefixLen + suffixLen;
  const sharedBlocks = Math.floor((chatTemplateTokens + prefixLen) / blockSize);
  const maxHitBlocks = Math.min(sharedBlocks, Math.floor((lookedUpTokens - 1) / blockSize));
  const totalBlocks = Math.ceil((lookedUpTokens + outputLen) / blockSize);
  return { lookedUpTokens, sharedBlocks, maxHitBlocks, totalBlocks };
}

/**
 * Best possible single-replica hit rate of the workload: every request after a prefix's first hits
 * all shareable blocks. It is docs/facts.md §4.1's (r-1)/r x P/L with P rounded down to whole blocks.
 */
export function hitRateBound(input: SimulationInput): number {
  if (input.prompts === 0) return 0;
  const shape = requestShape(input);
  const repeatedRequests = input.prompts - Math.min(input.prefixes, input.prompts);
  return (repeatedRequests * shape.maxHitBlocks * input.blockSize) / (input.prompts * shape.lookedUpTokens);
}

/** Usable blocks of one replica's pool. */
export function usableBlocks(input: SimulationInput, model: SimulationModel): number {
  const tokens = Math.floor(input.kvCacheTokensPerReplica * model.kvCacheUsableFraction);
  return Math.max(0, Math.floor(tokens / input.blockSize) - model.reservedBlocks);
}

// ---------------------------------------------------------------------------------------------------
// KV block pool

const NONE = -1;

/**
 * One replica's KV blocks, vLLM v1 style. A block is pinned while its reference count is positive; at
 * zero it sits in the free queue (head = next to evict) and keeps its content key, so it can still be
 * hit until it is reallocated. Keys are (prefix, block index) chain positions; a key can have several
 * physical copies when a chain was recomputed after a middle block was evicted. Every operation is O(1).
 */
export class BlockPool {
  readonly capacity: number;
  private readonly refCount: Int32Array;
  private readonly blockKey: Int32Array;
  private readonly freePrev: Int32Array;
  private readonly freeNext: Int32Array;
  private freeHead = NONE;
  private freeTail = NONE;
  private freeSize = 0;
  private readonly keyFirst: Int32Array;
  private readonly copyPrev: Int32Array;
  private readonly copyNext: Int32Array;

  constructor(capacity: number, keys: number) {
    this.capacity = capacity;
    this.refCount = new Int32Array(capacity);
    this.blockKey = new Int32Array(capacity).fill(NONE);
    this.freePrev = new Int32Array(capacity);
    this.freeNext = new Int32Array(capacity);
    this.copyPrev = new Int32Array(capacity).fill(NONE);
    this.copyNext = new Int32Array(capacity).fill(NONE);
    this.keyFirst = new Int32Array(keys).fill(NONE);
    for (let b = 0; b < capacity; b++) this.appendFree(b);
  }

  get freeBlocks(): number {
    return this.freeSize;
  }

  get pinnedBlocks(): number {
    return this.capacity - this.freeSize;
  }

  isPinned(block: number): boolean {
    return (this.refCount[block] as number) > 0;
  }

  /** A physical block holding `key`, or -1. */
  cached(key: number): number {
    return this.keyFirst[key] as number;
  }

  /** Takes a reference; a free cached block leaves the free queue (vLLM's touch). */
  pin(block: number): void {
    const ref = this.refCount[block] as number;
    if (ref === 0) this.unlinkFree(block);
    this.refCount[block] = ref + 1;
  }

  /** Evicts the least recently freed block and returns it pinned and empty. Never touches pinned blocks. */
  allocate(): number {
    const block = this.freeHead;
    if (block === NONE) throw new RangeError('no free KV block: every block is pinned');
    this.unlinkFree(block);
    this.dropKey(block);
    this.refCount[block] = 1;
    return block;
  }

  /** Drops a reference; at zero the block becomes evictable, most recently freed last. */
  release(block: number): void {
    const ref = (this.refCount[block] as number) - 1;
    if (ref < 0) throw new RangeError(`block ${block} released more often than pinned`);
    this.refCount[block] = ref;
    if (ref === 0) this.appendFree(block);
  }

  /** Records that `block` now holds the KV of chain position `key`, so later requests can hit it. */
  assign(block: number, key: number): void {
    this.dropKey(block);
    this.blockKey[block] = key;
    const first = this.keyFirst[key] as number;
    this.copyPrev[block] = NONE;
    this.copyNext[block] = first;
    if (first !== NONE) this.copyPrev[first] = block;
    this.keyFirst[key] = block;
  }

  /**
   * Longest chain of cached keys keyBase, keyBase+1, ... (at most maxBlocks), written to out from
   * offset. Returns its length; matchedEvictable tells how many of those blocks are free (unpinned).
   * Nothing is pinned yet, so a request that then does not fit leaves the pool untouched.
   */
  matchChain(keyBase: number, maxBlocks: number, out: Int32Array, offset: number): number {
    let hit = 0;
    let evictable = 0;
    while (hit < maxBlocks) {
      const block = this.keyFirst[keyBase + hit] as number;
      if (block === NONE) break;
      if (this.refCount[block] === 0) evictable++;
      out[offset + hit] = block;
      hit++;
    }
    this.matchedEvictable = evictable;
    return hit;
  }

  /** Free blocks among the last matchChain() result. */
  matchedEvictable = 0;

  /** Length of the cached chain keyBase, keyBase+1, ... (at most maxBlocks), without side effects. */
  chainLength(keyBase: number, maxBlocks: number): number {
    let n = 0;
    while (n < maxBlocks && (this.keyFirst[keyBase + n] as number) !== NONE) n++;
    return n;
  }

  /** pin() for blocks[from..to). */
  pinAll(blocks: Int32Array, from: number, to: number): void {
    for (let i = from; i < to; i++) this.pin(blocks[i] as number);
  }

  /** allocate() into blocks[from..to); positions below keyedTo get keys keyBase + position - offset. */
  allocateAll(
    blocks: Int32Array,
    from: number,
    to: number,
    offset: number,
    keyBase: number,
    keyedTo: number,
  ): void {
    for (let i = from; i < to; i++) {
      const block = this.allocate();
      if (i < keyedTo) this.assign(block, keyBase + i - offset);
      blocks[i] = block;
    }
  }

  /** release() for blocks[from..to) from the last one back: a sequence's tail is evicted first. */
  releaseAllReversed(blocks: Int32Array, from: number, to: number): void {
    for (let i = to - 1; i >= from; i--) this.release(blocks[i] as number);
  }

  private dropKey(block: number): void {
    const key = this.blockKey[block] as number;
    if (key === NONE) return;
    const prev = this.copyPrev[block] as number;
    const next = this.copyNext[block] as number;
    if (prev === NONE) this.keyFirst[key] = next;
    else this.copyNext[prev] = next;
    if (next !== NONE) this.copyPrev[next] = prev;
    this.blockKey[block] = NONE;
    this.copyPrev[block] = NONE;
    this.copyNext[block] = NONE;
  }

  private appendFree(block: number): void {
    this.freePrev[block] = this.freeTail;
    this.freeNext[block] = NONE;
    if (this.freeTail === NONE) this.freeHead = block;
    else this.freeNext[this.freeTail] = block;
    this.freeTail = block;
    this.freeSize++;
  }

  private unlinkFree(block: number): void {
    const prev = this.freePrev[block] as number;
    const next = this.freeNext[block] as number;
    if (prev === NONE) this.freeHead = next;
    else this.freeNext[prev] = next;
    if (next === NONE) this.freeTail = prev;
    else this.freePrev[next] = prev;
    this.freeSize--;
  }
}

// ---------------------------------------------------------------------------------------------------
// Routing

/** Picks the replica for a request given its prefix and the client connection (slot) it goes out on. */
type Router = (prefix: number, slot: number, now: number, request: number) => number;

/** What a front end can observe of the replicas when it routes a request. */
interface ClusterView {
  /** Requests in flight per replica (sent, not yet answered): what a router counts itself. */
  readonly inFlight: Int32Array;
  /** vllm:num_requests_waiting of a replica now. */
  waiting(replica: number): number;
  /** vllm:kv_cache_usage_perc of a replica now: pinned blocks / usable blocks. */
  kvUsage(replica: number): number;
  /** Leading blocks of a prefix's chain the replica holds (pinned or still cached). */
  cachedPrefixBlocks(replica: number, prefix: number): number;
}

/**
 * Contiguous blocks of prefix ids per replica. Prefix ids are exchangeable labels (their content is
 * random), so any balanced assignment is equivalent; contiguous blocks are exactly balanced (within one)
 * and need no extra randomness.
 */
export function routePrefixIdeal(prefix: number, prefixes: number, replicas: number): number {
  return Math.floor((prefix * replicas) / prefixes);
}

/** Sorted ring points with their replica, `virtualNodes` per replica. */
function hashRing(replicas: number, virtualNodes: number): { points: Uint32Array; owners: Int32Array } {
  const entries: Array<[number, number]> = [];
  for (let r = 0; r < replicas; r++) {
    for (let v = 0; v < virtualNodes; v++)
      entries.push([mix32(mix32(r + 1) ^ Math.imul(v + 1, 0x27d4eb2f)), r]);
  }
  entries.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  return {
    points: Uint32Array.from(entries, (e) => e[0]),
    owners: Int32Array.from(entries, (e) => e[1]),
  };
}

/** Owner of the first ring point at or after the prefix hash, wrapping around. */
function ringOwner(ring: { points: Uint32Array; owners: Int32Array }, hash: number): number {
  const { points, owners } = ring;
  let lo = 0;
  let hi = points.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((points[mid] as number) < hash) lo = mid + 1;
    else hi = mid;
  }
  return owners[lo === points.length ? 0 : lo] as number;
}

function createRouter(
  routing: Routing,
  input: SimulationInput,
  model: SimulationModel,
  replicas: number,
  cluster: ClusterView,
): Router {
  const rng = mulberry32(mix32(input.seed ^ ROUTING_STREAM));
  const { inFlight } = cluster;
  if (typeof routing !== 'string') {
    switch (routing.kind) {
      case 'vllm-router-cache-aware':
        return cacheAwareRouter(routing, input, model, replicas, inFlight);
      case 'gaie-epp':
        return endpointPicker(routing, input, model, replicas, cluster, rng);
      case 'llmd-precise':
        return precisePrefixPicker(routing, replicas, cluster, rng);
    }
  }
  switch (routing) {
    case 'single-replica':
      return () => 0;
    case 'random':
      return () => Math.floor(rng() * replicas);
    case 'per-connection': {
      // kube-proxy (iptables mode) picks an endpoint uniformly at random per new connection.
      const connection = Int32Array.from({ length: input.concurrency }, () => Math.floor(rng() * replicas));
      return (_prefix, slot) => connection[slot] as number;
    }
    case 'round-robin': {
      let next = 0;
      return () => {
        const r = next;
        next = (next + 1) % replicas;
        return r;
      };
    }
    case 'least-loaded':
      return () => leastLoaded(inFlight, replicas);
    case 'ideal-partition':
      return (prefix) => routePrefixIdeal(prefix, input.prefixes, replicas);
    case 'prefix-hash': {
      // The hash is of prompt text, which the seed determines; so the seed enters the prefix hash.
      const ring = hashRing(replicas, model.hashRingVirtualNodes);
      const salt = mix32(input.seed ^ PREFIX_HASH_STREAM);
      const owner = Int32Array.from({ length: input.prefixes }, (_, p) => ringOwner(ring, mix32(p ^ salt)));
      return (prefix) => owner[prefix] as number;
    }
  }
}

/** Fewest in flight, first index on a tie (Rust's min_by_key keeps the first minimum). */
function leastLoaded(inFlight: Int32Array, replicas: number): number {
  let best = 0;
  for (let r = 1; r < replicas; r++) if ((inFlight[r] as number) < (inFlight[best] as number)) best = r;
  return best;
}

/** One worker's approximate tree: per prefix its characters and last use, and the total. */
interface TenantTree {
  chars: number;
  readonly prefixes: Map<number, { chars: number; lastUse: number }>;
}

function cacheAwareRouter(
  spec: CacheAwareRouterModel,
  input: SimulationInput,
  model: SimulationModel,
  replicas: number,
  inFlight: Int32Array,
): Router {
  const text = spec.promptVisible
    ? {
        prefix: input.prefixLen * model.promptCharsPerToken,
        suffix: (input.suffixLen + input.chatTemplateTokens) * model.promptCharsPerToken,
      }
    : { prefix: 0, suffix: 0 };
  const textChars = text.prefix + text.suffix;
  const trees: TenantTree[] = Array.from({ length: replicas }, () => ({ chars: 0, prefixes: new Map() }));
  const intervalMs = spec.evictionIntervalSecs * 1000;
  let nextEviction = intervalMs > 0 ? intervalMs : Number.POSITIVE_INFINITY;

  const insert = (r: number, prefix: number, now: number): void => {
    if (textChars === 0) return; // tree.insert("") adds no character
    const tree = trees[r] as TenantTree;
    const entry = tree.prefixes.get(prefix);
    // A new prefix adds its text and the unique suffix; a known one only the suffix.
    const added = entry ? text.suffix : textChars;
    tree.chars += added;
    if (entry) {
      entry.chars += added;
      entry.lastUse = now;
    } else tree.prefixes.set(prefix, { chars: added, lastUse: now });
  };

  const evict = (): void => {
    for (const tree of trees) {
      if (tree.chars <= spec.maxTreeSize) continue;
      const byAge = [...tree.prefixes.entries()].sort((a, b) => a[1].lastUse - b[1].lastUse);
      for (const [prefix, entry] of byAge) {
        if (tree.chars <= spec.maxTreeSize) break;
        tree.chars -= entry.chars;
        tree.prefixes.delete(prefix);
      }
    }
  };

  return (prefix, _slot, now) => {
    while (now >= nextEviction) {
      evict();
      nextEviction += intervalMs;
    }
    let min = Number.POSITIVE_INFINITY;
    let max = 0;
    for (let r = 0; r < replicas; r++) {
      const load = inFlight[r] as number;
      if (load < min) min = load;
      if (load > max) max = load;
    }
    const imbalanced = max - min > spec.balanceAbsThreshold && max > min * spec.balanceRelThreshold;
    let chosen: number;
    if (imbalanced) {
      chosen = leastLoaded(inFlight, replicas);
    } else {
      let matched = -1;
      for (let r = 0; r < replicas && matched < 0; r++) if (trees[r]?.prefixes.has(prefix)) matched = r;
      const matchRate = textChars === 0 || matched < 0 ? 0 : text.prefix / textChars;
      if (matchRate > spec.cacheThreshold) chosen = matched;
      else {
        chosen = 0;
        for (let r = 1; r < replicas; r++)
          if ((trees[r] as TenantTree).chars < (trees[chosen] as TenantTree).chars) chosen = r;
      }
    }
    insert(chosen, prefix, now);
    return chosen;
  };
}

/**
 * Metrics as an EPP last scraped them: refreshed for every pod once refreshMs has passed since the
 * last refresh, so a burst of requests is routed on the same, stale numbers.
 */
function scrapedMetrics(cluster: ClusterView, replicas: number, refreshMs: number) {
  const waiting = new Float64Array(replicas);
  const kvUsage = new Float64Array(replicas);
  let scrapedAt = Number.NEGATIVE_INFINITY;
  return (now: number): { waiting: Float64Array; kvUsage: Float64Array } => {
    if (now - scrapedAt >= refreshMs) {
      for (let r = 0; r < replicas; r++) {
        waiting[r] = cluster.waiting(r);
        kvUsage[r] = cluster.kvUsage(r);
      }
      scrapedAt = now;
    }
    return { waiting, kvUsage };
  };
}

/** queue-scorer: (max - waiting) / (max - min), 1 for everyone when all queues are equal. */
function queueScores(waiting: Float64Array, replicas: number, out: Float64Array): void {
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (let r = 0; r < replicas; r++) {
    min = Math.min(min, waiting[r] as number);
    max = Math.max(max, waiting[r] as number);
  }
  for (let r = 0; r < replicas; r++) out[r] = max === min ? 1 : (max - (waiting[r] as number)) / (max - min);
}

/** max-score-picker: the highest total, a uniformly random one among equal totals. */
function pickMax(total: Float64Array, replicas: number, rng: () => number): number {
  let best = Number.NEGATIVE_INFINITY;
  let ties = 0;
  let chosen = 0;
  for (let r = 0; r < replicas; r++) {
    const v = total[r] as number;
    if (v > best) {
      best = v;
      ties = 1;
      chosen = r;
    } else if (v === best) {
      ties++;
      // Reservoir choice: each of the tied pods ends up chosen with probability 1/ties.
      if (rng() * ties < 1) chosen = r;
    }
  }
  return chosen;
}

function endpointPicker(
  spec: EndpointPickerModel,
  input: SimulationInput,
  model: SimulationModel,
  replicas: number,
  cluster: ClusterView,
  rng: () => number,
): Router {
  const bytesPerToken = model.promptCharsPerToken;
  // hashPrompt: no block for a prompt shorter than one block (an empty chat prompt), at most
  // maxPrefixBlocksToMatch full blocks; the prefix's blocks are shared, the rest unique per request.
  const promptBytes = spec.promptVisible
    ? (input.chatTemplateTokens + input.prefixLen + input.suffixLen) * bytesPerToken
    : 0;
  const totalBlocks =
    promptBytes < spec.hashBlockSize
      ? 0
      : Math.min(spec.maxPrefixBlocksToMatch, Math.floor(promptBytes / spec.hashBlockSize));
  const sharedBlocks = Math.min(
    totalBlocks,
    Math.floor(((input.chatTemplateTokens + input.prefixLen) * bytesPerToken) / spec.hashBlockSize),
  );
  const uniqueBase = input.prefixes * sharedBlocks;
  const lru: BlockLru[] = Array.from({ length: replicas }, () => new BlockLru());
  // Which pods hold each shared (prefix) block. Suffix blocks are unique per request: no later
  // request can match them, so only their LRU slots matter.
  const held = new Uint8Array(uniqueBase * replicas);
  const scrape = scrapedMetrics(cluster, replicas, spec.refreshMetricsMs);
  const matched = new Float64Array(replicas);
  const queue = new Float64Array(replicas);
  const total = new Float64Array(replicas);
  const keys = new Int32Array(totalBlocks);

  const add = (r: number, key: number): void => {
    const pod = lru[r] as BlockLru;
    pod.touch(key);
    if (key < uniqueBase) held[key * replicas + r] = 1;
    if (pod.size > spec.lruCapacityPerServer) {
      const oldest = pod.evictOldest();
      if (oldest < uniqueBase) held[oldest * replicas + r] = 0;
    }
  };

  return (prefix, _slot, now, request) => {
    for (let i = 0; i < totalBlocks; i++)
      keys[i] = i < sharedBlocks ? prefix * sharedBlocks + i : uniqueBase + request * totalBlocks + i;
    // matchLongestPrefix: walk the blocks until no pod holds one, counting per pod.
    matched.fill(0);
    for (let i = 0; i < sharedBlocks; i++) {
      const at = (keys[i] as number) * replicas;
      let any = false;
      for (let r = 0; r < replicas; r++) {
        if (held[at + r] === 1) {
          matched[r] = (matched[r] as number) + 1;
          any = true;
        }
      }
      if (!any) break;
    }
    const { waiting, kvUsage } = scrape(now);
    queueScores(waiting, replicas, queue);
    const w = spec.weights;
    for (let r = 0; r < replicas; r++) {
      const prefixScore = totalBlocks === 0 ? 0 : (matched[r] as number) / totalBlocks;
      total[r] =
        prefixScore * w.prefixCache +
        (queue[r] as number) * w.queue +
        (1 - (kvUsage[r] as number)) * w.kvCacheUtilization;
    }
    const chosen = pickMax(total, replicas, rng);
    for (let i = 0; i < totalBlocks; i++) add(chosen, keys[i] as number);
    return chosen;
  };
}

/**
 * One pod's LRU of block hashes (golang-lru semantics: adding an existing key refreshes it). A key's
 * latest stamp lives in a map; a queue of (key, stamp) pairs is trimmed lazily, so every operation
 * is amortized O(1) however many keys pass through.
 */
class BlockLru {
  private readonly stamp = new Map<number, number>();
  private queueKeys: number[] = [];
  private queueStamps: number[] = [];
  private head = 0;
  private clock = 0;

  get size(): number {
    return this.stamp.size;
  }

  touch(key: number): void {
    const now = this.clock++;
    this.stamp.set(key, now);
    this.queueKeys.push(key);
    this.queueStamps.push(now);
  }

  /** Removes and returns the least recently touched key (the caller checks size > 0). */
  evictOldest(): number {
    for (;;) {
      const key = this.queueKeys[this.head] as number;
      const stamp = this.queueStamps[this.head] as number;
      this.head++;
      if (this.stamp.get(key) === stamp) {
        this.stamp.delete(key);
        this.compact();
        return key;
      }
    }
  }

  /** Drops the consumed head of the queue once it is half of it. */
  private compact(): void {
    if (this.head < 1024 || this.head * 2 < this.queueKeys.length) return;
    this.queueKeys = this.queueKeys.slice(this.head);
    this.queueStamps = this.queueStamps.slice(this.head);
    this.head = 0;
  }
}

function precisePrefixPicker(
  spec: PrecisePrefixModel,
  replicas: number,
  cluster: ClusterView,
  rng: () => number,
): Router {
  const scrape = scrapedMetrics(cluster, replicas, spec.refreshMetricsMs);
  const raw = new Float64Array(replicas);
  const queue = new Float64Array(replicas);
  const total = new Float64Array(replicas);
  return (prefix, _slot, now) => {
    // Without the prompt (chat) the scorer tokenizes "" and finds no block: every pod scores 0.
    let min = Number.POSITIVE_INFINITY;
    let max = -1;
    for (let r = 0; r < replicas; r++) {
      const blocks = spec.promptVisible ? cluster.cachedPrefixBlocks(r, prefix) : 0;
      raw[r] = blocks;
      if (blocks > 0) {
        min = Math.min(min, blocks);
        max = Math.max(max, blocks);
      }
    }
    const { waiting, kvUsage } = scrape(now);
    queueScores(waiting, replicas, queue);
    const w = spec.weights;
    for (let r = 0; r < replicas; r++) {
      const blocks = raw[r] as number;
      const prefixScore = blocks === 0 ? 0 : max === min ? 1 : (blocks - min) / (max - min);
      total[r] =
        prefixScore * w.precisePrefixCache +
        (queue[r] as number) * w.queue +
        (1 - (kvUsage[r] as number)) * w.kvCacheUtilization;
    }
    return pickMax(total, replicas, rng);
  };
}

// ---------------------------------------------------------------------------------------------------
// Engine

/** FIFO of client slots in a ring buffer; a slot is in at most one queue at a time. */
class SlotQueue {
  private readonly items: Int32Array;
  private head = 0;
  size = 0;

  constructor(capacity: number) {
    this.items = new Int32Array(Math.max(1, capacity));
  }

  push(slot: number): void {
    this.items[(this.head + this.size) % this.items.length] = slot;
    this.size++;
  }

  peek(): number {
    return this.items[this.head] as number;
  }

  shift(): number {
    const slot = this.items[this.head] as number;
    this.head = (this.head + 1) % this.items.length;
    this.size--;
    return slot;
  }
}

interface Replica {
  pool: BlockPool;
  waiting: SlotQueue;
  prefilling: SlotQueue;
  /** Decoding requests in finish order: every request generates the same number of tokens. */
  decoding: SlotQueue;
  running: number;
  peakRunning: number;
  step: number;
  busy: boolean;
  requests: number;
  queried: number;
  hits: number;
}

/** Min-heap of step-end events, at most one per replica, ordered by (time, replica) for determinism. */
class EventHeap {
  private readonly time: Float64Array;
  private readonly replica: Int32Array;
  size = 0;
  /** Time of the event the last pop() returned. */
  lastTime = 0;

  constructor(capacity: number) {
    this.time = new Float64Array(capacity);
    this.replica = new Int32Array(capacity);
  }

  push(time: number, replica: number): void {
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.lessThan(time, replica, parent)) break;
      this.move(parent, i);
      i = parent;
    }
    this.time[i] = time;
    this.replica[i] = replica;
  }

  /** Removes the earliest event and returns its replica; its time is left in lastTime. */
  pop(): number {
    const top = this.replica[0] as number;
    this.lastTime = this.time[0] as number;
    const n = --this.size;
    const time = this.time[n] as number;
    const replica = this.replica[n] as number;
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      const right = child + 1;
      if (right < n && this.lessThan(this.time[right] as number, this.replica[right] as number, child))
        child = right;
      if (this.lessThan(time, replica, child)) break;
      this.move(child, i);
      i = child;
    }
    this.time[i] = time;
    this.replica[i] = replica;
    return top;
  }

  private lessThan(time: number, replica: number, at: number): boolean {
    const t = this.time[at] as number;
    return time < t || (time === t && replica < (this.replica[at] as number));
  }

  private move(from: number, to: number): void {
    this.time[to] = this.time[from] as number;
    this.replica[to] = this.replica[from] as number;
  }
}

function validate(
  input: SimulationInput,
  model: SimulationModel,
  shape: RequestShape,
  capacity: number,
): void {
  const positiveInts: Array<keyof SimulationInput> = ['replicas', 'blockSize', 'prefixes', 'concurrency'];
  for (const key of positiveInts) {
    const v = input[key];
    if (!Number.isInteger(v) || v < 1) throw new RangeError(`${key} must be an integer >= 1, got ${v}`);
  }
  const counts: Array<keyof SimulationInput> = ['prefixLen', 'suffixLen', 'chatTemplateTokens', 'prompts'];
  for (const key of counts) {
    const v = input[key];
    if (!Number.isInteger(v) || v < 0) throw new RangeError(`${key} must be an integer >= 0, got ${v}`);
  }
  if (!Number.isInteger(input.outputLen) || input.outputLen < 1) {
    throw new RangeError(`outputLen must be an integer >= 1, got ${input.outputLen}`);
  }
  if (shape.lookedUpTokens < 1) throw new RangeError('a request must look up at least one token');
  if (model.maxNumBatchedTokens < model.maxNumSeqs) {
    throw new RangeError('maxNumBatchedTokens must be >= maxNumSeqs (vLLM refuses to start otherwise)');
  }
  // vLLM refuses to start when one request of max-model-len cannot fit the KV cache.
  if (shape.totalBlocks > capacity) {
    throw new RangeError(
      `one request needs ${shape.totalBlocks} blocks but a replica has ${capacity} usable: it could never run`,
    );
  }
}

/**
 * Simulates the benchmark against `input.replicas` replicas routed by `policy` and returns the prefix
 * cache hit rates vLLM's counters would show. `model` overrides DEFAULT_SIMULATION_MODEL field by field.
 * Throws a RangeError for invalid inputs, including a request too large for an empty replica's cache.
 */
export function simulate(
  input: SimulationInput,
  routing: Routing,
  model?: Partial<SimulationModel>,
): SimulationResult {
  const m: SimulationModel = { ...DEFAULT_SIMULATION_MODEL, ...model };
  const shape = requestShape(input);
  const capacity = usableBlocks(input, m);
  validate(input, m, shape, capacity);

  const replicaCount = routing === 'single-replica' ? 1 : input.replicas;
  const { prompts, concurrency, outputLen, blockSize } = input;
  const { sharedBlocks, maxHitBlocks, totalBlocks, lookedUpTokens } = shape;
  const order = promptOrder(input);
  const slots = Math.min(concurrency, Math.max(prompts, 1));
  const blockReadMs = (blockSize * m.kvBytesPerToken) / (m.memoryBandwidthGBps * 1e6);

  const replicas: Replica[] = Array.from({ length: replicaCount }, () => ({
    pool: new BlockPool(capacity, input.prefixes * sharedBlocks),
    waiting: new SlotQueue(slots),
    prefilling: new SlotQueue(slots),
    decoding: new SlotQueue(slots),
    running: 0,
    peakRunning: 0,
    step: 0,
    busy: false,
    requests: 0,
    queried: 0,
    hits: 0,
  }));
  const inFlight = new Int32Array(replicaCount);
  const cluster: ClusterView = {
    inFlight,
    waiting: (r) => (replicas[r] as Replica).waiting.size,
    kvUsage: (r) => (capacity === 0 ? 0 : (replicas[r] as Replica).pool.pinnedBlocks / capacity),
    cachedPrefixBlocks: (r, prefix) =>
      (replicas[r] as Replica).pool.chainLength(prefix * sharedBlocks, sharedBlocks),
  };
  const route = createRouter(routing, input, m, replicaCount, cluster);
  const ttfts = new Float64Array(prompts);

  // Per client slot (at most one request in flight on each).
  const slotPrefix = new Int32Array(slots);
  const slotPrefillLeft = new Int32Array(slots);
  const slotChunk = new Int32Array(slots);
  const slotFinishStep = new Float64Array(slots);
  const slotSentAt = new Float64Array(slots);
  const slotFirstTokenAt = new Float64Array(slots);
  const slotBlocks = new Int32Array(slots * totalBlocks);

  const events = new EventHeap(replicaCount);
  // Replicas that got work while idle, started once the current event is fully processed.
  const toStart = new Int32Array(replicaCount);
  let toStartCount = 0;
  let nextPrompt = 0;
  let finished = 0;
  let lastFinish = 0;
  let ttftSum = 0;
  let itlSum = 0;

  const dispatch = (slot: number, now: number): void => {
    if (nextPrompt >= prompts) return;
    const request = nextPrompt++;
    const prefix = order[request] as number;
    const r = route(prefix, slot, now, request);
    slotPrefix[slot] = prefix;
    slotSentAt[slot] = now;
    inFlight[r] = (inFlight[r] as number) + 1;
    const replica = replicas[r] as Replica;
    replica.waiting.push(slot);
    if (!replica.busy) {
      replica.busy = true;
      toStart[toStartCount++] = r;
    }
  };

  /** Pins hit blocks and reserves the rest, or returns false (nothing changed) if they do not fit. */
  const admit = (replica: Replica, slot: number): boolean => {
    const { pool } = replica;
    const keyBase = (slotPrefix[slot] as number) * sharedBlocks;
    const base = slot * totalBlocks;
    const hit = pool.matchChain(keyBase, maxHitBlocks, slotBlocks, base);
    if (totalBlocks - hit + pool.matchedEvictable > pool.freeBlocks) return false;
    pool.pinAll(slotBlocks, base, base + hit);
    // vLLM caches a block as soon as it is scheduled, so concurrent requests already share it.
    pool.allocateAll(slotBlocks, base + hit, base + totalBlocks, base, keyBase, base + sharedBlocks);
    const hitTokens = hit * blockSize;
    replica.requests++;
    replica.queried += lookedUpTokens;
    replica.hits += hitTokens;
    slotPrefillLeft[slot] = lookedUpTokens - hitTokens;
    return true;
  };

  const startStep = (r: number, now: number): void => {
    const replica = replicas[r] as Replica;
    let budget = m.maxNumBatchedTokens - replica.decoding.size;
    let prefillTokens = 0;
    const { prefilling, waiting } = replica;
    for (let k = 0; k < prefilling.size; k++) {
      const slot = prefilling.shift();
      const chunk = Math.min(slotPrefillLeft[slot] as number, Math.max(budget, 0));
      slotChunk[slot] = chunk;
      budget -= chunk;
      prefillTokens += chunk;
      prefilling.push(slot);
    }
    while (budget > 0 && waiting.size > 0 && replica.running < m.maxNumSeqs) {
      const slot = waiting.peek();
      if (!admit(replica, slot)) break;
      waiting.shift();
      replica.running++;
      if (replica.running > replica.peakRunning) replica.peakRunning = replica.running;
      const chunk = Math.min(slotPrefillLeft[slot] as number, budget);
      slotChunk[slot] = chunk;
      budget -= chunk;
      prefillTokens += chunk;
      prefilling.push(slot);
    }
    if (replica.running === 0) {
      // Unreachable after validate(): a lone request always fits an empty pool.
      throw new Error('replica has waiting requests but cannot admit any');
    }
    const stepMs =
      m.stepOverheadMs + replica.pool.pinnedBlocks * blockReadMs + prefillTokens * m.prefillMsPerToken;
    replica.busy = true;
    events.push(now + stepMs, r);
  };

  const finish = (replica: Replica, r: number, slot: number, now: number): void => {
    const base = slot * totalBlocks;
    replica.pool.releaseAllReversed(slotBlocks, base, base + totalBlocks);
    replica.running--;
    inFlight[r] = (inFlight[r] as number) - 1;
    finished++;
    lastFinish = now;
    const first = slotFirstTokenAt[slot] as number;
    const ttft = first - (slotSentAt[slot] as number);
    ttfts[finished - 1] = ttft;
    ttftSum += ttft;
    if (outputLen > 1) itlSum += (now - first) / (outputLen - 1);
    dispatch(slot, now);
  };

  const endStep = (r: number, now: number): void => {
    const replica = replicas[r] as Replica;
    const { decoding, prefilling } = replica;
    while (decoding.size > 0 && (slotFinishStep[decoding.peek()] as number) <= replica.step) {
      finish(replica, r, decoding.shift(), now);
    }
    const n = prefilling.size;
    for (let k = 0; k < n; k++) {
      const slot = prefilling.shift();
      const left = (slotPrefillLeft[slot] as number) - (slotChunk[slot] as number);
      slotPrefillLeft[slot] = left;
      slotChunk[slot] = 0;
      if (left > 0) {
        prefilling.push(slot);
        continue;
      }
      // The step that completes the prefill also samples the first output token.
      slotFirstTokenAt[slot] = now;
      if (outputLen === 1) finish(replica, r, slot, now);
      else {
        slotFinishStep[slot] = replica.step + outputLen - 1;
        decoding.push(slot);
      }
    }
    replica.step++;
    // busy stayed true while finishing, so the dispatches above did not queue this replica a second time.
    if (replica.running > 0 || replica.waiting.size > 0) toStart[toStartCount++] = r;
    else replica.busy = false;
  };

  const startPending = (now: number): void => {
    for (let i = 0; i < toStartCount; i++) startStep(toStart[i] as number, now);
    toStartCount = 0;
  };

  for (let slot = 0; slot < slots; slot++) dispatch(slot, 0);
  startPending(0);
  while (events.size > 0) {
    const r = events.pop();
    const now = events.lastTime;
    endStep(r, now);
    startPending(now);
  }
  if (finished !== prompts)
    throw new Error(`simulation ended with ${finished} of ${prompts} requests finished`);

  return summarize(routingName(routing), replicas, {
    durationMs: lastFinish,
    ttftSum,
    ttfts,
    itlSum,
    prompts,
    outputTokens: prompts * outputLen,
    clientTokens: prompts * (input.prefixLen + input.suffixLen + outputLen),
  });
}

/** Nearest-rank percentile of unsorted values (0 for none). */
export function percentile(values: Float64Array, q: number): number {
  if (values.length === 0) return 0;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1] as number;
}

function summarize(
  policy: string,
  replicas: Replica[],
  t: {
    durationMs: number;
    ttftSum: number;
    ttfts: Float64Array;
    itlSum: number;
    prompts: number;
    outputTokens: number;
    clientTokens: number;
  },
): SimulationResult {
  let queried = 0;
  let hits = 0;
  const perReplica = replicas.map((replica): ReplicaResult => {
    queried += replica.queried;
    hits += replica.hits;
    return {
      requests: replica.requests,
      queriedTokens: replica.queried,
      hitTokens: replica.hits,
      hitRate: replica.queried > 0 ? replica.hits / replica.queried : 0,
      peakRunning: replica.peakRunning,
    };
  });
  const n = Math.max(t.prompts, 1);
  const seconds = t.durationMs / 1000;
  const rate = (amount: number) => (t.durationMs > 0 ? amount / seconds : 0);
  return {
    policy,
    hitRate: queried > 0 ? hits / queried : 0,
    perReplica,
    timing: {
      durationSeconds: seconds,
      meanTtftMs: t.ttftSum / n,
      medianTtftMs: percentile(t.ttfts, 0.5),
      p99TtftMs: percentile(t.ttfts, 0.99),
      meanItlMs: t.itlSum / n,
      totalTokensPerSecond: rate(t.clientTokens),
      outputTokensPerSecond: rate(t.outputTokens),
      requestsPerSecond: rate(t.prompts),
    },
  };
}
