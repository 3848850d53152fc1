import { parse as parseSpec } from 'vega';
import { compile } from 'vega-lite';
import { describe, expect, it } from 'vitest';
import { networkCharts } from '../../../lib/report/network/charts.ts';
import {
  anyMs,
  curlSymptom,
  fineMs,
  networkReportSections,
  spread,
} from '../../../lib/report/network/format.ts';
import { networkMarkdownReport } from '../../../lib/report/network/render.ts';
import { networkReportTables } from '../../../lib/report/network/tables.ts';
import { networkStudyBanner } from '../../../lib/report/network/write.ts';
import { fixtureCellStudy, fixtureNetworkStudies } from './fixture.ts';

const tables = networkReportTables(fixtureNetworkStudies());
const markdown = networkMarkdownReport(tables, {
  sources: ['a/mesh/study.json', 'a/dp-iptables/study.json'],
});

describe('network report Markdown', () => {
  it('has every section of docs/facts.md §N6, in reading order', () => {
    const headings = markdown.split('\n').filter((line) => line.startsWith('## '));
    expect(headings).toEqual([
      '## Headline',
      '## Cells',
      '## Sidecar cost',
      '## Where the added latency goes',
      '## Protocols: gRPC unary',
      '## Protocols: large download',
      '## Protocols: SSE streaming',
      '## mTLS matrix',
      '## Services at scale: new-Service latency',
      '## Services at scale: data-plane entries',
      '## Conntrack table full',
      '## Calibration per cell',
      '## Invalid runs',
      '## Flagged runs',
    ]);
    expect(markdown).toContain('Generated from `a/mesh/study.json`, `a/dp-iptables/study.json`, which stay');
  });

  it('prints the rows with their units', () => {
    expect(markdown).toContain(
      '| mesh | E1/E1s sidecar cost | mesh-mtls | 5 | 0.823 ms | 0.725 ms | 1.136 ms | 2.017 ms | +-3.5% (over +-3%: flagged) | 7,600 (3) | x3.90 | x0.20 |',
    );
    expect(markdown).toContain(
      '| mesh | Proxy hops (two sidecars relaying) | (E3 mesh-mtls-off - E3 plain) - (E4 mesh-l7 - E4 mesh-l4) | 0.270 ms | 0.258 to 0.282 ms | 43.5% |',
    );
    expect(markdown).toContain(
      '| mesh | Total added by the mesh | E3 mesh-mtls - E3 plain | 0.620 ms | 0.612 to 0.628 ms | 100.0% |',
    );
    expect(markdown).toContain(
      '| mesh | E8 | STRICT with portLevelMtls PERMISSIVE on 8080, out-of-mesh plaintext client | out of mesh, plain/default | answered (HTTP 200, curl exit 0) | connection dropped (HTTP 000, curl exit 56) | FINDING: differs from expected |',
    );
    expect(markdown).toContain(
      '| dp-iptables (iptables) | 10,000 | 10,000 | 2,217.0 / 2,220.7 ms | x2.18 | baseline | 20 / 20 | 2,548 | 10.0 ms | 0.910 ms / 2.230 ms | baseline |',
    );
    expect(markdown).toContain(
      '| dp-cilium (cilium) | 10,000 | 10,000 | 28.4 / 29.7 ms | x1.02 | x0.013 | 20 / 20 | 2 | 10.0 ms | 0.270 ms / 0.661 ms | x0.30 |',
    );
    expect(markdown).toContain(
      '| dp-cilium (cilium) | 2,048 | 198 | 4,000 | 1,850 | 1,853 | +12 | 2,147 timeout | 0.500 ms | 1,003.2 ms | yes (262,144) |',
    );
    expect(markdown).toContain('| mesh | e3-fixed-mesh-mtls-r1 (attempt 1) | invalid |');
    expect(markdown).toContain(
      '**Warning:** Left out as invalid (see Invalid runs): dp-cilium/e9-services-5000.',
    );
    expect(markdown).toContain(
      '**Warning:** Findings: mesh/strict-port-permissive differ from what was expected.',
    );
  });

  it('states the attribution arithmetic with the numbers', () => {
    expect(markdown).toContain(
      'proxy hops = (E3 mesh-mtls-off - E3 plain) - HTTP parsing = (0.690 - 0.210) - 0.210',
    );
  });

  it('one cell: no Cell column in the per-arm tables; an empty table says why', () => {
    const dp = networkReportTables([fixtureCellStudy('dp-iptables')]);
    const sections = networkReportSections(dp);
    const grpc = sections.find((s) => s.id === 'grpc');
    expect(grpc?.table?.headers[0]).toBe('Arm');
    expect(grpc?.notes).toEqual(['No valid gRPC runs.']);
    expect(sections.find((s) => s.id === 'attribution')?.notes).toEqual([
      'No cell with a mesh ran E3 and E4.',
    ]);
  });
});

