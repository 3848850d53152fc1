import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import { ms, percent, tokensPerSecond } from './format.ts';
import type { ArmRow, ReportTables } from './tables.ts';

/**
 * The report's three charts (docs/facts.md §4.5): Vega-Lite specs built from the tables by pure
 * functions, rendered to SVG in Node. Only valid prefix-workload arm runs become bars; the ideal
 * partition (and for the hit rate, the formula's single-replica bound) are reference lines.
 */

export interface BarDatum {
  readonly arm: string;
  readonly value: number;
  /** Whether the arm's front end saw the prompt: the bar's colour and legend entry. */
  readonly prompt: string;
}

/** Legend entry of an arm whose front end can see the prompt (or does not route by it). */
export const PROMPT_SEEN = 'prompt visible to the front end (or not used for routing)';

export interface ReferenceDatum {
  /** Legend text, with the value: `Ideal partition (measured): 78.0%`. */
  readonly label: string;
  readonly value: number;
}

/** Everything a bar chart shows, before it becomes a spec. */
export interface BarChartData {
  readonly id: 'hit-rate' | 'p99-ttft' | 'throughput';
  readonly title: string;
  readonly valueTitle: string;
  /** d3-format of the value axis. */
  readonly format: string;
  /** d3-format of the value printed beside each bar. */
  readonly labelFormat: string;
  readonly bars: readonly BarDatum[];
  readonly references: readonly ReferenceDatum[];
  /** Arms whose every run was invalid: a labelled empty row, so the gap is visible. */
  readonly invalid: readonly string[];
}

const BAR_COLOR = '#4c78a8';
/**
 * One grey per reason an arm is prompt-blind (a component version each), in steps of lightness so
 * that they differ for every reader; two reasons used to share one grey in the legend.
 */
export const BLIND_COLORS = ['#c9c1bc', '#8a7f79', '#a99f99', '#6b625d'];
/**
 * Reference lines in Okabe-Ito orange and black: distinguishable with every common colour-vision
 * deficiency (no red against green), and each also has its own dash pattern.
 */
export const REFERENCE_COLORS = ['#E69F00', '#000000'];
const REFERENCE_DASHES = [
  [6, 3],
  [2, 2],
];
/** Text of the empty row of an arm without a valid run. */
export const INVALID_ROW_TEXT = 'invalid run: not charted (see Invalid runs)';
const ROW_HEIGHT = 26;
/**
 * Without a canvas, Vega estimates text width generously (0.8 x font size per character), so the arm
 * axis gets room for the longest title by that estimate rather than cutting it short: at 480 px
 * "vllm-router cache-aware-tuned over /v1/completions (invalid)" lost its last letters.
 */
const LABEL_LIMIT = 720;

function barsOf(tables: ReportTables, value: (row: ArmRow) => number | null): BarDatum[] {
  return tables.prefixArms.flatMap((row) => {
    const v = value(row);
    if (v === null || !Number.isFinite(v)) return [];
    return [
      row.promptBlind
        ? { arm: `${row.armTitle} (prompt-blind)`, value: v, prompt: row.promptBlind }
        : { arm: row.armTitle, value: v, prompt: PROMPT_SEEN },
    ];
  });
}

function invalidArms(tables: ReportTables): string[] {
  return tables.invalidPrefixArms.map((a) => `${a.armTitle} (invalid)`);
}

function idealReference(
  tables: ReportTables,
  value: (row: ArmRow) => number | null,
  text: (v: number) => string,
): ReferenceDatum[] {
  const v = tables.partition ? value(tables.partition) : null;
  return v === null || !Number.isFinite(v)
    ? []
    : [{ label: `Ideal partition (measured): ${text(v)}`, value: v }];
}

export function hitRateChartData(tables: ReportTables): BarChartData {
  const hit = (row: ArmRow) => row.hitRate;
  return {
    id: 'hit-rate',
    title: 'Prefix-cache hit rate per arm',
    valueTitle: 'Hit rate (hits / queried tokens, all replicas)',
    format: '.0%',
    labelFormat: '.1%',
    bars: barsOf(tables, hit),
    invalid: invalidArms(tables),
    references: [
      ...idealReference(tables, hit, percent),
      {
        label: `Single-replica bound (formula): ${percent(tables.workloadBound)}`,
        value: tables.workloadBound,
      },
    ],
  };
}

export function p99TtftChartData(tables: ReportTables): BarChartData {
  const p99 = (row: ArmRow) => row.p99TtftMs;
  return {
    id: 'p99-ttft',
    title: 'p99 time to first token per arm',
    valueTitle: 'p99 TTFT (ms)',
    format: ',.0f',
    labelFormat: ',.1f',
    bars: barsOf(tables, p99),
    invalid: invalidArms(tables),
    references: idealReference(tables, p99, ms),
  };
}

