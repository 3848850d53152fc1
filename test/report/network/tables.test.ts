import { describe, expect, it } from 'vitest';
import type { NetworkRunRecord, NetworkStudyRecord } from '../../../lib/network/study/model.ts';
import {
  attributionOf,
  fortioFigures,
  type LatencyRow,
  networkReportTables,
  summarizeRepeats,
} from '../../../lib/report/network/tables.ts';
import { fixtureCellStudy, fixtureNetworkStudies } from './fixture.ts';

const tables = networkReportTables(fixtureNetworkStudies());

const latency = (group: LatencyRow['group'], arm: string) =>
  tables.latency.find((r) => r.cell === 'mesh' && r.group === group && r.arm === arm);

/** Replaces one run record of a cell's study (every attempt of that id). */
function withRun(
  study: NetworkStudyRecord,
  id: string,
  change: (r: NetworkRunRecord) => NetworkRunRecord,
): NetworkStudyRecord {
  return { ...study, runs: study.runs.map((r) => (r.id === id ? change(r) : r)) };
}

describe('network report tables from the three default cells', () => {
  it('sidecar cost: means over the valid repeats only, the invalid 1 ms-resolution repeat left out', () => {
    const plain = latency('E1', 'plain');
    // Repeats 1, 2, 3, 5: the invalid repeat 4 (0.391 ms) would lift the mean to 0.2472 ms.
    expect(plain?.fixed?.repeats).toBe(4);
    expect(plain?.fixed?.repeatMeansMs.map((ms) => Number(ms.toFixed(6)))).toEqual([
      0.212, 0.208, 0.215, 0.21,
    ]);
    expect(plain?.fixed?.meanMs).toBeCloseTo(0.21125, 9);
    expect(plain?.fixed?.p50Ms).toBeCloseTo(0.21125 * 0.88, 6);
    expect(plain?.saturation?.actualQps).toBe(38_000);
    const mtls = latency('E1', 'mesh-mtls');
    expect(mtls?.fixed?.meanMs).toBeCloseTo(0.8234, 9);
    // Repeat 3 (0.852) is 3.47% above the mean: over the +-3% of docs/facts.md §N5.
    expect(mtls?.fixed?.spreadPercent).toBeCloseTo(((0.852 - 0.8234) / 0.8234) * 100, 9);
    expect(mtls?.meanVsPlain).toBeCloseTo(0.8234 / 0.21125, 9);
    expect(mtls?.saturationVsPlain).toBeCloseTo(7_600 / 38_000, 9);
  });

  it('E3 and E4 rows in arm order, fixed and saturation runs apart; the resumed run counts its valid attempt once', () => {
    expect(tables.latency.map((r) => `${r.group} ${r.arm}`)).toEqual([
      'E1 plain',
      'E1 mesh-mtls',
      'E3 plain',
      'E3 mesh-mtls-off',
      'E3 mesh-mtls',
      'E4 plain',
      'E4 mesh-l4',
      'E4 mesh-l7',
    ]);
    const mtls = latency('E3', 'mesh-mtls');
    expect(mtls?.fixed?.repeats).toBe(5);
    expect(mtls?.fixed?.meanMs).toBeCloseTo(0.83, 9);
    expect(mtls?.saturation?.repeats).toBe(3);
    expect(mtls?.saturation?.actualQps).toBeCloseTo(7_500, 9);
    // Little's law: 16 connections at 7,500, 7,520 and 7,480 calls/s -> about 2.133 ms mean at saturation.
    const littles = ((16 / 7_500 + 16 / 7_520 + 16 / 7_480) / 3) * 1000;
    expect(mtls?.saturation?.meanMs).toBeCloseTo(littles, 5);
    expect(latency('E4', 'mesh-l7')?.saturation).toBeUndefined();
  });

  it('attributes the added 0.620 ms: hops 0.270, HTTP parsing 0.210, encryption 0.140', () => {
    expect(tables.attribution).toHaveLength(1);
    const [a] = tables.attribution;
    if (!a.available) throw new Error(a.reason);
    expect(a.totalMs).toBeCloseTo(0.62, 9);
    const parts = Object.fromEntries(a.parts.map((p) => [p.component, p]));
    expect(parts['http-parsing'].ms).toBeCloseTo(0.66 - 0.45, 9);
    expect(parts.encryption.ms).toBeCloseTo(0.83 - 0.69, 9);
    expect(parts['proxy-hops'].ms).toBeCloseTo(0.69 - 0.21 - (0.66 - 0.45), 9);
    expect(parts['proxy-hops'].share).toBeCloseTo(0.27 / 0.62, 9);
    // The three parts add up to the total: the parsing is not counted twice.
    expect(a.parts.reduce((sum, p) => sum + p.ms, 0)).toBeCloseTo(a.totalMs, 9);
    expect(a.parts.reduce((sum, p) => sum + p.share, 0)).toBeCloseTo(1, 9);
  });

  it('attribution names the arms it misses instead of computing from fewer', () => {
    const study = fixtureCellStudy('mesh');
    const noL4: NetworkStudyRecord = {
      ...study,
      runs: study.runs.map((r) =>
        r.id.startsWith('e4-mesh-l4-')
          ? { ...r, valid: false, invalidReasons: ['no sidecar on the client'] }
          : r,
      ),
    };
    const t = networkReportTables([noL4]);
    expect(t.attribution).toEqual([
      { cell: 'mesh', available: false, reason: 'no valid fixed-rate run of E4 mesh-l4' },
    ]);
    expect(attributionOf('dp-iptables', tables.latency)).toEqual({
      cell: 'dp-iptables',
      available: false,
      reason: 'no valid fixed-rate run of E3 plain, E3 mesh-mtls-off, E3 mesh-mtls, E4 mesh-l4, E4 mesh-l7',
    });
  });

  it('protocols: gRPC without the failed repeat, download time and speed, SSE gaps', () => {
    expect(tables.grpc.map((r) => [r.arm, r.summary.repeats])).toEqual([
      ['plain', 3],
      ['mesh-mtls', 2],
    ]);
    expect(tables.grpc[1].summary.meanMs).toBeCloseTo((0.91 + 0.9) / 2, 9);
    expect(tables.grpc[1].meanVsPlain).toBeCloseTo(0.905 / 0.26, 9);
    const [plain, mesh] = tables.downloads;
    expect(plain.bytes).toBe(100 * 1024 * 1024);
    expect(plain.meanSeconds).toBeCloseTo((0.118 + 0.121 + 0.115) / 3, 9);
    expect(mesh.timeVsPlain).toBeCloseTo((0.412 + 0.405 + 0.418) / 3 / plain.meanSeconds, 9);
    expect(tables.sse.map((r) => [r.arm, r.gapMedianMs, r.gapMaxMs, r.eventsReceived])).toEqual([
      ['plain', 20, 24.1, 600],
      ['mesh-mtls', 20, 31.7, 600],
    ]);
    expect(tables.sse[1].gapP99Ms).toBeCloseTo((22.8 + 23 + 22.6) / 3, 9);
  });

  it('the mTLS matrix keeps expected beside observed and marks the one deviation', () => {
    expect(tables.mtls).toHaveLength(9);
    expect(tables.mtls.filter((r) => r.deviation).map((r) => [r.experiment, r.caseId, r.observed])).toEqual([
      ['E8', 'strict-port-permissive', { httpCode: '000', curlExit: 56 }],
    ]);
    const strict = tables.mtls.find((r) => r.caseId === 'strict-out-of-mesh');
    expect(strict?.expected).toEqual({ httpCode: '000', curlExit: 56 });
    expect(strict?.deviation).toBe(false);
    expect(tables.mtls.find((r) => r.caseId === 'authz-denied')?.observed).toEqual({
      httpCode: '403',
      curlExit: 0,
    });
  });

  it('Services at scale: entries, programming latency and the paired new-connection run; the pod-start step left out', () => {
    const cilium = tables.scale.filter((r) => r.cell === 'dp-cilium');
    expect(cilium.map((r) => r.services)).toEqual([0, 100, 1000, 10000]);
    const iptables = tables.scale.filter((r) => r.cell === 'dp-iptables');
    // kube-proxy: REJECT at the first sync, forwarded one minSyncPeriod (1 s) later, each sync longer with more Services.
    expect(iptables.map((r) => [r.services, r.entries, r.programmingMedianMs, r.programmingP90Ms])).toEqual([
      [0, 62, 1017.005, 1020.705],
      [100, 762, 1029.105, 1032.865],
      [1000, 7062, 1137.005, 1140.705],
      [5000, 35062, 1617.005, 1620.705],
      [10000, 70062, 2217.005, 2220.705],
    ]);
    // Cilium: within one or two 20 ms attempts at any count.
    expect(cilium.every((r) => (r.programmingMedianMs ?? 0) < 40)).toBe(true);
    expect(iptables[4].newConnection?.meanMs).toBeCloseTo(0.91, 9);
    expect(cilium[3].newConnection?.meanMs).toBeCloseTo(0.27, 9);
    expect(cilium[3].entriesCommand).toBe('cilium-dbg bpf lb list');
    expect(cilium[3].lbMapFull).toBe(false);
  });

  it('conntrack: expected successes are min(connections, limit - baseline); the high-baseline step left out', () => {
    const rows = tables.conntrack.map((r) => [
      r.cell,
      r.requestedLimit,
      r.baseline,
      r.expectedSuccesses,
      r.succeeded,
    ]);
    expect(rows).toEqual([
      ['mesh', 'default', 241, 4000, 4000],
      ['mesh', 2048, 236, 1812, 1815],
      ['mesh', 1024, 229, 795, 797],
      ['dp-iptables', 'default', 183, 4000, 4000],
      ['dp-iptables', 2048, 211, 1837, 1841],
      ['dp-cilium', 'default', 176, 4000, 4000],
      ['dp-cilium', 2048, 198, 1850, 1853],
      ['dp-cilium', 1024, 204, 820, 822],
    ]);
    expect(tables.conntrack[1]).toMatchObject({
      connectP99Ms: 0.54,
      connectMaxMs: 1003.8,
      limitAfterRestore: 262_144,
    });
  });

  it('calibration per cell against the baseline cell dp-iptables, not the first cell, with its host', () => {
    expect(tables.calibration.map((r) => [r.cell, r.summary?.repeats])).toEqual([
      ['mesh', 3],
      ['dp-iptables', 3],
      ['dp-cilium', 3],
    ]);
    expect(tables.calibration[1].vsBaseline).toBe(1);
    expect(tables.calibration[0].vsBaseline).toBeCloseTo(0.212 / 0.208, 9);
    expect(tables.calibration[2].vsBaseline).toBeCloseTo(0.219 / 0.208, 9);
    expect(tables.calibration[2].diffVsBaselineMs).toBeCloseTo(0.219 - 0.208, 9);
    expect(tables.calibration[2].host.instanceType).toBe('c7i.2xlarge');
  });

  it('lists every invalid run and attempt with its reasons, and the flagged valid run', () => {
    expect(tables.invalid.map((r) => [r.cell, r.runId, r.attempt])).toEqual([
      ['mesh', 'e1-plain-r4', undefined],
      ['mesh', 'e3-fixed-mesh-mtls-r1', 1],
      ['mesh', 'e5-mesh-mtls-r2', undefined],
      ['dp-iptables', 'e10-limit-1024', undefined],
      ['dp-cilium', 'e9-services-5000', undefined],
    ]);
    expect(tables.invalid[0].reasons).toHaveLength(2);
    expect(tables.flagged).toEqual([
      {
        cell: 'mesh',
        runId: 'e1-mesh-mtls-r3',
        flags: ['repeat spread: 0.852 ms is 3.5% above the mean of E1 mesh-mtls (0.823 ms), beyond +-3%'],
      },
    ]);
    expect(tables.cells.map((c) => [c.cell, c.validRuns, c.runs])).toEqual([
      ['mesh', 89, 91],
      ['dp-iptables', 15, 16],
      ['dp-cilium', 15, 16],
    ]);
  });

  it('a valid-marked run whose fortio file does not parse is listed as invalid, not compared', () => {
    const study = withRun(fixtureCellStudy('mesh'), 'e1-plain-r1', (r) => ({
      ...r,
      result: { kind: 'fortio', raw: '{"RunType":"HTTP"}' },
    }));
    const t = networkReportTables([study]);
    const row = t.invalid.find((r) => r.runId === 'e1-plain-r1');
    expect(row?.reasons[0]).toMatch(/^the report cannot read its fortio result: fortio result: /);
    expect(t.latency.find((r) => r.group === 'E1' && r.arm === 'plain')?.fixed?.repeats).toBe(3);
  });

  it('an invalid run never enters a table, even with better numbers', () => {
    const study = withRun(fixtureCellStudy('dp-cilium'), 'e9-services-10000', (r) => ({
      ...r,
      valid: false,
      invalidReasons: ['only 9,412 of 10,000 Services had a ready endpoint'],
    }));
    const t = networkReportTables([study]);
    expect(t.scale.map((r) => r.services)).toEqual([0, 100, 1000]);
    expect(t.invalid.map((r) => r.runId)).toEqual(['e9-services-5000', 'e9-services-10000']);
  });
});

