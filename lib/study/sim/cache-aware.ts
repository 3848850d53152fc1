/**
 * vllm-router's cache_aware policy (see CacheAwareRouterModel for the source it follows).
 *
 * The router counts its own load per worker: +1 after it picks a worker, -1 when the response stream
 * ends, never below 0, and the health checker sets every counter to 0 every `loadResetIntervalSecs`,
 * the first time `loadResetFirstSecs` after the load starts.
 * Both branches that do not follow a tree match pick the least loaded worker by that counter, the
 * first one in registry order on a tie.
 */

import type { CacheAwareRouterModel, SimulationInput, SimulationModel } from './types.ts';
import { leastLoaded, type Router } from './view.ts';

/** One worker's approximate tree: per prefix its characters and last use, and the total. */
interface TenantTree {
  chars: number;
  readonly prefixes: Map<number, { chars: number; lastUse: number }>;
}

/** Characters of the routing text: the prompt over completions, "" over chat (no session_id sent). */
export function routingText(
  spec: Pick<CacheAwareRouterModel, 'promptVisible'>,
  input: Pick<SimulationInput, 'prefixLen' | 'suffixLen' | 'chatTemplateTokens'>,
  model: Pick<SimulationModel, 'promptCharsPerToken'>,
): { prefix: number; suffix: number } {
  if (!spec.promptVisible) return { prefix: 0, suffix: 0 };
  return {
    prefix: input.prefixLen * model.promptCharsPerToken,
    suffix: (input.suffixLen + input.chatTemplateTokens) * model.promptCharsPerToken,
  };
}

export function cacheAwareRouter(
  spec: CacheAwareRouterModel,
  input: SimulationInput,
  model: SimulationModel,
  replicas: number,
): Router {
  const text = routingText(spec, input, model);
  const textChars = text.prefix + text.suffix;
  const trees: TenantTree[] = Array.from({ length: replicas }, () => ({ chars: 0, prefixes: new Map() }));
  const intervalMs = spec.evictionIntervalSecs * 1000;
  let nextEviction = intervalMs > 0 ? intervalMs : Number.POSITIVE_INFINITY;
  // The router's own in-flight counter per worker, which the health checker zeroes now and then.
  const load = new Int32Array(replicas);
  const resetMs = (spec.loadResetIntervalSecs ?? 0) * 1000;
  let nextReset =
    resetMs > 0
      ? (spec.loadResetFirstSecs ?? spec.loadResetIntervalSecs ?? 0) * 1000
      : Number.POSITIVE_INFINITY;

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

  /** Background work due by `now`: tree eviction and the health checker's counter reset. */
  const catchUp = (now: number): void => {
    while (now >= nextEviction) {
      evict();
      nextEviction += intervalMs;
    }
    if (now >= nextReset) {
      load.fill(0);
      while (now >= nextReset) nextReset += resetMs;
    }
  };

  return {
    pick(prefix, _slot, now) {
      catchUp(now);
      let min = Number.POSITIVE_INFINITY;
      let max = 0;
      for (let r = 0; r < replicas; r++) {
        const l = load[r] as number;
        if (l < min) min = l;
        if (l > max) max = l;
      }
      const imbalanced = max - min > spec.balanceAbsThreshold && max > min * spec.balanceRelThreshold;
      let chosen: number;
      if (imbalanced) chosen = leastLoaded(load, replicas);
      else {
        let matched = -1;
        for (let r = 0; r < replicas && matched < 0; r++) if (trees[r]?.prefixes.has(prefix)) matched = r;
        // An empty text matches 0.0 (no 0/0): the low-match branch, least loaded.
        const matchRate = textChars === 0 || matched < 0 ? 0 : text.prefix / textChars;
        chosen = matchRate > spec.cacheThreshold ? matched : leastLoaded(load, replicas);
      }
      insert(chosen, prefix, now);
      load[chosen] = (load[chosen] as number) + 1;
      return chosen;
    },
    finished(replica, now) {
      catchUp(now);
      // A counter the health checker zeroed while the request ran stays at 0.
      if ((load[replica] as number) > 0) load[replica] = (load[replica] as number) - 1;
    },
  };
}
