/** The benchmark workload's shape: prompt order, block geometry of a request, the hit-rate bound. */

import { mulberry32 } from './random.ts';
import type { SimulationInput, SimulationModel } from './types.ts';

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
