import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findRun } from '../../lib/study/plan.ts';
import type { RunRecord } from '../../lib/study/results.ts';
import { byId, durationMs, plan, rehearsal, replicas, useRehearsalServers } from './rehearsal-setup.ts';

/** Rehearsals of Jobs that fail or hang, and of resets verified or refused. */

useRehearsalServers();

describe('rehearsal: Jobs that fail or hang', () => {
  it('detects a failed Job at once, not after the timeout', async () => {
    const r = rehearsal({
      plan: { runs: plan.runs.slice(0, 6) },
      behaviour: { 'arm-kube-proxy-prefix': { failAfterSeconds: 30 } },
      options: { jobTimeoutMs: 60 * 60_000 },
    });
    const study = byId(await r.run());
    const run = study.get('arm-kube-proxy-prefix');
    expect(run?.clients[0].job).toBe('failed');
    expect(run?.invalidReasons).toContain('client arm-kube-proxy-prefix: Job failed (status.failed > 0)');
    expect(run?.invalidReasons).toContain(
      'client arm-kube-proxy-prefix: result file arm-kube-proxy-prefix.json is missing',
    );
    // Failed 30 s after it started; seen at the next 5 s poll.
    expect(durationMs(run as RunRecord)).toBe(30_000);
    expect(r.lines).toContain('job/bench-arm-kube-proxy-prefix failed (status.failed)');
  });

  it('deletes a Job that outlives the timeout and records it as timed out', async () => {
    const r = rehearsal({
      plan: { runs: plan.runs.slice(0, 1) },
      behaviour: { 'bound-p128': { hangs: true } },
      options: { jobTimeoutMs: 10 * 60_000 },
    });
    const [run] = (await r.run()).runs;
    expect(run.clients[0].job).toBe('timed-out');
    expect(run.valid).toBe(false);
    expect(run.invalidReasons).toContain(
      'client bound-p128: Job did not finish before the timeout (neither status.succeeded nor status.failed)',
    );
    expect(durationMs(run)).toBe(10 * 60_000);
    expect(await r.cluster.getJob('bench-bound-p128')).toBeUndefined();
  });

  it('deletes a Job whose pod no node can take after 5 minutes, not the Job timeout, and says why', async () => {
    const r = rehearsal({
      plan: { runs: ['partition', 'arm-kube-proxy-prefix'].map((id) => findRun(plan, id)) },
      unschedulableAtRun: 'partition',
    });
    const study = byId(await r.run());
    const stuck = study.get('partition') as RunRecord;
    expect(stuck.clients.map((c) => c.job)).toEqual(['unschedulable', 'unschedulable']);
    expect(stuck.valid).toBe(false);
    expect(stuck.invalidReasons).toContain(
      "client partition-r0: Job never started: no node could take its pod (PodScheduled False, Unschedulable); the scheduler's message is in the client's log",
    );
    // Noticed within the pod polls after 5 minutes, far from the 60-minute Job timeout.
    expect(durationMs(stuck)).toBeGreaterThanOrEqual(5 * 60_000);
    expect(durationMs(stuck)).toBeLessThan(6 * 60_000);
    expect(readFileSync(join(r.study(), 'partition-r0', 'partition-r0.log'), 'utf8')).toMatch(
      /^pod bench-partition-r0-x7k2p of job\/bench-partition-r0 was Unschedulable for 5m\d\ds: 0\/1 nodes are available: 1 Insufficient memory\./,
    );
    expect(await r.cluster.getJob('bench-partition-r0')).toBeUndefined();
    // The study goes on.
    expect(study.get('arm-kube-proxy-prefix')?.valid).toBe(true);
  });

  it('waits until a timed-out Job and its pods are gone before the next run resets the caches', async () => {
    // The partition run uses both replicas, so it runs after bound-p128, not beside it.
    const r = rehearsal({
      plan: { runs: [findRun(plan, 'bound-p128'), findRun(plan, 'partition')] },
      behaviour: { 'bound-p128': { hangs: true } },
      options: { jobTimeoutMs: 10 * 60_000 },
      jobDeleteSeconds: 30,
    });
    for (const replica of replicas) replica.onReset = () => r.cluster.events.push(`reset ${replica.pod}`);
    const study = await r.run();
    const events = r.cluster.events;
    const deleted = events.indexOf('delete job/bench-bound-p128');
    const gone = events.indexOf('gone job/bench-bound-p128');
    const nextReset = events.findIndex((e, i) => i > deleted && e.startsWith('reset '));
    expect(deleted, events.join('\n')).toBeGreaterThan(-1);
    expect(gone, events.join('\n')).toBeGreaterThan(deleted);
    expect(nextReset, events.join('\n')).toBeGreaterThan(gone);
    expect(events.indexOf('create job/bench-partition-r0')).toBeGreaterThan(nextReset);
    // The timed-out run lasted until its Job was gone: the timeout plus the 30 s deletion.
    expect(durationMs(study.runs[0])).toBe(10 * 60_000 + 30_000);
    // Its client log was saved before its pod went away.
    expect(readFileSync(join(r.study(), 'bound-p128', 'bound-p128.log'), 'utf8')).toContain(
      '(log of bench-bound-p128-x7k2p)',
    );
  });
});

