/** Routing: the generic reference policies and the dispatch to the front-end models. */

import { cacheAwareRouter } from './cache-aware.ts';
import { endpointPicker, precisePrefixPicker } from './endpoint-picker.ts';
import { mix32, mulberry32, PREFIX_HASH_STREAM, ROUTING_STREAM } from './random.ts';
import type { Routing, SimulationInput, SimulationModel } from './types.ts';
import { type ClusterView, leastLoaded, picking, type Router } from './view.ts';

export type { ClusterView, Router } from './view.ts';

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

export function createRouter(
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
        return cacheAwareRouter(routing, input, model, replicas);
      case 'gaie-epp':
        return endpointPicker(routing, input, model, replicas, cluster, rng);
      case 'llmd-precise':
        return precisePrefixPicker(routing, replicas, cluster, rng);
    }
  }
  switch (routing) {
    case 'single-replica':
      return picking(() => 0);
    case 'random':
      return picking(() => Math.floor(rng() * replicas));
    case 'per-connection': {
      // kube-proxy (iptables mode) picks an endpoint uniformly at random per new connection.
      const connection = Int32Array.from({ length: input.concurrency }, () => Math.floor(rng() * replicas));
      return picking((_prefix, slot) => connection[slot] as number);
    }
    case 'round-robin': {
      let next = 0;
      return picking(() => {
        const r = next;
        next = (next + 1) % replicas;
        return r;
      });
    }
    case 'least-loaded':
      return picking(() => leastLoaded(inFlight, replicas));
    case 'ideal-partition':
      return picking((prefix) => routePrefixIdeal(prefix, input.prefixes, replicas));
    case 'prefix-hash': {
      // The hash is of prompt text, which the seed determines; so the seed enters the prefix hash.
      const ring = hashRing(replicas, model.hashRingVirtualNodes);
      const salt = mix32(input.seed ^ PREFIX_HASH_STREAM);
      const owner = Int32Array.from({ length: input.prefixes }, (_, p) => ringOwner(ring, mix32(p ^ salt)));
      return picking((prefix) => owner[prefix] as number);
    }
  }
}
