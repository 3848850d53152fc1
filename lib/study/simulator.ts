/**
 * A pure, deterministic simulator of vLLM's automatic prefix cache behind different routing policies.
 *
 * It replays the benchmark client of lab-spec 3.8 (prefix_repetition dataset, closed loop at
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
  /** Hash of the prefix onto a ring of replica points (ketama style); deterministic, can be uneven. */
  | 'consistent-hash';

export const ROUTING_POLICIES: readonly RoutingPolicy[] = [
  'single-replica',
  'random',
  'per-connection',
  'round-robin',
  'least-loaded',
  'ideal-partition',
  'consistent-hash',
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
  /** Mean time between output tokens after the first. */
  meanItlMs: number;
  /** (prompt tokens without the chat template + output tokens) / duration, as the benchmark client counts. */
  totalTokensPerSecond: number;
}

export interface SimulationResult {
  policy: RoutingPolicy;
  /** Sum of hits / sum of queries over all replicas. */
  hitRate: number;
  perReplica: ReplicaResult[];
  timing: SimulationTiming;
}

/**
 * Physically meaningful tunables. Defaults describe Qwen3-0.6B-FP8 on an NVIDIA L4 under vLLM 0.11
 * (lab-spec 3.1). None is fitted per data point: the three step-time coefficients were chosen once so
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
  /** Points per replica on the consistent-hash ring (ketama uses 160). */
  hashRingVirtualNodes: number;
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
 * all shareable blocks. It is lab-spec 4.1's (r-1)/r x P/L with P rounded down to whole blocks.
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
type Router = (prefix: number, slot: number, inFlight: Int32Array) => number;

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
  policy: RoutingPolicy,
  input: SimulationInput,
  model: SimulationModel,
  replicas: number,
): Router {
  const rng = mulberry32(mix32(input.seed ^ ROUTING_STREAM));
  switch (policy) {
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
      return (_prefix, _slot, inFlight) => {
        let best = 0;
        for (let r = 1; r < replicas; r++) if ((inFlight[r] as number) < (inFlight[best] as number)) best = r;
        return best;
      };
    case 'ideal-partition':
      return (prefix) => routePrefixIdeal(prefix, input.prefixes, replicas);
    case 'consistent-hash': {
      // The router hashes prompt text, which the seed determines; so the seed enters the prefix hash.
      const ring = hashRing(replicas, model.hashRingVirtualNodes);
      const salt = mix32(input.seed ^ PREFIX_HASH_STREAM);
      const owner = Int32Array.from({ length: input.prefixes }, (_, p) => ringOwner(ring, mix32(p ^ salt)));
      return (prefix) => owner[prefix] as number;
    }
  }
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
  policy: RoutingPolicy,
  model?: Partial<SimulationModel>,
): SimulationResult {
  const m: SimulationModel = { ...DEFAULT_SIMULATION_MODEL, ...model };
  const shape = requestShape(input);
  const capacity = usableBlocks(input, m);
  validate(input, m, shape, capacity);

  const replicaCount = policy === 'single-replica' ? 1 : input.replicas;
  const { prompts, concurrency, outputLen, blockSize } = input;
  const { sharedBlocks, maxHitBlocks, totalBlocks, lookedUpTokens } = shape;
  const order = promptOrder(input);
  const route = createRouter(policy, input, m, replicaCount);
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
    const prefix = order[nextPrompt++] as number;
    const r = route(prefix, slot, inFlight);
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
    ttftSum += first - (slotSentAt[slot] as number);
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

  return summarize(policy, replicas, {
    durationMs: lastFinish,
    ttftSum,
    itlSum,
    prompts,
    clientTokens: prompts * (input.prefixLen + input.suffixLen + outputLen),
  });
}

function summarize(
  policy: RoutingPolicy,
  replicas: Replica[],
  t: { durationMs: number; ttftSum: number; itlSum: number; prompts: number; clientTokens: number },
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
  return {
    policy,
    hitRate: queried > 0 ? hits / queried : 0,
    perReplica,
    timing: {
      durationSeconds: t.durationMs / 1000,
      meanTtftMs: t.ttftSum / n,
      meanItlMs: t.itlSum / n,
      totalTokensPerSecond: t.durationMs > 0 ? t.clientTokens / (t.durationMs / 1000) : 0,
    },
  };
}
