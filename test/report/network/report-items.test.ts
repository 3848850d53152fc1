import { parse as parseSpec } from 'vega';
import { compile } from 'vega-lite';
import { describe, expect, it } from 'vitest';
import type { NetworkRunRecord, NetworkStudyRecord } from '../../../lib/network/study/model.ts';
import { ENTRY_MODELS } from '../../../lib/network/study/planner.ts';
import { htmlSection, NOTE_COLOUR, WARNING_COLOUR } from '../../../lib/report/html.ts';
import { markdownSection } from '../../../lib/report/markdown.ts';
import { networkCharts, programmingLatencyChart, segmentSteps } from '../../../lib/report/network/charts.ts';
import { networkReportSections } from '../../../lib/report/network/format.ts';
import { intervalOf, networkReportTables } from '../../../lib/report/network/tables.ts';
import { E9_POD_START, fixtureCellStudy, fixtureNetworkStudies, POD_START_MS } from './fixture.ts';

const tables = networkReportTables(fixtureNetworkStudies());
const sections = networkReportSections(tables);
const section = (id: string) => {
  const found = sections.find((s) => s.id === id);
  if (!found) throw new Error(`no section ${id}`);
  return found;
};

/** Sets the fixed-rate fortio means of one arm's repeats (ms), keeping everything else of the runs. */
function withMeans(study: NetworkStudyRecord, prefix: string, means: readonly number[]): NetworkStudyRecord {
  const runs = study.runs.map((r): NetworkRunRecord => {
    const m = r.id.match(/^(.*)-r(\d+)$/);
    if (!m || m[1] !== prefix || r.result?.kind !== 'fortio' || !r.valid) return r;
    const json = JSON.parse(r.result.raw);
    json.DurationHistogram.Avg = means[Number(m[2]) - 1] / 1000;
    return { ...r, result: { kind: 'fortio', raw: JSON.stringify(json) } };
  });
  return { ...study, runs };
}

describe('attribution uncertainty from the repeats', () => {
  it("interval arithmetic over each arm's lowest and highest repeat", () => {
    const repeats = {
      plain: [1, 1.2],
      'mesh-mtls-off': [2, 2.1],
      'mesh-mtls': [2.05, 2.3],
      'mesh-l4': [1],
      'mesh-l7': [1],
    };
    expect(intervalOf({ 'mesh-mtls': 1, 'mesh-mtls-off': -1 }, repeats)).toEqual({
      lowMs: 2.05 - 2.1,
      highMs: 2.3 - 2,
      distinguishable: 'no',
    });
    expect(intervalOf({ 'mesh-mtls-off': 1, plain: -1 }, repeats)).toMatchObject({ distinguishable: 'yes' });
    expect(intervalOf({ 'mesh-l7': 1, 'mesh-l4': -1 }, repeats).distinguishable).toBe('unknown');
  });

  it('the fixture: every part distinguishable, each with its interval', () => {
    const [a] = tables.attribution;
    if (!a.available) throw new Error(a.reason);
    const byPart = Object.fromEntries(a.parts.map((p) => [p.component, p.interval]));
    // Encryption = E3 mesh-mtls [0.826, 0.834] - E3 mesh-mtls-off [0.686, 0.694].
    expect(byPart.encryption.lowMs).toBeCloseTo(0.826 - 0.694, 9);
    expect(byPart.encryption.highMs).toBeCloseTo(0.834 - 0.686, 9);
    expect(a.parts.every((p) => p.interval.distinguishable === 'yes')).toBe(true);
    expect(section('attribution').warnings).toEqual([]);
  });

  it("an encryption cost smaller than its repeats' spread is marked not distinguishable, in the table, a warning and the headline", () => {
    // mTLS on within the mTLS-off arm's repeats: 0.70 +- 0.03 against 0.69 +- 0.004.
    const study = withMeans(fixtureCellStudy('mesh'), 'e3-fixed-mesh-mtls', [0.67, 0.72, 0.7, 0.73, 0.68]);
    const t = networkReportTables([study]);
    const [a] = t.attribution;
    if (!a.available) throw new Error(a.reason);
    const encryption = a.parts.find((p) => p.component === 'encryption');
    expect(encryption?.ms).toBeCloseTo(0.7 - 0.69, 9);
    expect(encryption?.interval.distinguishable).toBe('no');
    const s = networkReportSections(t);
    const attribution = s.find((x) => x.id === 'attribution');
    expect(attribution?.table?.rows.find((r) => r[1] === 'Encryption (mTLS)')?.[4]).toBe(
      '-0.024 to 0.044 ms (holds 0: indistinguishable)',
    );
    expect(attribution?.warnings).toEqual([
      'Cell mesh: Encryption (mTLS) (0.010 ms) is not distinguishable from zero: its interval over the repeats, -0.024 to 0.044 ms, holds 0.',
    ]);
    expect(s[0].items?.[1]).toMatch(/not distinguishable from zero over the repeats: encryption \(mtls\)\.$/);
  });
});

