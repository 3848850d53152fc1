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
 *   that cannot get blocks blocks the queue behind it, as in vLLM's FCFS scheduler (docs/facts.md
 *   §3.1, `Scheduler.schedule`): an uncached prompt fills the step and the requests behind it wait.
 * - Memory: a request reserves blocks for its prompt and all its output tokens when it is admitted
 *   (vLLM allocates decode blocks as it goes; reserving up front removes preemption from the model
 *   and moves an eviction earlier by at most one request lifetime).
 * - Front end: each replica's API server is one FIFO process; it spends frontEndMsPerRequest on a new
 *   request and frontEndMsPerOutputToken on every token it streams, so a step's tokens reach the
 *   clients when it has worked through them - which is what makes TTFT grow with throughput in the
 *   calibration table (185-231 ms at 8-16 prefixes against 208-216 ms at 64-128). The engine sees a
 *   request at once (ahead of its preprocessing by at most the server's backlog).
 * - Time: step time = fixed overhead + distinct pinned KV blocks read / memory bandwidth + prefill
 *   tokens x per-token prefill cost. Requests sharing a prefix share physical blocks, which are read
 *   once per layer (the per-layer slice of a prefix fits the GPU's L2), so fewer distinct prefixes in a
 *   batch make decode faster - which is what the calibration ITLs show (22 ms at 8 prefixes, 43 ms at 128).
 *
 * Everything here is pure: no I/O, no clock, no Math.random. The same input gives the same result.
 */

import { BlockPool } from './sim/block-pool.ts';
import { EventHeap, SlotQueue } from './sim/queues.ts';
import { type ClusterView, createRouter } from './sim/routing.ts';
import {
  DEFAULT_SIMULATION_MODEL,
  type ReplicaResult,
  type Routing,
  routingName,
  type SimulationInput,
  type SimulationModel,
  type SimulationResult,
} from './sim/types.ts';
import { promptOrder, type RequestShape, requestShape, usableBlocks } from './sim/workload.ts';

export { BlockPool } from './sim/block-pool.ts';
export { mix32, mulberry32 } from './sim/random.ts';
export { routePrefixIdeal } from './sim/routing.ts';
export * from './sim/types.ts';
export { hitRateBound, promptOrder, type RequestShape, requestShape, usableBlocks } from './sim/workload.ts';

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
  const key = JSON.stringify([input, routing, m], exactly);
  const known = recent.get(key);
  if (known) return copyOf(known);
  const result = simulateOnce(input, routing, m);
  if (recent.size >= RECENT_LIMIT) recent.delete(recent.keys().next().value as string);
  recent.set(key, result);
  return copyOf(result);
}

/**
 * Recent results by their exact input, routing and model. A plan simulates the same run several
 * times (an arm's prediction and its run's duration, the partition as policy and as reference; about
 * a third of `lab plan`'s simulations), and a process that plans or reports twice repeats them all.
 * The simulator is pure, so a repeat is answered from here.
 */
const recent = new Map<string, SimulationResult>();
const RECENT_LIMIT = 1024;

/** JSON.stringify replacer that keeps apart what JSON would merge (NaN, infinities, -0, undefined). */
function exactly(_key: string, value: unknown): unknown {
  if (value === undefined) return '\u0000undefined';
  if (typeof value === 'number' && (!Number.isFinite(value) || Object.is(value, -0))) {
    return `\u0000${Object.is(value, -0) ? '-0' : String(value)}`;
  }
  return value;
}

/** A caller's own copy: results are plain data that a caller may change. */
function copyOf(result: SimulationResult): SimulationResult {
  return {
    ...result,
    perReplica: result.perReplica.map((replica) => ({ ...replica })),
    timing: { ...result.timing },
  };
}

function simulateOnce(input: SimulationInput, routing: Routing, m: SimulationModel): SimulationResult {
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
  const router = createRouter(routing, input, m, replicaCount, cluster);
  // By send order, so the opening burst (the first `slots` requests) can be told from the rest.
  const ttfts = new Float64Array(prompts);

  // Per client slot (at most one request in flight on each).
  const slotPrefix = new Int32Array(slots);
  const slotPrefillLeft = new Int32Array(slots);
  const slotChunk = new Int32Array(slots);
  const slotFinishStep = new Float64Array(slots);
  const slotSentAt = new Float64Array(slots);
  const slotRequest = new Int32Array(slots);
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
  // Per replica, when its API server process is next free: it preprocesses each request and streams
  // every output token, one at a time, so a busy stream delays a new request's first token.
  const apiFreeAt = new Float64Array(replicaCount);

  const dispatch = (slot: number, now: number): void => {
    if (nextPrompt >= prompts) return;
    const request = nextPrompt++;
    const prefix = order[request] as number;
    const r = router.pick(prefix, slot, now, request);
    slotPrefix[slot] = prefix;
    slotSentAt[slot] = now;
    slotRequest[slot] = request;
    // HTTP, chat template and tokenization; the engine is told at once (ahead by at most this backlog).
    apiFreeAt[r] = Math.max(apiFreeAt[r] as number, now) + m.frontEndMsPerRequest;
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
    router.finished?.(r, now);
    finished++;
    lastFinish = now;
    const first = slotFirstTokenAt[slot] as number;
    const ttft = first - (slotSentAt[slot] as number);
    ttfts[slotRequest[slot] as number] = ttft;
    ttftSum += ttft;
    if (outputLen > 1) itlSum += (now - first) / (outputLen - 1);
    dispatch(slot, now);
  };

  const endStep = (r: number, stepEnd: number): void => {
    const replica = replicas[r] as Replica;
    const { decoding, prefilling } = replica;
    // The step's tokens reach the clients once the API server has streamed them.
    let emitted = decoding.size;
    for (let k = 0; k < prefilling.size; k++) {
      const slot = prefilling.shift();
      if ((slotPrefillLeft[slot] as number) <= (slotChunk[slot] as number)) emitted++;
      prefilling.push(slot);
    }
    const now = Math.max(apiFreeAt[r] as number, stepEnd) + emitted * m.frontEndMsPerOutputToken;
    apiFreeAt[r] = now;
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
    openingRequests: slots,
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
    openingRequests: number;
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
      p99TtftAfterOpeningMs: percentile(t.ttfts.subarray(Math.min(t.openingRequests, t.ttfts.length)), 0.99),
      meanItlMs: t.itlSum / n,
      totalTokensPerSecond: rate(t.clientTokens),
      outputTokensPerSecond: rate(t.outputTokens),
      requestsPerSecond: rate(t.prompts),
    },
  };
}