describe('rehearsal: reset without dev mode', () => {
  it('falls back to deleting the replica pods and waiting for /v1/models', async () => {
    const r = rehearsal({ plan: { runs: [findRun(plan, 'partition'), findRun(plan, 'arm-epp-prefix')] } });
    replicas[1].devMode = false;
    const study = await r.run();
    expect(r.cluster.deletedPods).toEqual(['qwen3-1', 'qwen3-1']);
    for (const run of study.runs) {
      expect(run.reset).toBe('pod-restart');
      expect(run.valid, run.invalidReasons.join()).toBe(true);
    }
    // The new pod took 90 s to become ready; the run waited for it.
    expect(durationMs(study.runs[0])).toBeGreaterThanOrEqual(90_000);
    expect(r.lines.some((l) => l.includes('qwen3-1: /reset_prefix_cache answered 404'))).toBe(true);
    expect(existsSync(join(r.study(), 'runs', 'partition.json'))).toBe(true);
  });
});

describe('rehearsal: resets are verified, not assumed', () => {
  // The partition run uses both replicas (a bound run owns one).
  const one = { runs: [findRun(plan, 'partition')] };

  it('records how every reset of the default study was verified: by the log line after the call', async () => {
    const r = rehearsal({ plan: { runs: plan.runs.slice(4, 6) } });
    const study = await r.run();
    for (const run of study.runs) {
      expect(run.resets?.map((x) => x.verifiedBy)).toEqual(['log-confirmed', 'log-confirmed']);
      expect(run.resets?.[0].detail).toBe(
        'POST /reset_prefix_cache answered 200 and the log logged "Successfully reset prefix cache" after it',
      );
    }
    expect(r.cluster.deletedPods).toEqual([]);
  });

  it('restarts a replica that stays busy, and the run is valid', async () => {
    const r = rehearsal({ plan: one, options: { idleTimeoutMs: 2 * 60_000 } });
    replicas[1].busyScrapes = 10_000;
    const resetCalls = replicas[1].resets;
    const [run] = (await r.run()).runs;
    expect(r.cluster.deletedPods).toEqual(['qwen3-1']);
    // A busy replica is not sent a reset it would refuse: it is replaced.
    expect(replicas[1].resets).toBe(resetCalls);
    expect(run.valid, run.invalidReasons.join()).toBe(true);
    expect(run.reset).toBe('pod-restart');
    expect(run.resets?.[1]).toEqual({
      replica: 1,
      pod: 'qwen3-1',
      verifiedBy: 'pod-restart',
      detail:
        'still busy after 2m00s (3 running, 0 waiting); the pod was replaced (new uid), Ready and serving /v1/models',
    });
    expect(run.resets?.[0].verifiedBy).toBe('log-confirmed');
  });

  it('restarts a replica whose log says the reset was refused, and the run is valid', async () => {
    const r = rehearsal({ plan: one });
    replicas[0].resetBehaviour = 'refused';
    const [run] = (await r.run()).runs;
    expect(r.cluster.deletedPods).toEqual(['qwen3-0']);
    expect(run.valid, run.invalidReasons.join()).toBe(true);
    expect(run.resets?.[0]).toMatchObject({ verifiedBy: 'pod-restart' });
    expect(run.resets?.[0].detail).toMatch(
      /^vLLM refused the reset: ".*Failed to reset prefix cache because some blocks \(34\) are not freed yet"; the pod was replaced/,
    );
    expect(r.lines).toContain(
      'qwen3-0: vLLM refused the reset: "(EngineCore_DP0 pid=212) WARNING 10-14 09:02:00 [block_pool.py:321] Failed to reset prefix cache because some blocks (34) are not freed yet"; deleting the pod to reset its cache',
    );
  });

  it('restarts a replica whose log confirms nothing within the window', async () => {
    const r = rehearsal({ plan: one });
    replicas[1].resetBehaviour = 'silent';
    const [run] = (await r.run()).runs;
    expect(r.cluster.deletedPods).toEqual(['qwen3-1']);
    expect(run.valid, run.invalidReasons.join()).toBe(true);
    expect(run.resets?.[1].detail).toMatch(
      /^POST \/reset_prefix_cache answered 200, but within 30s the log showed neither "Successfully reset prefix cache" nor a refusal; the pod was replaced/,
    );
  });

  it('marks the run invalid, without starting it, when nothing can verify the reset', async () => {
    const r = rehearsal({ plan: one, options: { podRestartTimeoutMs: 10 * 60_000 } });
    replicas[1].resetBehaviour = 'silent';
    replicas[1].neverReadyAfterRestart = true;
    const [run] = (await r.run()).runs;
    expect(run.valid).toBe(false);
    expect(run.resets?.[1].verifiedBy).toBe('unverified');
    expect(run.invalidReasons).toEqual([
      'not started: replica qwen3-1: prefix cache reset not verified: POST /reset_prefix_cache answered 200, but within 30s the log showed neither "Successfully reset prefix cache" nor a refusal; restarting the pod failed: pod restart did not bring qwen3-1 back to serving /v1/models within 10m00s',
    ]);
    expect(r.cluster.created).toEqual([]);
  });
});
