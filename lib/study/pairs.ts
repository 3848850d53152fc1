import type { LabConfig } from '../config/schema.ts';
import type { Arm } from './arms.ts';

/**
 * Replica pairs (issue 11, `study.parallelism`). Pair 0 is the lab as it always was: the replicas
 * and front ends with their plain names. With `study.parallelism: 2` a second, independent set of
 * `vllm.replicas` replicas and of the core front ends exists beside it, its names suffixed `-b`,
 * so that two runs of the study execute at once, one per pair, sharing no GPU, cache or index.
 */

/** Most pairs a study can run: two (the g6.12xlarge's four GPUs hold two pairs of two replicas). */
export const MAX_PARALLELISM = 2;

/** Suffix of the names of a pair's replicas and front ends: none for pair 0, `-b` for pair 1. */
export function pairSuffix(pair: number): string {
  if (!Number.isInteger(pair) || pair < 0 || pair >= MAX_PARALLELISM) {
    throw new Error(`replica pair ${pair} does not exist; allowed: 0 to ${MAX_PARALLELISM - 1}`);
  }
  return pair === 0 ? '' : `-${String.fromCharCode(97 + pair)}`;
}

/** The pairs of the study, 0 first. */
export function studyPairs(config: LabConfig): number[] {
  return Array.from({ length: config.study.parallelism }, (_, pair) => pair);
}

/**
 * Whether an arm has its front end on every pair. Only the core arms over the standard replicas
 * (kube-proxy, the routers, the GAIE EPP, over both APIs) are duplicated; the optional arms (the
 * EPP with prefix weight x3, the AI Gateway, llm-d with its own KV-events replicas) stay on pair
 * 0, so a second pair never needs more than `vllm.replicas` further GPUs.
 */
export function onEveryPair(arm: Arm): boolean {
  return !arm.optional && arm.servers === 'standard';
}
