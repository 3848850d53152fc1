import { describe, expect, it } from 'vitest';
import { loadLabConfig } from '../../../lib/config/load.ts';
import type { NetworkStudyPlan } from '../../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { NETWORK_SMOKE_READY_TIMEOUT_MINUTES, networkSmokePlan } from '../../../lib/network/study/smoke.ts';
import { FileNetworkResultStore } from '../../../lib/runner/network/file-store.ts';
import { runNetworkSmokeStudy, runNetworkStudy } from '../../../lib/runner/network/run-network-study.ts';
import { tempDir } from '../../temp.ts';
import { FAST, FakeCell, fakeDeps } from './fake-cell.ts';

/**
 * A smoke precondition that never holds (E9's backend never ready) fails its run after the smoke's
 * ready timeout, on the fake clock, not after the full study's 10 minutes; the full study's own
 * waits keep their timeout.
 */

const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;
const FULL_WAIT_MS = 10 * 60_000;

/** E9's first step with its new-connection run: both wait for ready backends. */
function e9(plan: NetworkStudyPlan, prefix: string): NetworkStudyPlan {
  return { ...plan, runs: plan.runs.filter((r) => r.id.startsWith(`${prefix}e9-`)).slice(0, 2) };
}

/** A cell whose E9 backend never has a ready pod. */
function brokenCell() {
  const root = tempDir('network-smoke-timeout-');
  const fake = new FakeCell(config, 'dp-iptables', root, { readyBackends: 0 });
  return { fake, deps: fakeDeps(fake, new FileNetworkResultStore(root)) };
}

const minutes = (ms: number) => ms / 60_000;

describe('the smoke study ready timeout', () => {
  it(`fails a smoke precondition after ${NETWORK_SMOKE_READY_TIMEOUT_MINUTES} min, each run on its own, with the full study's timeout set to 10`, async () => {
    const { fake, deps } = brokenCell();
    const started = fake.clock.ms;
    const plan = e9(networkSmokePlan(config, 'dp-iptables'), 'smoke-');
    expect(plan.runs.map((r) => r.id)).toEqual(['smoke-e9-services-0', 'smoke-e9-new-connection-0']);
    const { checklist, error } = await runNetworkSmokeStudy(deps, config, plan, {
      ...FAST,
      readyTimeoutMs: FULL_WAIT_MS,
    });
    expect(error).toBeUndefined();
    expect(checklist?.passed).toBe(false);
    for (const runId of ['smoke-e9-services-0', 'smoke-e9-new-connection-0']) {
      const check = checklist?.entries
        .find((e) => e.runId === runId)
        ?.checks.find((c) => c.proof === 'preconditions');
      expect(check?.status, runId).toBe('fail');
      expect(check?.evidence).toMatch(
        new RegExp(
          `not started: 0 Services with \\d+ ready backends each not reached within ${NETWORK_SMOKE_READY_TIMEOUT_MINUTES}m`,
        ),
      );
      expect(check?.fix).toContain(`a smoke study waits ${NETWORK_SMOKE_READY_TIMEOUT_MINUTES} min for each`);
    }
    // Two waits of the smoke's timeout (and the study's few host Jobs), far from two of 10 minutes.
    const elapsed = fake.clock.ms - started;
    expect(minutes(elapsed)).toBeGreaterThanOrEqual(2 * NETWORK_SMOKE_READY_TIMEOUT_MINUTES);
    expect(minutes(elapsed)).toBeLessThan(2 * NETWORK_SMOKE_READY_TIMEOUT_MINUTES + 1);
  });

  it("the full study's checks stop it within the smoke's timeout; its own runs wait runner.readyTimeoutMinutes", async () => {
    const checks = e9(networkSmokePlan(config, 'dp-iptables'), 'smoke-');
    const full = e9(networkStudyPlan(config, 'dp-iptables'), '');
    const broken = brokenCell();
    const started = broken.fake.clock.ms;
    await expect(
      runNetworkStudy(broken.deps, config, full, { ...FAST, readyTimeoutMs: FULL_WAIT_MS }, { checks }),
    ).rejects.toThrow(/the smoke checks of cell dp-iptables failed before the first long run/);
    expect(minutes(broken.fake.clock.ms - started)).toBeLessThan(2 * NETWORK_SMOKE_READY_TIMEOUT_MINUTES + 1);

    // Without the checks, the full study's run waits its own timeout (3 min here: longer than the smoke's).
    const alone = brokenCell();
    const from = alone.fake.clock.ms;
    const study = await runNetworkStudy(
      alone.deps,
      config,
      { ...full, runs: full.runs.slice(0, 1) },
      {
        ...FAST,
        readyTimeoutMs: FULL_WAIT_MS,
      },
    );
    expect(study.runs[0].invalidReasons[0]).toMatch(/not reached within 10m/);
    expect(minutes(alone.fake.clock.ms - from)).toBeGreaterThanOrEqual(10);
  });
});
