/** vllm-router's cache_aware policy (see CacheAwareRouterModel). */

import type { CacheAwareRouterModel, SimulationInput, SimulationModel } from './types.ts';
import { leastLoaded, type Router } from './view.ts';

/** One worker's approximate tree: per prefix its characters and last use, and the total. */
interface TenantTree {
  chars: number;
  readonly prefixes: Map<number, { chars: number; lastUse: number }>;
}

export function cacheAwareRouter(
  spec: CacheAwareRouterModel,
  input: SimulationInput,
  model: SimulationModel,
  replicas: number,
  inFlight: Int32Array,
): Router {
  const text = spec.promptVisible
    ? {
        prefix: input.prefixLen * model.promptCharsPerToken,
        suffix: (input.suffixLen + input.chatTemplateTokens) * model.promptCharsPerToken,
      }
    : { prefix: 0, suffix: 0 };
  const textChars = text.prefix + text.suffix;
  const trees: TenantTree[] = Array.from({ length: replicas }, () => ({ chars: 0, prefixes: new Map() }));
  const intervalMs = spec.evictionIntervalSecs * 1000;
  let nextEviction = intervalMs > 0 ? intervalMs : Number.POSITIVE_INFINITY;

  const insert = (r: number, prefix: number, now: number): void => {
    if (textChars === 0) return; // tree.insert("") adds no character
    const tree = trees[r] as TenantTree;
    const entry = tree.prefixes.get(prefix);
    // A new prefix adds its text and the unique suffix; a known one only the suffix.
    const added = entry ? text.suffix : textChars;
    tree.chars += added;
    if (entry) {
      entry.chars += added;
      entry.lastUse = now;
    } else tree.prefixes.set(prefix, { chars: added, lastUse: now });
  };

  const evict = (): void => {
    for (const tree of trees) {
      if (tree.chars <= spec.maxTreeSize) continue;
      const byAge = [...tree.prefixes.entries()].sort((a, b) => a[1].lastUse - b[1].lastUse);
      for (const [prefix, entry] of byAge) {
        if (tree.chars <= spec.maxTreeSize) break;
        tree.chars -= entry.chars;
        tree.prefixes.delete(prefix);
      }
    }
  };

  return (prefix, _slot, now) => {
    while (now >= nextEviction) {
      evict();
      nextEviction += intervalMs;
    }
    let min = Number.POSITIVE_INFINITY;
    let max = 0;
    for (let r = 0; r < replicas; r++) {
      const load = inFlight[r] as number;
      if (load < min) min = load;
      if (load > max) max = load;
    }
    const imbalanced = max - min > spec.balanceAbsThreshold && max > min * spec.balanceRelThreshold;
    let chosen: number;
    if (imbalanced) {
      chosen = leastLoaded(inFlight, replicas);
    } else {
      let matched = -1;
      for (let r = 0; r < replicas && matched < 0; r++) if (trees[r]?.prefixes.has(prefix)) matched = r;
      const matchRate = textChars === 0 || matched < 0 ? 0 : text.prefix / textChars;
      if (matchRate > spec.cacheThreshold) chosen = matched;
      else {
        chosen = 0;
        for (let r = 1; r < replicas; r++)
          if ((trees[r] as TenantTree).chars < (trees[chosen] as TenantTree).chars) chosen = r;
      }
    }
    insert(chosen, prefix, now);
    return chosen;
  };
}