describe('Services at scale: entries per Service and the ratio to 0 Services', () => {
  it("measured against the cell's own 0-Service step, beside the prediction from the pinned sources", () => {
    const iptables = tables.scale.filter((r) => r.cell === 'dp-iptables');
    expect(iptables.map((r) => r.entriesPerService)).toEqual([undefined, 7, 7, 7, 7]);
    expect(iptables[1].predictedPerService).toEqual({
      entries: ENTRY_MODELS.iptables.perService(1),
      formula: ENTRY_MODELS.iptables.formula,
      basis: ENTRY_MODELS.iptables.basis,
      backendsPerService: 1,
    });
    const cilium = tables.scale.filter((r) => r.cell === 'dp-cilium');
    expect(cilium.map((r) => r.entriesPerService)).toEqual([undefined, 2, 2, 2]);
    expect(iptables[4].programmingVsZero).toBeCloseTo(2217.005 / 1017.005, 9);
    const rows = section('services-entries').table?.rows ?? [];
    expect(rows.find((r) => r[0] === 'dp-iptables (iptables)' && r[1] === '100')).toEqual([
      'dp-iptables (iptables)',
      '100',
      '762',
      '7',
      `${ENTRY_MODELS.iptables.perService(1)} (estimate)`,
      'baseline',
      'n/a',
    ]);
    expect(section('services-entries').notes.join(' ')).toMatch(
      /iptables: .* an estimate \(the shape read in the source/,
    );
  });

  it('without a valid 0-Service step there is no per-Service figure nor ratio, and the table says why', () => {
    const study = fixtureCellStudy('dp-iptables');
    const t = networkReportTables([
      {
        ...study,
        runs: study.runs.map((r) =>
          r.id === 'e9-services-0' ? { ...r, valid: false, invalidReasons: ['x'] } : r,
        ),
      },
    ]);
    expect(t.scale.every((r) => r.entriesPerService === undefined && r.programmingVsZero === undefined)).toBe(
      true,
    );
    const s = networkReportSections(t);
    expect(s.find((x) => x.id === 'services-entries')?.table?.rows[0][3]).toBe('no valid 0-Service step');
  });

  it('attempts per sample and the first-attempt delay come from the samples; a record without them says "not recorded"', () => {
    const row = section('services-at-scale').table?.rows.find(
      (r) => r[0] === 'dp-cilium (cilium)' && r[1] === '0',
    );
    expect(row?.[7]).toBe('2');
    expect(row?.[8]).toBe('10.0 ms');
    const study = fixtureCellStudy('dp-cilium');
    const old = {
      ...study,
      runs: study.runs.map((r) =>
        r.result?.kind === 'service-scale' && r.result.scale.prober
          ? {
              ...r,
              result: {
                ...r.result,
                scale: {
                  ...r.result.scale,
                  prober: {
                    ...r.result.scale.prober,
                    samples: r.result.scale.prober.samples.map(({ attemptsAfterStart: _, ...s }) => s),
                  },
                },
              },
            }
          : r,
      ),
    };
    const rows = networkReportSections(networkReportTables([old])).find((s) => s.id === 'services-at-scale')
      ?.table?.rows;
    expect(rows?.[0].slice(7, 9)).toEqual(['not recorded', 'not recorded']);
  });
});

describe("the E9 fixture is the runner's current sample shape", () => {
  it('valid steps: attempts since acceptance on every sample, the method verdict "datapath"; the pod-start step is invalid by the method check', () => {
    for (const study of fixtureNetworkStudies()) {
      for (const run of study.runs) {
        if (run.result?.kind !== 'service-scale') continue;
        const prober = run.result.scale.prober;
        expect(prober?.samples).toHaveLength(20);
        expect(
          prober?.samples.every(
            (s) =>
              s.attemptsAfterStart !== undefined &&
              s.attempts > 1 === !E9_POD_START[`${study.cell}/${run.id}`],
          ),
        ).toBe(true);
        if (E9_POD_START[`${study.cell}/${run.id}`]) {
          expect(run.valid).toBe(false);
          expect(prober?.method?.verdict).toBe('method');
          expect(prober?.latency?.minMs).toBeGreaterThan(POD_START_MS);
          expect(run.invalidReasons[0]).toMatch(
            /^E9 method: 20 of 20 samples connected on the prober's first attempt/,
          );
        } else {
          expect(run.valid, `${study.cell}/${run.id}: ${run.invalidReasons.join('; ')}`).toBe(true);
          expect(prober?.method?.verdict).toBe('datapath');
        }
      }
    }
  });
});

describe('min-max ranges, conntrack failures by cause', () => {
  it('gRPC and the download show the range of their repeats', () => {
    const grpc = section('grpc').table;
    expect(grpc?.headers).toContain('Mean, min to max');
    expect(grpc?.rows.find((r) => r[1] === 'mesh-mtls')?.[4]).toBe('0.900 to 0.910 ms');
    const download = tables.downloads.find((r) => r.arm === 'mesh-mtls');
    expect([download?.minSeconds, download?.maxSeconds]).toEqual([0.405, 0.418]);
    expect(
      section('download')
        .table?.rows.find((r) => r[1] === 'mesh-mtls')
        ?.slice(5, 8),
    ).toEqual(['0.405 to 0.418 s', '243 MiB/s', '239.2 to 246.9 MiB/s']);
  });

  it("conntrack failures by the driver's cause, and the restore judged against the host default", () => {
    const mesh1024 = tables.conntrack.find((r) => r.cell === 'mesh' && r.requestedLimit === 1024);
    expect(mesh1024?.failures).toEqual({ timeout: 3_201, reset: 2 });
    const row = section('conntrack').table?.rows.find((r) => r[0] === 'mesh (iptables)' && r[1] === '1,024');
    expect(row?.[7]).toBe('3,201 timeout, 2 reset');
    const study = fixtureCellStudy('dp-cilium');
    const lowered = networkReportTables([
      {
        ...study,
        runs: study.runs.map((r) =>
          r.result?.kind === 'conntrack' && r.id === 'e10-limit-2048'
            ? {
                ...r,
                result: {
                  ...r.result,
                  conntrack: { ...r.result.conntrack, limitBefore: 2_048, limitAfterRestore: 2_048 },
                },
              }
            : r,
        ),
      },
    ]);
    const restored = networkReportSections(lowered)
      .find((s) => s.id === 'conntrack')
      ?.table?.rows[1].at(-1);
    expect(restored).toBe('NO: 2,048, not 262,144');
  });
});

/** WCAG 2.x relative luminance and contrast ratio of a #rrggbb colour on white. */
function contrastOnWhite(hex: string): number {
  const channel = (i: number) => {
    const c = Number.parseInt(hex.slice(1 + 2 * i, 3 + 2 * i), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  const l = 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2);
  return 1.05 / (l + 0.05);
}

describe('notes and warnings', () => {
  it('have distinct colours, each at least 4.5:1 on white, and warnings do not depend on colour', () => {
    expect(NOTE_COLOUR).not.toBe(WARNING_COLOUR);
    expect(contrastOnWhite(NOTE_COLOUR)).toBeGreaterThanOrEqual(4.5);
    expect(contrastOnWhite(WARNING_COLOUR)).toBeGreaterThanOrEqual(4.5);
    const s = { id: 'x', title: 'X', intro: 'i', notes: ['how it is computed'], warnings: ['left out'] };
    expect(htmlSection(s)).toContain(
      '<p class="note">how it is computed</p>\n<p class="warning"><strong>Warning:</strong> left out</p>',
    );
    expect(markdownSection(s)).toBe('## X\n\ni\n\nhow it is computed\n\n**Warning:** left out');
  });

  it('the network report puts invalid runs left out and findings among the warnings, explanations among the notes', () => {
    expect(section('grpc').warnings).toEqual([
      'Left out as invalid (see Invalid runs): mesh/e5-mesh-mtls-r2.',
    ]);
    expect(section('grpc').notes).toEqual([]);
    expect(section('mtls-matrix').warnings?.[0]).toMatch(/^Findings: mesh\/strict-port-permissive/);
    expect(section('attribution').notes[0]).toMatch(/^Cell mesh, from the fixed-rate means/);
  });
});

describe('the headline', () => {
  it('answers in five lines, first in the report', () => {
    expect(sections[0].id).toBe('headline');
    expect(sections[0].items).toHaveLength(5);
    expect(sections[0].items?.[0]).toBe(
      'Sidecar cost (E1, cell mesh, fixed rate): mesh-mtls 0.823 ms mean against plain 0.211 ms (x3.90); at saturation 7,600 calls/s against 38,000 (x0.20).',
    );
    expect(sections[0].items?.[3]).toContain(
      'dp-cilium (cilium) 27.8 ms at 0 -> 28.4 ms at 10,000 (x1.02), x0.013 of dp-iptables',
    );
    expect(sections[0].items?.[4]).toContain(
      'mesh 797 of 4,000 at 1,024 (expected 795; failed: 3,201 timeout, 2 reset)',
    );
  });

  it('a question without a valid run says so', () => {
    const empty = networkReportSections(
      networkReportTables([{ ...fixtureCellStudy('dp-cilium'), runs: [] }]),
    );
    expect(empty[0].items).toEqual([
      'Sidecar cost (E1): no valid fixed-rate runs of both plain and mesh-mtls.',
      'Where the added latency goes: not available (no mesh cell ran E3 and E4).',
      'mTLS matrix (E2, E8): no valid run.',
      'New-Service latency (E9): no valid Service scale step.',
      'Conntrack table full (E10): no valid step.',
    ]);
  });
});

describe('no chart line across an invalid step', () => {
  it('segments break at a step without a value', () => {
    const { points, gaps } = segmentSteps([
      { series: 'a', services: 0, value: 1 },
      { series: 'a', services: 1000, value: 2 },
      { series: 'a', services: 5000, value: undefined },
      { series: 'a', services: 10000, value: 3 },
      { series: 'b', services: 0, value: 1 },
    ]);
    expect(points.map((p) => [p.services, p.segment])).toEqual([
      [0, 'a #0'],
      [1000, 'a #0'],
      [10000, 'a #1'],
      [0, 'b #0'],
    ]);
    expect(gaps).toBe(1);
  });

  it("the fixture's programming chart draws Cilium in two pieces around its invalid 5,000-Service step", () => {
    const chart = programmingLatencyChart(tables);
    const spec = chart.spec as unknown as {
      data: { values: { series: string; segment: string; services: number }[] };
      layer: { encoding: { detail?: { field: string } } }[];
    };
    expect(spec.layer[0].encoding.detail).toEqual({ field: 'segment' });
    const cilium = spec.data.values.filter((v) => v.series === 'dp-cilium (cilium)');
    expect(cilium.map((v) => [v.services, v.segment])).toEqual([
      [0, 'dp-cilium (cilium) #0'],
      [100, 'dp-cilium (cilium) #0'],
      [1000, 'dp-cilium (cilium) #0'],
      [10000, 'dp-cilium (cilium) #1'],
    ]);
    for (const c of networkCharts(tables)) {
      const chartSpec = c.spec;
      if (chartSpec) expect(() => parseSpec(compile(chartSpec).spec)).not.toThrow();
    }
  });
});
