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
 * vllm-router's health-check interval, which the lab passes as `--health-check-interval-secs`
 * (charts/routers.ts routerArgs) rather than trusting the default: 60 s is the default in
 * vllm-project/router's `src/main.rs` (`health_check_interval_secs`, `default_value_t = 60`) at 0.1.12
 * (commit 4df9bbc) and on main after 0.1.15, and in the Python launcher the pip package's
 * `vllm-router` command runs (`py_src/vllm_router/router_args.py`, `RouterArgs`), but the 0.1.15 tag
 * (commit 1fbcde74) could not be read
 * here (docs/facts.md §3.3). The flag exists in every version read; a router without it would exit
 * with clap's usage error and never turn ready, which the arm's readiness wait reports. The registry's health checker
 * (`WorkerRegistry::start_health_checker`, `src/core/worker_registry.rs`, started by `src/server.rs`)
 * resets every worker's load counter on every 10th check, in flight or not; confirmed for 0.1.15 by
 * vllm-project/router issue 197 and the still-open fix, PR 216. A run shorter than the first reset
 * sees none; a prediction that misses one is off by the in-flight requests at that moment.
 */
export const ROUTER_HEALTH_CHECK_INTERVAL_SECS = 60;
/** Health checks between two resets of the router's load counters. */
export const ROUTER_LOAD_RESET_EVERY_CHECKS = 10;
/**
 * Health-check intervals from the checker's start to the first reset: tokio's `interval` completes its
 * first tick at once, so check 1 is at the start and check 10 nine intervals later. The router starts
 * before the load, so relative to the load the first reset comes at most this long after it starts.
 */
export const ROUTER_INTERVALS_TO_FIRST_RESET = ROUTER_LOAD_RESET_EVERY_CHECKS - 1;
