/**
 * Time budgets of the bootstrap's steps. CloudFormation waits `instance.readyTimeoutMinutes` for
 * the ready signal; the steps share that time, less what the host needs before the bootstrap
 * starts. Each step is ended when its budget runs out, so a hang fails the step it happened in,
 * with its name and log, before the WaitCondition times out with no reason at all.
 *
 * Pure data: the bootstrap renders the budgets into its settings, and the configuration rule
 * (lib/config/rules.ts) checks that the minimum fits.
 */

/** The bootstrap's steps, in the order they run (their bash functions in lib/aws/bootstrap/sh/steps). */
export const STEP_NAMES = [
  'arm_cost_guard',
  'hold_os_updates',
  'preflight',
  'check_gpus',
  'check_container_runtime',
  'install_k3s',
  'prefetch',
  'apply_prerequisites',
  'apply_charts',
  'wait_for_device_plugin',
  'wait_for_replicas',
  'record_gpu_uuids',
  'signal_success',
] as const;

export type StepName = (typeof STEP_NAMES)[number];

/**
 * Minutes each step gets at the default `instance.readyTimeoutMinutes` (45). Estimates, not yet
 * measured on a real account: the vLLM image (about 10 GB) and the model dominate the pre-fetch;
 * first-boot apt work and the replicas' start (weights, CUDA graphs) come next.
 */
export const BASE_STEP_MINUTES: Readonly<Record<StepName, number>> = {
  arm_cost_guard: 1,
  hold_os_updates: 6,
  preflight: 2,
  check_gpus: 1,
  check_container_runtime: 3,
  install_k3s: 4,
  prefetch: 10,
  apply_prerequisites: 3,
  apply_charts: 2,
  wait_for_device_plugin: 2,
  wait_for_replicas: 5,
  record_gpu_uuids: 1,
  signal_success: 1,
};

/**
 * The server's extra step when the cluster has K3s agents (issue 17): after its own pre-fetch and
 * before anything is applied, every agent has joined and every GPU agent has its model cache, so
 * no replica is ever placed on a node without the model.
 */
export const WAIT_FOR_AGENTS = 'wait_for_agents';
export type ServerStepName = StepName | typeof WAIT_FOR_AGENTS;

/** Minutes of the server's wait for its agents; they boot in parallel with it, so mostly spent already. */
export const WAIT_FOR_AGENTS_MINUTES = 8;

/** The server's steps: the one-host steps, with the wait for the agents when there are any. */
export function serverStepNames(withAgents: boolean): ServerStepName[] {
  if (!withAgents) return [...STEP_NAMES];
  const at = STEP_NAMES.indexOf('prefetch') + 1;
  return [...STEP_NAMES.slice(0, at), WAIT_FOR_AGENTS, ...STEP_NAMES.slice(at)];
}

const SERVER_WITH_AGENTS_MINUTES: Readonly<Record<ServerStepName, number>> = {
  ...BASE_STEP_MINUTES,
  [WAIT_FOR_AGENTS]: WAIT_FOR_AGENTS_MINUTES,
};

/** Seconds per server step: the one-host budgets, or those with the wait for the agents. */
export function serverStepBudgetSeconds(
  readyTimeoutMinutes: number,
  withAgents: boolean,
): Partial<Record<ServerStepName, number>> {
  return withAgents
    ? scaledBudgets(readyTimeoutMinutes, SERVER_WITH_AGENTS_MINUTES)
    : stepBudgetSeconds(readyTimeoutMinutes);
}

/**
 * A K3s agent's steps (issue 17): the common start, the GPU checks and the model cache on GPU
 * agents only, the join, a report of the cache to the server, the signal.
 */
export const AGENT_STEP_NAMES = [
  'arm_cost_guard',
  'hold_os_updates',
  'check_gpus',
  'check_container_runtime',
  'join_cluster',
  'prefetch',
  'report_model_cache',
  'signal_success',
] as const;
export type AgentStepName = (typeof AGENT_STEP_NAMES)[number];

/**
 * Steps a CPU agent skips: it has no GPU and serves no model. Its prefetch stages only the router
 * wheelhouse (steps/06-prefetch.sh).
 */
export const GPU_AGENT_ONLY_STEPS: readonly AgentStepName[] = [
  'check_gpus',
  'check_container_runtime',
  'report_model_cache',
];

/**
 * Minutes per agent step at the default ready timeout. Estimates, not measured: the join waits
 * for the server's K3s (which the server installs after its own first-boot apt work), and the
 * pre-fetch is the server's (the vLLM image and the model).
 */
