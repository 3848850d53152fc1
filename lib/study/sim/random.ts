/** Deterministic randomness for the simulator: no Math.random anywhere. */

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
export const ROUTING_STREAM = 0x9e3779b9;
export const PREFIX_HASH_STREAM = 0x7f4a7c15;