describe('Services at scale: the new-connection latency', () => {
  it("falls back to the fortio JSON the step's result carries when no separate run is valid", () => {
    const study = fixtureCellStudy('dp-iptables');
    const separate = study.runs.find((r) => r.id === 'e9-new-connection-100');
    if (separate?.result?.kind !== 'fortio')
      throw new Error('fixture: e9-new-connection-100 is a fortio run');
    const raw = separate.result.raw;
    const changed: NetworkStudyRecord = {
      ...study,
      runs: study.runs.flatMap((r) => {
        if (r.id === 'e9-new-connection-100') return [];
        if (r.id === 'e9-services-100' && r.result?.kind === 'service-scale') {
          return [{ ...r, result: { ...r.result, scale: { ...r.result.scale, newConnection: raw } } }];
        }
        return [r];
      }),
    };
    const rows = networkReportTables([changed]).scale;
    expect(rows.find((r) => r.services === 100)?.newConnection?.meanMs).toBeCloseTo(0.316, 9);
    expect(rows.find((r) => r.services === 1000)?.newConnection?.meanMs).toBeCloseTo(0.37, 9);
  });
});

describe('summarizeRepeats', () => {
  it('spread is the largest distance from the mean, in percent of it', () => {
    const s = summarizeRepeats([
      { meanMs: 1, actualQps: 500 },
      { meanMs: 1.1, actualQps: 500 },
      { meanMs: 0.9, actualQps: 500 },
    ]);
    expect(s?.spreadPercent).toBeCloseTo(10, 9);
    expect(s?.p50Ms).toBeUndefined();
    expect(summarizeRepeats([])).toBeUndefined();
  });
});

describe('fortioFigures', () => {
  it('reads the mean and percentiles in ms from fortio seconds', () => {
    const study = fixtureCellStudy('dp-iptables');
    const run = study.runs.find((r) => r.id === 'c-r1');
    if (run?.result?.kind !== 'fortio') throw new Error('fixture: c-r1 is a fortio run');
    const figures = fortioFigures(run.result.raw);
    expect(figures.meanMs).toBeCloseTo(0.208, 9);
    expect(figures.p99Ms).toBeCloseTo(0.208 * 2.45, 6);
    expect(figures.actualQps).toBe(499.98);
  });
});