export function throughputChartData(tables: ReportTables): BarChartData {
  const tps = (row: ArmRow) => row.totalTokensPerSecond;
  return {
    id: 'throughput',
    title: 'Throughput per arm',
    valueTitle: 'Total tokens per second',
    format: ',.0f',
    labelFormat: ',.0f',
    bars: barsOf(tables, tps),
    invalid: invalidArms(tables),
    references: idealReference(tables, tps, (v) => `${tokensPerSecond(v)} tok/s`),
  };
}

/** The three charts of the report, in reading order. */
export function reportCharts(tables: ReportTables): BarChartData[] {
  return [hitRateChartData(tables), p99TtftChartData(tables), throughputChartData(tables)];
}

type LayerOf<T> = T extends { layer: readonly (infer L)[] } ? L : never;
type Layer = LayerOf<TopLevelSpec>;

/** Horizontal bars per arm (study order), reference values as labelled dashed vertical rules. */
export function barChartSpec(chart: BarChartData): TopLevelSpec {
  const arms = [...chart.bars.map((b) => b.arm), ...chart.invalid];
  const max = Math.max(0, ...chart.bars.map((b) => b.value), ...chart.references.map((r) => r.value));
  const x = {
    field: 'value',
    type: 'quantitative' as const,
    title: chart.valueTitle,
    axis: { format: chart.format, tickCount: 8 },
    scale: { domain: [0, max * 1.08 || 1] },
  };
  const y = {
    field: 'arm',
    type: 'nominal' as const,
    title: 'Arm',
    sort: arms,
    // The title sits above the labels, right-aligned to the axis: beside them, where Vega puts it
    // by its estimate of the labels' width, it touched the longest one in the browser.
    axis: {
      labelLimit: LABEL_LIMIT,
      titleAngle: 0,
      titleAlign: 'right' as const,
      titleBaseline: 'bottom' as const,
      titleX: -8,
      titleY: -6,
    },
  };
  const bars = { values: chart.bars.map((b) => ({ ...b })) };
  const prompts = [...new Set(chart.bars.map((b) => b.prompt))];
  const blind = prompts.filter((p) => p !== PROMPT_SEEN);
  const colorOf = (p: string) =>
    p === PROMPT_SEEN ? BAR_COLOR : (BLIND_COLORS[blind.indexOf(p) % BLIND_COLORS.length] ?? BAR_COLOR);
  const color = {
    field: 'prompt',
    type: 'nominal' as const,
    title: 'Prompt',
    scale: { domain: prompts, range: prompts.map(colorOf) },
    // Vega's canvas-free width estimate (0.8 x font size per character) needs room for the whole label.
    legend: { orient: 'bottom' as const, direction: 'vertical' as const, labelLimit: 640 },
  };
  const layers: Layer[] = [
    { data: bars, mark: { type: 'bar' }, encoding: { y, x, color } },
    {
      data: bars,
      mark: { type: 'text', align: 'left', dx: 4, fontSize: 11 },
      encoding: { y, x, text: { field: 'value', type: 'quantitative', format: chart.labelFormat } },
    },
  ];
  if (chart.invalid.length > 0) {
    layers.push({
      data: { values: chart.invalid.map((arm) => ({ arm, value: 0, text: INVALID_ROW_TEXT })) },
      mark: { type: 'text', align: 'left', dx: 4, fontSize: 11, fontStyle: 'italic', color: '#b00020' },
      encoding: { y, x, text: { field: 'text', type: 'nominal' } },
    });
  }
  if (chart.references.length > 0) {
    layers.push({
      data: { values: chart.references.map((r) => ({ ...r })) },
      mark: { type: 'rule', strokeWidth: 2 },
      encoding: {
        x,
        strokeDash: {
          field: 'label',
          type: 'nominal',
          scale: { domain: chart.references.map((r) => r.label), range: REFERENCE_DASHES },
          legend: null,
        },
        color: {
          field: 'label',
          type: 'nominal',
          title: 'Reference',
          scale: { domain: chart.references.map((r) => r.label), range: REFERENCE_COLORS },
          legend: { orient: 'bottom', direction: 'vertical', labelLimit: 400 },
        },
      },
    });
  }
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: chart.title, anchor: 'start', fontSize: 14 },
    width: 520,
    height: Math.max(ROW_HEIGHT * 2, ROW_HEIGHT * arms.length),
    config: { font: 'Helvetica, Arial, sans-serif', view: { stroke: null } },
    // Bars are coloured by prompt visibility, reference rules by their own legend.
    resolve: { scale: { color: 'independent' }, legend: { color: 'independent' } },
    layer: layers,
  };
}

/** Compiles a Vega-Lite spec and renders it to an SVG string without a browser or canvas. */
export async function renderChartSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
