import { describe, expect, test } from 'vitest';
import { loadLabConfig } from '../../../lib/config/load.ts';
import { cellExperiments, networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { planNetworkStudy } from '../../../lib/network/study/planner.ts';
import { NETWORK_SMOKE_TARGET_MINUTES, networkSmokePlan } from '../../../lib/network/study/smoke.ts';
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
      // E9 at 0 and 100 Services; E10 at the lowest limit only (it reads and restores the default).
      expect(plan.runs.filter((r) => r.experiment === 'E9').map((r) => r.id)).toEqual([
        'smoke-e9-services-0',
        'smoke-e9-new-connection-0',
        'smoke-e9-services-100',
        'smoke-e9-new-connection-100',
      ]);
      expect(plan.runs.filter((r) => r.experiment === 'E10').map((r) => r.id)).toEqual([
        'smoke-e10-limit-1024',
      ]);
    }
    const mesh = networkSmokePlan(config, 'mesh').runs.map((r) => r.id);
    expect(mesh.filter((id) => id.startsWith('smoke-e3-'))).toEqual([
      'smoke-e3-fixed-plain-r1',
      'smoke-e3-fixed-mesh-mtls-off-r1',
      'smoke-e3-fixed-mesh-mtls-r1',
    ]);
    expect(mesh).toHaveLength(24);
  });

  test('lab plan times it per cell beside the full study; E10 waits out TIME_WAIT only after many new connections', () => {
    const plan = planNetworkStudy(config);
    for (const cell of plan.cells) {
      expect(cell.smoke.runs).toBe(networkSmokePlan(config, cell.cell).runs.length);
      expect(cell.smoke.overTarget).toBe(cell.smoke.durationSeconds > NETWORK_SMOKE_TARGET_MINUTES * 60);
      expect(cell.smoke.costUsd).toBeCloseTo((cell.smoke.durationSeconds / 3600) * cell.pricePerHourUsd, 6);
    }
    expect(plan.cells.filter((c) => c.smoke.overTarget).map((c) => c.cell)).toEqual(['mesh']);
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
