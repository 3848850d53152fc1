import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadLabConfig } from '../../../lib/config/load.ts';
import type { NetworkStudyPlan, NetworkStudyRecord } from '../../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { networkSmokePlan } from '../../../lib/network/study/smoke.ts';
import { CELL_LABEL } from '../../../lib/network/topology.ts';
import { STATUS_FILE } from '../../../lib/runner/layout.ts';
import { FileNetworkResultStore } from '../../../lib/runner/network/file-store.ts';
import { NETWORK_RUN_LABEL } from '../../../lib/runner/network/jobs.ts';
import { runNetworkSmokeStudy, runNetworkStudy } from '../../../lib/runner/network/run-network-study.ts';
import type { NetworkCluster } from '../../../lib/runner/ports.ts';
import type { StudyStatus } from '../../../lib/runner/status.ts';
import { RunnerInterruptedError, STOP_CLEANUP_MS, StopRequest } from '../../../lib/runner/stop-signal.ts';
import { tempDir } from '../../temp.ts';
import { FakeCell, fakeDeps } from './fake-cell.ts';

/**
 * The network runner told to stop (SIGTERM when its pod is deleted) in the middle of an E10 step:
 * the lowered conntrack limit is still restored, its Jobs are deleted, the study is `interrupted`,
 * and the resumed study runs the step again.
 */

const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;
const CELL = 'dp-iptables';
const E10 = ['e10-limit-default', 'e10-limit-2048', 'e10-limit-1024'];

function planOf(ids: readonly string[]): NetworkStudyPlan {
  const full = networkStudyPlan(config, CELL);
  return { ...full, runs: full.runs.filter((r) => ids.includes(r.id)) };
}

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

/** The cell's API, asking the runner to stop right after `when` picks a call. */
function signalAfter(
  cluster: NetworkCluster,
  stop: StopRequest,
  when: (method: string, args: readonly unknown[]) => boolean,
): NetworkCluster {
  return new Proxy(cluster, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        if (!stop.requested && when(String(prop), args)) stop.request('SIGTERM');
        return result;
      };
    },
  });
}

describe('the network runner told to stop mid-run', () => {
  it('restores the conntrack limit, deletes its Jobs, stops as interrupted, and the resumed study runs the step again', async () => {
    const root = tempDir('network-stop-');
    const fake = new FakeCell(config, CELL, root);
    const lines: string[] = [];
    const deps = fakeDeps(fake, new FileNetworkResultStore(root), lines);
    const plan = planOf(E10);
    const stop = new StopRequest(fake.clock);
    let signalledAt = 0;
    const cluster = signalAfter(fake, stop, (method, args) => {
      const name = (args[0] as { metadata?: { name?: string } })?.metadata?.name ?? '';
      const hit = method === 'createJob' && name.includes('e10-limit-2048') && name.includes('driver');
      if (hit) signalledAt = fake.clock.ms;
      return hit;
    });
    await expect(
      runNetworkStudy({ ...deps, cluster, stop }, config, plan, { pollIntervalMs: 1_000 }),
    ).rejects.toThrow(RunnerInterruptedError);
    expect(signalledAt).toBeGreaterThan(0);
    expect(fake.clock.ms - signalledAt).toBeLessThanOrEqual(STOP_CLEANUP_MS);
    // The step lowered the limit to 2048; the cleanup put the host's own back.
    expect(fake.conntrackWrites).toContain(2_048);
    expect(fake.conntrackMax).toBe(262_144);
    // No Job of the runner is left in the cell.
    expect(await fake.listJobNames('plain', `${CELL_LABEL}=${CELL},${NETWORK_RUN_LABEL}`)).toEqual([]);

    const status = readJson<StudyStatus>(join(root, STATUS_FILE));
    expect(status.state).toBe('interrupted');
    expect(status.error).toMatch(/received SIGTERM/);
    const folder = join(root, 'studies', status.studyId as string);
    const stopped = readJson<NetworkStudyRecord>(join(folder, 'study.json'));
    expect(stopped.state).toBe('interrupted');
    expect(stopped.finishedAt).toBeUndefined();
    expect(stopped.runs.map((r) => r.id)).toEqual(['e10-limit-default']);
    const log = readFileSync(join(folder, 'runner.log'), 'utf8');
    expect(log).toMatch(/study interrupted: the runner received SIGTERM/);
    // The driver was cut short, not waited for: the runner deleted it on its way out.
    expect(log).toMatch(
      /deleting job\/\S*e10-limit-2048\S*driver\S*, a Job of this runner stopped, in plain/,
    );

    const resumed = await runNetworkStudy(deps, config, plan, { pollIntervalMs: 1_000 });
    expect(resumed.studyId).toBe(stopped.studyId);
    expect(resumed.state).toBe('finished');
    expect(resumed.runs.map((r) => [r.id, r.valid])).toEqual(E10.map((id) => [id, true]));
    // The cut-short step ran again in an attempt of its own.
    expect(resumed.runs.find((r) => r.id === 'e10-limit-2048')?.attempt).toBe(2);
    expect(fake.conntrackMax).toBe(262_144);
  });

  it('a smoke study with three runs in flight: none is recorded, every Job is deleted, within the cleanup time', async () => {
    const root = tempDir('network-stop-smoke-');
    const fake = new FakeCell(config, 'mesh', root);
    const deps = fakeDeps(fake, new FileNetworkResultStore(root));
    const stop = new StopRequest(fake.clock);
    let signalledAt = 0;
    const cluster = signalAfter(fake, stop, (method) => {
      // The third Job alive at once: the schedule's first three runs are all in flight.
      const hit = method === 'createJob' && fake.activeJobs() === 3;
      if (hit) signalledAt = fake.clock.ms;
      return hit;
    });
    const outcome = await runNetworkSmokeStudy(
      { ...deps, cluster, stop },
      config,
      networkSmokePlan(config, 'mesh'),
      { pollIntervalMs: 1_000 },
    );
    expect(outcome.error).toBeInstanceOf(RunnerInterruptedError);
    expect(signalledAt).toBeGreaterThan(0);
    expect(fake.clock.ms - signalledAt).toBeLessThanOrEqual(STOP_CLEANUP_MS);
    for (const namespace of ['plain', 'mesh'])
      expect(await fake.listJobNames(namespace, `${CELL_LABEL}=mesh,${NETWORK_RUN_LABEL}`)).toEqual([]);
    const status = readJson<StudyStatus>(join(root, STATUS_FILE));
    expect(status.state).toBe('interrupted');
    const stopped = readJson<NetworkStudyRecord>(
      join(root, 'studies', status.studyId as string, 'study.json'),
    );
    expect(stopped.runs).toEqual([]);
  });
});
