import { describe, expect, it } from 'vitest';
import type { NetworkStudyRecord } from '../../../lib/network/study/model.ts';
import { networkReportSections } from '../../../lib/report/network/format.ts';
import { networkMarkdownReport } from '../../../lib/report/network/render.ts';
import { BaselineError, chooseBaseline, networkReportTables } from '../../../lib/report/network/tables.ts';
import { fixtureCellStudy, fixtureNetworkStudies } from './fixture.ts';

const studies = fixtureNetworkStudies();

describe('the network report normalises to a named baseline cell', () => {
  it("defaults to the cell with kube-proxy iptables and no mesh, whatever the cells' order", () => {
    const forward = networkReportTables(studies);
    const reversed = networkReportTables([...studies].reverse());
    expect(forward.baseline).toEqual({
      cell: 'dp-iptables',
      datapath: 'iptables',
      mesh: 'none',
      how: 'default',
    });
    expect(reversed.baseline).toEqual(forward.baseline);
    const cilium = (t: typeof forward) => t.calibration.find((r) => r.cell === 'dp-cilium')?.vsBaseline;
    // The first cell would be mesh (0.212 ms) one way and dp-cilium the other: the ratio stays dp-iptables'.
    expect(cilium(forward)).toBeCloseTo(0.219 / 0.208, 9);
    expect(cilium(reversed)).toBeCloseTo(0.219 / 0.208, 9);
  });

  it('a named baseline changes every cross-cell figure: calibration, Services at scale, conntrack', () => {
    const t = networkReportTables(studies, { baselineCell: 'dp-cilium' });
    expect(t.baseline).toMatchObject({ cell: 'dp-cilium', how: 'named' });
    expect(t.calibration.find((r) => r.cell === 'dp-iptables')?.vsBaseline).toBeCloseTo(0.208 / 0.219, 9);
    const iptables10k = t.scale.find((r) => r.cell === 'dp-iptables' && r.services === 10_000);
    const cilium10k = t.scale.find((r) => r.cell === 'dp-cilium' && r.services === 10_000);
    expect(iptables10k?.programmingVsBaseline).toBeCloseTo(
      (iptables10k?.programmingMedianMs ?? 0) / (cilium10k?.programmingMedianMs ?? 1),
      9,
    );
    expect(iptables10k?.programmingVsBaseline).toBeGreaterThan(50);
    expect(iptables10k?.entriesVsBaseline).toBeCloseTo(70_062 / 20_012, 9);
    // Cilium's 5,000-Service step is invalid: no ratio against it, and the table says why.
    expect(
      t.scale.find((r) => r.cell === 'dp-iptables' && r.services === 5_000)?.programmingVsBaseline,
    ).toBeUndefined();
    expect(t.conntrack.find((r) => r.cell === 'mesh' && r.requestedLimit === 2048)?.succeededVsBaseline).toBe(
      1_815 - 1_853,
    );
    const md = networkMarkdownReport(t, { sources: ['x'] });
    expect(md).toContain('Baseline cell: dp-cilium (cilium, mesh none; named with --baseline).');
    expect(md).toContain('| Median vs dp-cilium |');
    expect(md).toMatch(/\| dp-iptables \(iptables\) \| 5,000 \| .* \| no valid dp-cilium figure \|/);
  });

  it('the baseline row says so, and the report names the baseline in its headline', () => {
    const sections = networkReportSections(networkReportTables(studies));
    expect(sections[0].id).toBe('headline');
    expect(sections[0].intro).toMatch(/^Baseline cell: dp-iptables \(iptables, mesh none; the default: /);
    const calibration = sections.find((s) => s.id === 'calibration');
    expect(calibration?.table?.headers.at(-1)).toBe('Mean vs dp-iptables');
    expect(calibration?.table?.rows.map((r) => r.at(-1))).toEqual([
      'x1.02 (+0.004 ms)',
      'baseline',
      'x1.05 (+0.011 ms)',
    ]);
  });

  it('refuses a baseline that is not a cell of the report, naming the cells', () => {
    expect(() => networkReportTables(studies, { baselineCell: 'dp-nftables' })).toThrow(BaselineError);
    expect(() => chooseBaseline(studies, 'dp-nftables')).toThrow(
      '--baseline "dp-nftables" is not a cell of this report; choose one of: mesh, dp-iptables, dp-cilium',
    );
  });

  it('without a cell that fits the default, nothing is compared across cells and the report says how to name one', () => {
    const noIptables: NetworkStudyRecord[] = [fixtureCellStudy('mesh'), fixtureCellStudy('dp-cilium')];
    const t = networkReportTables(noIptables);
    expect(t.baseline.cell).toBeUndefined();
    expect(t.calibration.every((r) => r.vsBaseline === undefined)).toBe(true);
    const calibration = networkReportSections(t).find((s) => s.id === 'calibration');
    expect(calibration?.table?.rows.map((r) => r.at(-1))).toEqual(['no baseline', 'no baseline']);
    expect(calibration?.warnings).toContain(
      'No baseline cell: no cell runs kube-proxy iptables without a mesh, so no default baseline; name one with lab report --baseline <cell> (cells: mesh, dp-cilium).',
    );
    const twice = chooseBaseline([
      fixtureCellStudy('dp-iptables'),
      { ...fixtureCellStudy('dp-iptables'), cell: 'dp-iptables-b' },
    ]);
    expect(twice.cell).toBeUndefined();
  });
});
