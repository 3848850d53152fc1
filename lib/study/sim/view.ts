/** What a routing decision sees of the cluster, shared by the reference policies and the front-end models. */

/** A front end's routing decision and what it learns when a response stream ends. */
export interface Router {
  /** The replica for a request given its prefix and the client connection (slot) it goes out on. */
  pick(prefix: number, slot: number, now: number, request: number): number;
  /** The response stream of a request routed to `replica` ended at `now` (for the router's own counters). */
  finished?(replica: number, now: number): void;
}

/** A router that needs no notification when a stream ends. */
export function picking(pick: Router['pick']): Router {
  return { pick };
}

/** What a front end can observe of the replicas when it routes a request. */
export interface ClusterView {
  /** Requests in flight per replica (sent, not yet answered): what a router counts itself. */
  readonly inFlight: Int32Array;
  /** vllm:num_requests_waiting of a replica now. */
  waiting(replica: number): number;
  /** vllm:kv_cache_usage_perc of a replica now: pinned blocks / usable blocks. */
  kvUsage(replica: number): number;
  /** Leading blocks of a prefix's chain the replica holds (pinned or still cached). */
  cachedPrefixBlocks(replica: number, prefix: number): number;
}

/** Fewest in flight, first index on a tie (Rust's min_by_key keeps the first minimum). */
export function leastLoaded(inFlight: Int32Array, replicas: number): number {
  let best = 0;
  for (let r = 1; r < replicas; r++) if ((inFlight[r] as number) < (inFlight[best] as number)) best = r;
  return best;
}
