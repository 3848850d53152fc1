import { describe, expect, it } from 'vitest';
import {
  BLIND_COLORS,
  barChartSpec,
  hitRateChartData,
  INVALID_ROW_TEXT,
  PROMPT_SEEN,
  p99TtftChartData,
  REFERENCE_COLORS,
  renderChartSvg,
  reportCharts,
  throughputChartData,
} from '../../lib/report/charts.ts';
import { htmlReport } from '../../lib/report/html.ts';
import { reportTables } from '../../lib/report/tables.ts';
import { fixtureStudy } from './fixture.ts';

const tables = reportTables(fixtureStudy());
const VALID_ARMS = [
  'Kubernetes Service (kube-proxy)',
  'vllm-router round-robin',
  'vllm-router cache-aware (prompt-blind)',
  'vllm-router cache-aware-tuned (prompt-blind)',
  'vllm-router round-robin over /v1/completions',
  'vllm-router cache-aware over /v1/completions',
  'Envoy + GAIE Endpoint Picker (prompt-blind)',
  'Envoy + GAIE Endpoint Picker over /v1/completions',
];

describe('chart data', () => {
  it('hit rate: one bar per valid prefix arm, the ideal partition and the formula bound as references', () => {
    const chart = hitRateChartData(tables);
    expect(chart.bars.map((b) => b.arm)).toEqual(VALID_ARMS);
    expect(chart.bars[0].value).toBeCloseTo(0.42, 3);
    expect(chart.references.map((r) => r.label)).toEqual([
      'Ideal partition (measured): 78.0%',
      'Single-replica bound (formula): 82.0%',
    ]);
    expect(chart.references[1].value).toBeCloseTo((7 / 8) * (2048 / 2186), 12);
    // The legend of the bars names what could not see the prompt, with its version.
    expect([...new Set(chart.bars.map((b) => b.prompt))]).toEqual([
      PROMPT_SEEN,
      'prompt-blind (chat content not read by vllm-router 0.1.15)',
      'prompt-blind (chat content not read by GAIE EPP v1.0.1)',
    ]);
  });

  it('p99 TTFT and throughput: the same bars, the ideal partition as reference', () => {
    const p99 = p99TtftChartData(tables);
    expect(p99.bars.map((b) => [b.arm, b.value])).toContainEqual([
      'Envoy + GAIE Endpoint Picker over /v1/completions',
      478.6,
    ]);
    expect(p99.references).toEqual([{ label: 'Ideal partition (measured): 418.9 ms', value: 418.9 }]);
    const tps = throughputChartData(tables);
    expect(tps.bars.map((b) => b.value)).toEqual([
      19_658, 19_530, 19_702, 19_644, 19_815, 22_400, 19_725, 21_900,
    ]);
    expect(tps.references).toEqual([{ label: 'Ideal partition (measured): 21,760 tok/s', value: 21_760 }]);
  });

  it('drops the ideal reference when the partition run is invalid', () => {
    const study = fixtureStudy();
    const t = reportTables({
      ...study,
      runs: study.runs.map((r) => (r.id === 'partition' ? { ...r, valid: false, invalidReasons: ['x'] } : r)),
    });
    expect(hitRateChartData(t).references.map((r) => r.label)).toEqual([
      'Single-replica bound (formula): 82.0%',
    ]);
    expect(p99TtftChartData(t).references).toEqual([]);
    const spec = barChartSpec(p99TtftChartData(t));
    // Bars, their value labels and the invalid arm's labelled empty row; no reference rule.
    expect('layer' in spec && spec.layer.map((l) => 'mark' in l && l.mark)).toEqual([
      { type: 'bar' },
      { type: 'text', align: 'left', dx: 4, fontSize: 11 },
      { type: 'text', align: 'left', dx: 4, fontSize: 11, fontStyle: 'italic', color: '#b00020' },
    ]);
  });
});