describe('network report cells', () => {
  it('tells a dropped connection from a policy denial', () => {
    expect(curlSymptom({ httpCode: '000', curlExit: 56 })).toBe(
      'connection dropped (HTTP 000, curl exit 56)',
    );
    expect(curlSymptom({ httpCode: '403', curlExit: 0 })).toBe('denied by policy (HTTP 403, curl exit 0)');
    expect(curlSymptom({ httpCode: '000', curlExit: 28 })).toBe('no response (HTTP 000, curl exit 28)');
    expect(curlSymptom(null)).toBe('no outcome recorded');
  });

  it('formats latencies to the microsecond and flags a spread over 3%', () => {
    expect(fineMs(0.2104)).toBe('0.210 ms');
    expect(anyMs(1003.64)).toBe('1,003.6 ms');
    expect(anyMs(undefined)).toBe('—');
    const base = { repeatMeansMs: [], meanMs: 1, actualQps: 1 };
    expect(spread({ ...base, repeats: 5, spreadPercent: 2.96 })).toBe('+-3.0%');
    expect(spread({ ...base, repeats: 5, spreadPercent: 3.04 })).toBe('+-3.0% (over +-3%: flagged)');
    expect(spread({ ...base, repeats: 1, spreadPercent: 0 })).toBe('one repeat');
  });
});

describe('network report banner', () => {
  it('names cells whose study is running or failed, none when all finished', () => {
    const [mesh, dp] = fixtureNetworkStudies();
    expect(networkStudyBanner([mesh, dp])).toBeUndefined();
    expect(
      networkStudyBanner([
        { ...mesh, state: 'failed', error: 'conntrack limit not restored' },
        { ...dp, state: 'running' },
      ]),
    ).toBe(
      "Partial study: cell mesh's study failed (conntrack limit not restored) after 92 run record(s); cell dp-iptables's study is still running (16 run record(s) so far). " +
        'The tables cover only the recorded runs; lab run resumes a study, skipping every run that already has a valid record.',
    );
  });
});

describe('network report charts', () => {
  const charts = networkCharts(tables);

  it('draws valid runs only: one point per Service step per cell, the pod-start step left out', () => {
    expect(charts.map((c) => [c.id, c.counts])).toEqual([
      ['mesh-arm-latency', { arms: 8, repeats: 39 }],
      ['attribution', { cells: 1, parts: 3 }],
      ['programming-latency', { series: 3, points: 14, gaps: 1 }],
      ['entries', { series: 3, points: 14, gaps: 1 }],
    ]);
  });

  it('every spec compiles to Vega and uses the colour-blind-safe palette', () => {
    for (const chart of charts) {
      if (!chart.spec) throw new Error(`${chart.id} has no spec`);
      const compiled = compile(chart.spec).spec;
      expect(() => parseSpec(compiled)).not.toThrow();
      expect(JSON.stringify(chart.spec)).toContain('#0072B2');
    }
  });

  it('a study without E3/E4 or E9 gets labelled empty charts, not blank ones', () => {
    const none = networkCharts(networkReportTables([{ ...fixtureCellStudy('dp-cilium'), runs: [] }]));
    expect(none.map((c) => [c.id, c.spec === undefined, c.empty])).toEqual([
      ['mesh-arm-latency', true, 'No valid fixed-rate run of E1, E3 or E4 to chart.'],
      ['attribution', true, 'No mesh cell with valid E3 and E4 fixed-rate runs of every arm to chart.'],
      ['programming-latency', true, 'No valid Service scale step with connected prober samples to chart.'],
      ['entries', true, 'No valid Service scale step to chart.'],
    ]);
  });
});
