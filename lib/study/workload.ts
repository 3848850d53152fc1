/**
 * Workload arithmetic of docs/facts.md §4.1: working set, looked-up tokens and the theoretical upper
 * bound of the prefix-cache hit rate. Pure functions of plain numbers.
 */

/** The shape of a prefix_repetition workload. */
export interface PrefixWorkload {
  readonly prefixLen: number;
  readonly suffixLen: number;
  readonly chatTemplateTokens: number;
  readonly prefixes: number;
  readonly prompts: number;
}

/** Tokens that must stay cached for every prefix to hit: distinct prefixes x prefix length. */
export function workingSetTokens(w: Pick<PrefixWorkload, 'prefixes' | 'prefixLen'>): number {
  return w.prefixes * w.prefixLen;
}

/** Tokens each request looks up in the cache: prefix + suffix + chat template (2,186 by default). */
export function lookedUpTokens(
  w: Pick<PrefixWorkload, 'prefixLen' | 'suffixLen' | 'chatTemplateTokens'>,
): number {
  return w.prefixLen + w.suffixLen + w.chatTemplateTokens;
}

/** Requests per prefix: the prefix_repetition dataset repeats each prefix prompts/prefixes times. */
export function repeatsPerPrefix(w: Pick<PrefixWorkload, 'prompts' | 'prefixes'>): number {
  return w.prompts / w.prefixes;
}

/**
 * Upper bound of one replica's hit rate, as a fraction: the first request of each prefix misses
 * it, every repeat hits it, and suffix and template tokens never hit.
 * `(r - 1) / r x P / L`; 7/8 x 2048/2186 = 0.820 for the default workload.
 */
export function upperBound(w: PrefixWorkload): number {
  const r = repeatsPerPrefix(w);
  return ((r - 1) / r) * (w.prefixLen / lookedUpTokens(w));
}

/** Whether routing can change the hit rate, and why (docs/facts.md §4.1). */
export interface CachePressure {
  readonly workingSetTokens: number;
  readonly kvCacheTokensPerReplica: number;
  /** The whole working set fits in one replica: every policy hits equally. */
  readonly fitsOneReplica: boolean;
  /** An even split of the prefixes over the replicas fits in each replica's cache. */
  readonly partitionFits: boolean;
  /** Routing can matter only when the working set does not fit one replica but a partition does. */
  readonly routingCanMatter: boolean;
}

export function cachePressure(
  w: Pick<PrefixWorkload, 'prefixes' | 'prefixLen'>,
  replicas: number,
  kvCacheTokensPerReplica: number,
): CachePressure {
  const workingSet = workingSetTokens(w);
  const fitsOneReplica = workingSet <= kvCacheTokensPerReplica;
  // The largest share goes to the replica with the most prefixes when they do not divide evenly.
  const partitionFits = Math.ceil(w.prefixes / replicas) * w.prefixLen <= kvCacheTokensPerReplica;
  return {
    workingSetTokens: workingSet,
    kvCacheTokensPerReplica,
    fitsOneReplica,
    partitionFits,
    routingCanMatter: !fitsOneReplica && partitionFits && replicas > 1,
  };
}

/** Splits `total` into `parts` near-equal integers, larger ones first (128 over 3 = 43, 43, 42). */
export function evenSplit(total: number, parts: number): number[] {
  const base = Math.floor(total / parts);
  const remainder = total % parts;
  return Array.from({ length: parts }, (_, i) => base + (i < remainder ? 1 : 0));
}

/** Seed step between the replicas' clients of the ideal partition: 42 and 4242 in the published lab. */
export const PARTITION_SEED_STEP = 4200;

/**
 * The seed of each replica's client in the ideal-partition run: the configured list, or
 * `seed + 4200 x replica` (42, 4242, 8442, ... from the default seed 42), so every replica's
 * prefixes differ however many replicas there are.
 */
export function partitionSeeds(
  w: { readonly seed: number; readonly partitionSeeds?: readonly number[] },
  replicas: number,
): number[] {
  if (w.partitionSeeds) return w.partitionSeeds.slice(0, replicas);
  return Array.from({ length: replicas }, (_, replica) => w.seed + PARTITION_SEED_STEP * replica);
}