export const AGENT_BASE_STEP_MINUTES: Readonly<Record<AgentStepName, number>> = {
  arm_cost_guard: 1,
  hold_os_updates: 6,
  check_gpus: 1,
  check_container_runtime: 3,
  join_cluster: 8,
  prefetch: 10,
  report_model_cache: 1,
  signal_success: 1,
};

/** The same scaling for an agent's steps (GPU agent's table; a CPU agent uses a subset). */
export function agentStepBudgetSeconds(readyTimeoutMinutes: number): Record<AgentStepName, number> {
  return scaledBudgets(readyTimeoutMinutes, AGENT_BASE_STEP_MINUTES);
}

/**
 * The network lab's steps (docs/facts.md §N1, N2): the common start (cost guard, OS updates,
 * preflight), the cell's datapath preflight, K3s with the cell's flags, image pulls, Cilium/Istio
 * as Helm prerequisites, the charts, the datapath proof, istiod's injector on mesh cells, signal.
 */
export const NETWORK_STEP_NAMES = [
  'arm_cost_guard',
  'hold_os_updates',
  'preflight',
  'preflight_datapath',
  'install_cell_k3s',
  'pull_cell_images',
  'apply_prerequisites',
  'apply_charts',
  'verify_datapath',
  'verify_mesh_injector',
  'signal_success',
] as const;

export type NetworkStepName = (typeof NETWORK_STEP_NAMES)[number];

/**
 * Minutes per network-lab step at the default ready timeout (45). Estimates, not measured on a
 * real account: no model and no 10 GB image here; Cilium's and istiod's `helm --wait` and the
 * first pulls of fortio/netshoot dominate.
 */
export const NETWORK_BASE_STEP_MINUTES: Readonly<Record<NetworkStepName, number>> = {
  arm_cost_guard: 1,
  hold_os_updates: 6,
  preflight: 2,
  preflight_datapath: 1,
  install_cell_k3s: 4,
  pull_cell_images: 4,
  apply_prerequisites: 8,
  apply_charts: 3,
  verify_datapath: 3,
  verify_mesh_injector: 2,
  signal_success: 1,
};

/** From the launch until the bootstrap starts: boot, cloud-init, the launcher's downloads. */
export const BOOT_MARGIN_MINUTES = 4;

/** The sum of the base budgets (the LLM-gateway lab's unless a table is given). */
export function baseBudgetMinutes(base: Readonly<Record<string, number>> = BASE_STEP_MINUTES): number {
  return Object.values(base).reduce((sum, minutes) => sum + minutes, 0);
}

/**
 * The least `instance.readyTimeoutMinutes` that holds every step's base budget and the boot; with
 * agents, the server's wait for them too (agents boot in parallel and need less).
 */
export function minimumReadyTimeoutMinutes(withAgents = false): number {
  return baseBudgetMinutes(withAgents ? SERVER_WITH_AGENTS_MINUTES : BASE_STEP_MINUTES) + BOOT_MARGIN_MINUTES;
}

/**
 * Seconds per step for a ready timeout: the base budgets, scaled up in proportion when the
 * timeout leaves more time than their sum (a slow region or mirror gets more time everywhere).
 * Never below the base: a timeout under the minimum is a configuration error, not a squeeze.
 */
export function stepBudgetSeconds(readyTimeoutMinutes: number): Record<StepName, number> {
  return scaledBudgets(readyTimeoutMinutes, BASE_STEP_MINUTES);
}

/** The same scaling for the network lab's steps. */
export function networkStepBudgetSeconds(readyTimeoutMinutes: number): Record<NetworkStepName, number> {
  return scaledBudgets(readyTimeoutMinutes, NETWORK_BASE_STEP_MINUTES);
}

/** The least network `instance.readyTimeoutMinutes` that holds every network step's base budget and the boot. */
export function networkMinimumReadyTimeoutMinutes(): number {
  return baseBudgetMinutes(NETWORK_BASE_STEP_MINUTES) + BOOT_MARGIN_MINUTES;
}

function scaledBudgets<Name extends string>(
  readyTimeoutMinutes: number,
  base: Readonly<Record<Name, number>>,
): Record<Name, number> {
  const total = baseBudgetMinutes(base);
  const scale = Math.max(readyTimeoutMinutes - BOOT_MARGIN_MINUTES, total) / total;
  return Object.fromEntries(
    (Object.keys(base) as Name[]).map((name) => [name, Math.floor(base[name] * 60 * scale)]),
  ) as Record<Name, number>;
}

/** "arm_cost_guard 1, hold_os_updates 6, ..." for messages (the LLM-gateway lab's unless a table is given). */
export function describeBaseBudgets(base: Readonly<Record<string, number>> = BASE_STEP_MINUTES): string {
  return Object.entries(base)
    .map(([name, minutes]) => `${name} ${minutes}`)
    .join(', ');
}