describe('chart spec', () => {
  it('layers bars, value labels and reference rules over the chart data', () => {
    const spec = barChartSpec(hitRateChartData(tables));
    if (!('layer' in spec)) throw new Error('expected a layered spec');
    const marks = spec.layer.map((l) =>
      'mark' in l ? (typeof l.mark === 'string' ? l.mark : l.mark.type) : '',
    );
    expect(marks).toEqual(['bar', 'text', 'text', 'rule']);
    const [bars, , invalid, rules] = spec.layer;
    expect(invalid.data).toEqual({
      values: [
        {
          arm: 'vllm-router cache-aware-tuned over /v1/completions (invalid)',
          value: 0,
          text: INVALID_ROW_TEXT,
        },
      ],
    });
    expect(bars.data).toEqual({ values: hitRateChartData(tables).bars });
    expect(rules.data).toEqual({ values: hitRateChartData(tables).references });
    expect(JSON.stringify(bars)).toContain('"title":"Hit rate (hits / queried tokens, all replicas)"');
    expect(JSON.stringify(bars)).toContain(
      `"sort":${JSON.stringify([...VALID_ARMS, 'vllm-router cache-aware-tuned over /v1/completions (invalid)'])}`,
    );
  });
});

describe('rendered SVG', () => {
  it('has one bar mark per valid arm, the reference rules and the axis titles', async () => {
    const svg = await renderChartSvg(barChartSpec(hitRateChartData(tables)));
    const barGroup = svg.match(/<g class="mark-rect role-mark[^"]*"[^>]*>(.*?)<\/g>/s);
    expect(barGroup?.[1].match(/<path/g)).toHaveLength(VALID_ARMS.length);
    const ruleGroup = svg.match(/<g class="mark-rule role-mark[^"]*"[^>]*>(.*?)<\/g>/s);
    expect(ruleGroup?.[1].match(/<line/g)).toHaveLength(2);
    expect(svg).toContain('>Arm</text>');
    expect(svg).toContain('>Hit rate (hits / queried tokens, all replicas)</text>');
    expect(svg).toContain('>Single-replica bound (formula): 82.0%</text>');
    expect(svg).toContain('>prompt-blind (chat content not read by GAIE EPP v1.0.1)</text>');
    // Prompt-blind bars are drawn in a grey per reason: two router arms, one EPP arm.
    expect(barGroup?.[1].match(new RegExp(`fill="${BLIND_COLORS[0]}"`, 'g'))).toHaveLength(2);
    expect(barGroup?.[1].match(new RegExp(`fill="${BLIND_COLORS[1]}"`, 'g'))).toHaveLength(1);
    // Reference rules in Okabe-Ito orange and black (no red against green), with distinct dashes.
    expect(ruleGroup?.[1]).toContain(`stroke="${REFERENCE_COLORS[0]}"`);
    expect(ruleGroup?.[1]).toContain(`stroke="${REFERENCE_COLORS[1]}"`);
    expect(ruleGroup?.[1]).toContain('stroke-dasharray="6,3"');
    expect(ruleGroup?.[1]).toContain('stroke-dasharray="2,2"');
    // The invalid arm's row is named, with no bar.
    expect(svg).toContain(
      `Arm: vllm-router cache-aware-tuned over /v1/completions (invalid); text: ${INVALID_ROW_TEXT}`,
    );
    expect(svg).toContain(`${INVALID_ROW_TEXT}</text>`);
  });

  it('the HTML report holds three inline SVG charts and nothing fetched', async () => {
    const html = await htmlReport(tables, { source: '/results/study.json' });
    expect(html.match(/<svg /g)).toHaveLength(reportCharts(tables).length);
    expect(html).not.toMatch(/<script|<link|src=|@import|url\(/i);
    for (const id of ['hit-rate', 'p99-ttft', 'throughput']) {
      expect(html).toContain(`<figure class="chart" id="chart-${id}" data-bars="8">`);
    }
  });
});

describe('chart legibility', () => {
  it('gives every legend entry of the bars its own colour', () => {
    const spec = barChartSpec(hitRateChartData(tables)) as unknown as {
      layer: { encoding: { color?: { scale?: { domain: string[]; range: string[] } } } }[];
    };
    const scale = spec.layer[0]?.encoding.color?.scale;
    expect(scale?.domain).toHaveLength(3);
    expect(new Set(scale?.range).size).toBe(scale?.domain.length);
    expect(scale?.range.slice(1)).toEqual(BLIND_COLORS.slice(0, 2));
  });

  it('draws the invalid arm label whole, and the arm axis title above the labels', async () => {
    const svg = await renderChartSvg(barChartSpec(hitRateChartData(tables)));
    expect(svg).toContain('vllm-router cache-aware-tuned over /v1/completions (invalid)</text>');
    expect(svg).not.toContain('…');
  });
});
