/**
 * vllm-router's own cache_aware defaults (lab-spec 3.3), which the configuration writes out so the
 * study records what ran, and which apply to a variant that leaves a threshold unset. A module of
 * its own: the schema and the simulator both read it, and neither pulls the other in with it.
 */
export const CACHE_AWARE_DEFAULTS = {
  cacheThreshold: 0.3,
  balanceAbsThreshold: 64,
  balanceRelThreshold: 1.5,
  evictionIntervalSecs: 120,
  maxTreeSize: 67_108_864,
} as const;
