import { describe, expect, it } from 'vitest';
import {
  BASE_STEP_MINUTES,
  BOOT_MARGIN_MINUTES,
  minimumReadyTimeoutMinutes,
  STEP_NAMES,
  stepBudgetSeconds,
} from '../../lib/facts/budgets.ts';
import { problems } from './problems.ts';

describe('instance.readyTimeoutMinutes and the bootstrap step budgets', () => {
  it('the default 45 minutes holds every base budget and the boot exactly', () => {
    expect(minimumReadyTimeoutMinutes()).toBe(45);
    expect(problems({})).toEqual([]);
    const seconds = stepBudgetSeconds(45);
    for (const name of STEP_NAMES) expect(seconds[name]).toBe(BASE_STEP_MINUTES[name] * 60);
  });

  it('rejects a timeout the steps cannot fit in, naming the budgets', () => {
    expect(problems({ instance: { readyTimeoutMinutes: 30 } })).toEqual([
      "instance.readyTimeoutMinutes = 30: must be at least 45, got 30: the bootstrap's step budgets (minutes: arm_cost_guard 1, hold_os_updates 6, preflight 2, check_gpus 1, check_container_runtime 3, install_k3s 4, prefetch 10, apply_prerequisites 3, apply_charts 2, wait_for_device_plugin 2, wait_for_replicas 5, record_gpu_uuids 1, signal_success 1) and 4 minutes of boot must fit in the time CloudFormation waits for the ready signal",
    ]);
  });

  it('gives a longer timeout to every step in proportion, never more than the timeout in all', () => {
    const seconds = stepBudgetSeconds(90);
    expect(seconds.prefetch).toBe(Math.floor(10 * 60 * (86 / 41)));
    const total = STEP_NAMES.reduce((sum, name) => sum + seconds[name], 0);
    expect(total).toBeLessThanOrEqual((90 - BOOT_MARGIN_MINUTES) * 60);
    expect(total).toBeGreaterThan((90 - BOOT_MARGIN_MINUTES) * 60 - STEP_NAMES.length);
    expect(problems({ instance: { readyTimeoutMinutes: 90 } })).toEqual([]);
  });
});
