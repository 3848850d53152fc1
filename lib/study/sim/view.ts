/** What a routing decision sees of the cluster, shared by the reference policies and the front-end models. */

/** Picks the replica for a request given its prefix and the client connection (slot) it goes out on. */
export type Router = (prefix: number, slot: number, now: number, request: number) => number;

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
