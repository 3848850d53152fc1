/** The GAIE Endpoint Picker and llm-d's precise prefix-cache scorer (see their models in types.ts). */

import type { EndpointPickerModel, PrecisePrefixModel, SimulationInput, SimulationModel } from './types.ts';
import { type ClusterView, picking, type Router } from './view.ts';

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

export function endpointPicker(
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
  // Keys: the shared blocks, then totalBlocks per request (request < prompts); a request touches
  // totalBlocks keys on the pod it goes to.
  const touches = input.prompts * totalBlocks;
  const lru: BlockLru[] = Array.from({ length: replicas }, () => new BlockLru(uniqueBase + touches, touches));
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

  return picking((prefix, _slot, now, request) => {
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
  });
}

/**
 * One pod's LRU of block hashes (golang-lru semantics: adding an existing key refreshes it). A key's
 * latest stamp lives in an array indexed by key (keys are dense: the prefix blocks, then every
 * request's own); a queue of (key, stamp) pairs is trimmed lazily, so every operation is amortized
 * O(1) however many keys pass through. Typed arrays sized for the whole run instead of a Map: the
 * EPP's routing was the simulator's hottest spot (`lab plan`, `lab report`).
 */
class BlockLru {
  /** Latest stamp + 1 per key; 0 when the key is not in the LRU. */
  private readonly stamp: Int32Array;
  private readonly queueKeys: Int32Array;
  private readonly queueStamps: Int32Array;
  private head = 0;
  private tail = 0;
  private clock = 0;
  size = 0;

  /** `keys`: every key is below it; `touches`: the most touch() calls the run can make. */
  constructor(keys: number, touches: number) {
    this.stamp = new Int32Array(keys);
    this.queueKeys = new Int32Array(touches);
    this.queueStamps = new Int32Array(touches);
  }

  touch(key: number): void {
    const now = ++this.clock;
    if (this.stamp[key] === 0) this.size++;
    this.stamp[key] = now;
    this.queueKeys[this.tail] = key;
    this.queueStamps[this.tail] = now;
    this.tail++;
  }

  /** Removes and returns the least recently touched key (the caller checks size > 0). */
  evictOldest(): number {
    for (;;) {
      const key = this.queueKeys[this.head] as number;
      const stamp = this.queueStamps[this.head] as number;
      this.head++;
      if (this.stamp[key] === stamp) {
        this.stamp[key] = 0;
        this.size--;
        return key;
      }
    }
  }
}

export function precisePrefixPicker(
  spec: PrecisePrefixModel,
  replicas: number,
  cluster: ClusterView,
  rng: () => number,
): Router {
  const scrape = scrapedMetrics(cluster, replicas, spec.refreshMetricsMs);
  const raw = new Float64Array(replicas);
  const queue = new Float64Array(replicas);
  const total = new Float64Array(replicas);
  return picking((prefix, _slot, now) => {
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
  });
}
