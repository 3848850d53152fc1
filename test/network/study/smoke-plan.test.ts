import { describe, expect, test } from 'vitest';
import { loadLabConfig } from '../../../lib/config/load.ts';
import type { NetworkRun } from '../../../lib/network/study/model.ts';
import { cellExperiments, networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { planNetworkStudy } from '../../../lib/network/study/planner.ts';
import {
  NETWORK_SMOKE_TARGET_MINUTES,
  networkSmokeConfig,
  networkSmokePlan,
  samePath,
} from '../../../lib/network/study/smoke.ts';
import { networkProofOfReason } from '../../../lib/network/study/smoke-checklist.ts';
import { runSeconds } from '../../../lib/network/study/timing.ts';
import { cellByName } from '../../../lib/network/topology.ts';

const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;

describe("a cell's smoke plan (lib/network/study/smoke.ts)", () => {
  test('every experiment of the cell, each arm once, with the tiny load and smoke ids', () => {
    for (const cell of config.network.cells) {
      const plan = networkSmokePlan(config, cell.name);
      expect([...new Set(plan.runs.map((r) => r.experiment))]).toEqual(
        cellExperiments(cellByName(config.network, cell.name)),
      );
      expect(plan.runs.every((r) => r.id.startsWith('smoke-'))).toBe(true);
      expect(plan.runs.filter((r) => (r.repeat ?? 1) > 1)).toEqual([]);
      for (const run of plan.runs) {
        if (run.spec.kind === 'fortio') expect([run.spec.seconds, run.spec.qps > 50]).toEqual([2, false]);
        if (run.spec.kind === 'download') expect(run.spec.bytes).toBe(1024 * 1024);
        if (run.spec.kind === 'sse') expect(run.spec.events).toBe(20);
        if (run.spec.kind === 'service-scale') expect(run.spec.samples).toBe(5);
      }
      // E9 at 0 and 100 Services, its new-connection run once (the same path at both steps);
      // E10 at the lowest limit only (it reads and restores the default).
      expect(plan.runs.filter((r) => r.experiment === 'E9').map((r) => r.id)).toEqual([
        'smoke-e9-services-0',
        'smoke-e9-new-connection-0',
        'smoke-e9-services-100',
      ]);
      expect(plan.runs.filter((r) => r.experiment === 'E10').map((r) => r.id)).toEqual([
        'smoke-e10-limit-1024',
      ]);
    }
    // E3's and E4's plain arms and E3's mesh-mtls and E4's mesh-l7 arms are E1's runs at the
    // smoke's load: each experiment keeps the arms that take a path of their own.
    const mesh = networkSmokePlan(config, 'mesh').runs.map((r) => r.id);
    expect(mesh.filter((id) => /^smoke-e[134]-/.test(id))).toEqual([
      'smoke-e1-plain-r1',
      'smoke-e1-mesh-mtls-r1',
      'smoke-e3-fixed-mesh-mtls-off-r1',
      'smoke-e4-mesh-l4-r1',
    ]);
    expect(mesh).toHaveLength(19);
  });

  test('a smoke run is left out only when an earlier one had its path, load and mTLS rule', () => {
    const full = networkStudyPlan(networkSmokeConfig(config), 'mesh').runs;
    const smoke = new Set(networkSmokePlan(config, 'mesh').runs.map((r) => r.id.replace(/^smoke-/, '')));
    const left = full.filter(
      (r) => !smoke.has(r.id) && !r.id.startsWith('e3-saturation-') && r.id !== 'e10-limit-default',
    );
    expect(left.map((r) => r.id)).toEqual([
      'e3-fixed-plain-r1',
      'e3-fixed-mesh-mtls-r1',
      'e4-plain-r1',
      'e4-mesh-l7-r1',
      'e9-new-connection-100',
    ]);
    for (const run of left) {
      const kept = full.find((r) => smoke.has(r.id) && samePath(r) === samePath(run));
      expect(kept?.id, run.id).toBeDefined();
      if (run.spec.kind !== 'fortio' || kept?.spec.kind !== 'fortio') throw new Error('fortio runs');
      const { arm: _a, ...load } = run.spec;
      const { arm: _b, ...keptLoad } = kept.spec;
      expect(keptLoad, run.id).toEqual(load);
    }
    // Calibration reaches the pod IP, not the Service: never the same path as E1's plain run.
    expect(samePath(full.find((r) => r.id === 'c-r1') as NetworkRun)).toBeUndefined();
    // At the full study's load E4's plain run (20 s) is not E1's (25 s).
    const at = (id: string) =>
      samePath(networkStudyPlan(config, 'mesh').runs.find((r) => r.id === id) as NetworkRun);
    expect(at('e4-plain-r1')).not.toBe(at('e1-plain-r1'));
  });

  test('lab plan times it per cell beside the full study; E10 waits out TIME_WAIT only after many new connections', () => {
    const plan = planNetworkStudy(config);
    for (const cell of plan.cells) {
      expect(cell.smoke.runs).toBe(networkSmokePlan(config, cell.cell).runs.length);
      expect(cell.smoke.overTarget).toBe(cell.smoke.durationSeconds > NETWORK_SMOKE_TARGET_MINUTES * 60);
      expect(cell.smoke.costUsd).toBeCloseTo((cell.smoke.durationSeconds / 3600) * cell.pricePerHourUsd, 6);
    }
    // Every default cell within the 5-minute target: the mesh cell by its schedule's overlap.
    expect(plan.cells.filter((c) => c.smoke.overTarget).map((c) => c.cell)).toEqual([]);
    expect(plan.cells.map((c) => [c.cell, c.smoke.maxConcurrent])).toEqual([
      ['mesh', 3],
      ['dp-iptables', 1],
      ['dp-cilium', 1],
    ]);
    // With the full study after its checks, the mesh pods' restart (where it can happen) is
    // counted once, in the checks.
    for (const cell of plan.cells) {
      expect(cell.smoke.withFullStudy.durationSeconds).toBe(
        cell.smoke.durationSeconds + cell.durationSeconds - cell.meshRestart.seconds,
      );
    }
    expect(plan.cells.find((c) => c.cell === 'mesh')?.mesh).toBe('sidecar');
    expect(plan.smoke.durationSeconds).toBe(Math.max(...plan.cells.map((c) => c.smoke.durationSeconds)));
    // The smoke study's 100 new connections settle at once; the full study's 12,500 do not.
    const smokeRuns = networkSmokePlan(config, 'dp-iptables').runs;
    const e10 = smokeRuns.findIndex((r) => r.experiment === 'E10');
    expect(runSeconds(smokeRuns[e10], smokeRuns.slice(0, e10)).overhead).toBeLessThan(60);
    const fullRuns = networkStudyPlan(config, 'dp-iptables').runs;
    const first = fullRuns.findIndex((r) => r.experiment === 'E10');
    expect(runSeconds(fullRuns[first], fullRuns.slice(0, first)).overhead).toBeGreaterThanOrEqual(120);
  });
});

describe('which proof an invalid reason belongs to', () => {
  test.each([
    ['not started: namespace mesh lacks the label istio-injection=enabled', 'preconditions'],
    ["the run's Job failed (status.failed > 0)", 'job'],
    ['the run left no fortio result file', 'result'],
    [
      'pod mesh/x of the mesh-mtls arm has no istio-proxy native sidecar (was it created before the namespace label?)',
      'sidecar',
    ],
    ['mTLS unproven: istio_requests_total{connection_security_policy="mutual_tls"} grew by 0', 'mtls'],
    ['mTLS evidence missing: no server pod found', 'mtls'],
    ['fortio RetCodes other than 200: 3 x 503 of 100 calls', 'load'],
    ["E9 method: 2 of 5 samples connected on the prober's first attempt", 'services'],
    ['nf_conntrack_max is 1024 after the step, not restored to 262144', 'conntrack'],
    [
      'no KUBE-SVC chains in iptables-save on an iptables cell: kube-proxy is not in iptables mode',
      'datapath',
    ],
    ['no version recorded for k3s', 'host'],
  ])('%s -> %s', (reason, proof) => {
    expect(networkProofOfReason(reason)).toBe(proof);
  });
});
