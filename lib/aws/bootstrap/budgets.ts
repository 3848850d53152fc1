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

/** From the launch until the bootstrap starts: boot, cloud-init, the launcher's downloads. */
export const BOOT_MARGIN_MINUTES = 4;

/** The sum of the base budgets. */
export function baseBudgetMinutes(): number {
  return STEP_NAMES.reduce((sum, name) => sum + BASE_STEP_MINUTES[name], 0);
}

/** The least `instance.readyTimeoutMinutes` that holds every step's base budget and the boot. */
export function minimumReadyTimeoutMinutes(): number {
  return baseBudgetMinutes() + BOOT_MARGIN_MINUTES;
}

/**
 * Seconds per step for a ready timeout: the base budgets, scaled up in proportion when the
 * timeout leaves more time than their sum (a slow region or mirror gets more time everywhere).
 * Never below the base: a timeout under the minimum is a configuration error, not a squeeze.
 */
export function stepBudgetSeconds(readyTimeoutMinutes: number): Record<StepName, number> {
  const available = Math.max(readyTimeoutMinutes - BOOT_MARGIN_MINUTES, baseBudgetMinutes());
  const scale = available / baseBudgetMinutes();
  return Object.fromEntries(
    STEP_NAMES.map((name) => [name, Math.floor(BASE_STEP_MINUTES[name] * 60 * scale)]),
  ) as Record<StepName, number>;
}

/** "arm_cost_guard 1, hold_os_updates 6, ..." for messages. */
export function describeBaseBudgets(): string {
  return STEP_NAMES.map((name) => `${name} ${BASE_STEP_MINUTES[name]}`).join(', ');
}
