/**
 * vllm-router's own cache_aware defaults (docs/facts.md §3.3), which the configuration writes out so the
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

/**
 * vllm-router's health-check interval when `--health-check-interval-secs` is not given (the lab does
 * not give it). 60 s is the sgl-router default the package inherits (sgl-project/sglang PR 9198,
 * `health_check_interval_secs`): UNCONFIRMED at 0.1.15, whose source (tag commit 1fbcde74) could not
 * be read here (docs/facts.md §3.3). The reset of every worker's load counter every 10th check is
 * confirmed for 0.1.15 by vllm-project/router issue 197 and the still-open fix, PR 216. Only a run
 * longer than 10 intervals sees a reset; a prediction that misses one is off by the in-flight
 * requests at that moment.
 */
export const ROUTER_HEALTH_CHECK_INTERVAL_SECS = 60;
/** Health checks between two resets of the router's load counters. */
export const ROUTER_LOAD_RESET_EVERY_CHECKS = 10;
