import type { TopLevelSpec } from 'vega-lite';
import type { LatencyGroup, NetworkReportTables } from './tables.ts';

/**
 * The network report's four charts (docs/facts.md §N6) as Vega-Lite specs, built from the tables
 * by pure functions (valid runs only) and rendered to SVG by lib/report/charts.ts `renderChartSvg`.
 * Colours are Okabe-Ito's, distinguishable with every common colour-vision deficiency, and every
 * series also has its own point shape, so no reading depends on colour alone.
 */

/** Okabe-Ito: blue, orange, bluish green, vermillion, reddish purple, sky blue, yellow, black. */
export const OKABE_ITO = [
  '#0072B2',
  '#E69F00',
  '#009E73',
  '#D55E00',
  '#CC79A7',
  '#56B4E9',
  '#F0E442',
  '#000000',
];
const SHAPES = ['circle', 'square', 'triangle-up', 'diamond', 'cross', 'triangle-down'];

export type NetworkChartId = 'programming-latency' | 'entries' | 'mesh-arm-latency' | 'attribution';

export interface NetworkChart {
  readonly id: NetworkChartId;
  readonly title: string;
  /** Absent when no valid run gives the chart anything to draw. */
  readonly spec?: TopLevelSpec;
  /** Shown instead of the chart when there is no spec. */
  readonly empty: string;
  /** What the chart draws (counts), written on its figure for readers and tests. */
  readonly counts: Readonly<Record<string, number>>;
}

const BASE = {
  $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
  config: { font: 'Helvetica, Arial, sans-serif', view: { stroke: null } },
} as const;

const title = (text: string) => ({ text, anchor: 'start' as const, fontSize: 14 });

/** `mesh (iptables)`: a cell's series in the E9 charts. */
const seriesOf = (cell: string, datapath: string) => `${cell} (${datapath})`;

/** A step of a cell's E9 series: its value, or undefined where the step is invalid or has none to draw. */
interface ServicesStep {
  readonly series: string;
  readonly services: number;
  readonly value: number | undefined;
}

/** A drawn point: `segment` names the stretch of its line, which ends at a step without a value. */
interface SegmentedPoint {
  readonly series: string;
  readonly segment: string;
  readonly services: number;
  readonly value: number;
}

/**
 * The points of each series in Service order, cut into segments wherever a step has no value:
 * the line is drawn per segment, so it never joins the steps on either side of an invalid one (a
 * gap says "no valid measurement here"; a line across it would draw one). Returns the gaps too.
 */
export function segmentSteps(steps: readonly ServicesStep[]): { points: SegmentedPoint[]; gaps: number } {
  const points: SegmentedPoint[] = [];
  let gaps = 0;
  for (const series of [...new Set(steps.map((s) => s.series))]) {
    const ordered = steps.filter((s) => s.series === series).sort((a, b) => a.services - b.services);
    let segment = 0;
    let drawn = false;
    for (const step of ordered) {
      if (step.value === undefined) {
        if (drawn) segment++;
        gaps++;
        drawn = false;
        continue;
      }
      points.push({ series, segment: `${series} #${segment}`, services: step.services, value: step.value });
      drawn = true;
    }
  }
  return { points, gaps };
}

/** The invalid E9 steps of the tables, as value-less steps of their cell's series. */
function invalidSteps(tables: NetworkReportTables): ServicesStep[] {
  return tables.invalid.flatMap((r) => {
    const cell = tables.cells.find((c) => c.cell === r.cell);
    return r.services === undefined || !cell
      ? []
      : [{ series: seriesOf(r.cell, cell.datapath), services: r.services, value: undefined }];
  });
}

/**
 * One line per cell's datapath over the Service counts, broken where a step is invalid;
 * log-scaled value axis, symlog counts.
 */
function perServicesChart(
  id: 'programming-latency' | 'entries',
  chartTitle: string,
  valueTitle: string,
  steps: readonly ServicesStep[],
  empty: string,
): NetworkChart {
  const { points, gaps } = segmentSteps(steps);
  const series = [...new Set(points.map((p) => p.series))];
  const counts = { series: series.length, points: points.length, gaps };
  if (points.length === 0) return { id, title: chartTitle, empty, counts };
  // Colour and shape share one legend (same field, title and legend): each entry shows both.
  const legend = { orient: 'bottom' as const, direction: 'vertical' as const, labelLimit: 400 };
  const color = {
    field: 'series',
    type: 'nominal' as const,
    title: 'Cell (datapath)',
    scale: { domain: series, range: OKABE_ITO.slice(0, series.length) },
    legend,
  };
  const x = {
    field: 'services',
    type: 'quantitative' as const,
    title: 'Services (symlog scale)',
    // symlog shows 0, 100 and 10,000 Services on one axis without crowding the small counts.
    scale: { type: 'symlog' as const, constant: 10 },
    axis: {
      values: [...new Set(points.map((p) => p.services))].sort((a, b) => a - b),
      format: ',d',
      // Vega's canvas-free text width estimate is generous: it would hide 10,000 beside 5,000.
      labelOverlap: false,
    },
  };
  const y = {
    field: 'value',
    type: 'quantitative' as const,
    title: valueTitle,
    scale: { type: 'log' as const },
    axis: { format: ',~r' },
  };
  return {
    id,
    title: chartTitle,
    empty,
    counts,
    spec: {
      ...BASE,
      title: title(chartTitle),
      width: 520,
      height: 300,
      data: { values: points.map((p) => ({ ...p })) },
      layer: [
        // One path per segment: a gap where a step is invalid.
        { mark: { type: 'line', strokeWidth: 2 }, encoding: { x, y, color, detail: { field: 'segment' } } },
        {
          mark: { type: 'point', filled: true, size: 70, opacity: 1 },
          encoding: {
            x,
            y,
            color,
            shape: {
              field: 'series',
              type: 'nominal',
              title: 'Cell (datapath)',
              scale: { domain: series, range: SHAPES.slice(0, series.length) },
              legend,
            },
          },
        },
      ],
    },
  };
}

export function programmingLatencyChart(tables: NetworkReportTables): NetworkChart {
  const steps = tables.scale.map((r) => ({
    series: seriesOf(r.cell, r.datapath),
    services: r.services,
    value:
      r.programmingMedianMs !== undefined && r.programmingMedianMs > 0 ? r.programmingMedianMs : undefined,
  }));
  return perServicesChart(
    'programming-latency',
    'Programming latency vs Services, per datapath',
    'Median programming latency (ms, log scale)',
    [...steps, ...invalidSteps(tables)],
    'No valid Service scale step with connected prober samples to chart.',
  );
}

export function entriesChart(tables: NetworkReportTables): NetworkChart {
  // A log axis cannot show 0 entries; such a step stays in the table (and leaves a gap here).
  const steps = tables.scale.map((r) => ({
    series: seriesOf(r.cell, r.datapath),
    services: r.services,
    value: r.entries > 0 ? r.entries : undefined,
  }));
  return perServicesChart(
    'entries',
    'Data-plane entries vs Services, per datapath',
    'Entries (log scale)',
    [...steps, ...invalidSteps(tables)],
    'No valid Service scale step to chart.',
  );
}

const GROUP_LABEL: Readonly<Record<LatencyGroup, string>> = { E1: 'E1', E3: 'E3', E4: 'E4' };

/** Each fixed-rate arm's repeats as points and their mean as a black tick. */
export function meshArmLatencyChart(tables: NetworkReportTables): NetworkChart {
  const chartTitle = 'Mean latency per mesh arm, with its repeats (fixed rate)';
  const multiCell = new Set(tables.latency.map((r) => r.cell)).size > 1;
  const rows = tables.latency.flatMap((r) =>
    r.fixed
      ? [
          {
            // The mean is in the label: printed beside the points it would cover a repeat.
            arm: `${multiCell ? `${r.cell} ` : ''}${GROUP_LABEL[r.group]} ${r.arm} (mean ${r.fixed.meanMs.toFixed(3)} ms)`,
            row: r,
            fixed: r.fixed,
          },
        ]
      : [],
  );
  const repeats = rows.flatMap(({ arm, row, fixed }) =>
    fixed.repeatMeansMs.map((ms, index) => ({
      arm,
      experiment: GROUP_LABEL[row.group],
      repeat: index + 1,
      ms,
    })),
  );
  const means = rows.map(({ arm, fixed }) => ({ arm, ms: fixed.meanMs }));
  const counts = { arms: rows.length, repeats: repeats.length };
  if (rows.length === 0) {
    return {
      id: 'mesh-arm-latency',
      title: chartTitle,
      empty: 'No valid fixed-rate run of E1, E3 or E4 to chart.',
      counts,
    };
  }
  const order = rows.map((r) => r.arm);
  const experiments = [...new Set(repeats.map((r) => r.experiment))];
  const y = { field: 'arm', type: 'nominal' as const, title: 'Arm', sort: order, axis: { labelLimit: 300 } };
  const x = {
    field: 'ms',
    type: 'quantitative' as const,
    title: 'Mean latency (ms)',
    axis: { format: '.2f' },
  };
  return {
    id: 'mesh-arm-latency',
    title: chartTitle,
    empty: '',
    counts,
    spec: {
      ...BASE,
      title: title(chartTitle),
      width: 520,
      height: Math.max(60, 26 * rows.length),
      layer: [
        {
          data: { values: repeats },
          mark: { type: 'point', filled: false, size: 60, strokeWidth: 1.5 },
          encoding: {
            y,
            x,
            color: {
              field: 'experiment',
              type: 'nominal',
              title: 'Repeats of',
              scale: { domain: experiments, range: OKABE_ITO.slice(0, experiments.length) },
              legend: { orient: 'bottom', direction: 'horizontal' },
            },
            shape: {
              field: 'experiment',
              type: 'nominal',
              title: 'Repeats of',
              scale: { domain: experiments, range: SHAPES.slice(0, experiments.length) },
              legend: { orient: 'bottom', direction: 'horizontal' },
            },
          },
        },
        {
          data: { values: means },
          mark: { type: 'tick', color: '#000000', thickness: 3, size: 18 },
          encoding: { y, x },
        },
      ],
    },
  };
}

/** One stacked bar per mesh cell: proxy hops, HTTP parsing and encryption (ms). */
export function attributionChart(tables: NetworkReportTables): NetworkChart {
  const chartTitle = 'Where the added latency goes (fixed rate)';
  const parts = tables.attribution.flatMap((a) =>
    a.available ? a.parts.map((p, index) => ({ cell: a.cell, part: p.label, order: index, ms: p.ms })) : [],
  );
  const cells = [...new Set(parts.map((p) => p.cell))];
  const counts = { cells: cells.length, parts: parts.length };
  if (parts.length === 0) {
    return {
      id: 'attribution',
      title: chartTitle,
      empty: 'No mesh cell with valid E3 and E4 fixed-rate runs of every arm to chart.',
      counts,
    };
  }
  const labels = [...new Set(parts.map((p) => p.part))];
  return {
    id: 'attribution',
    title: chartTitle,
    empty: '',
    counts,
    spec: {
      ...BASE,
      title: title(chartTitle),
      width: 520,
      height: Math.max(60, 40 * cells.length),
      data: { values: parts },
      mark: { type: 'bar', stroke: '#ffffff', strokeWidth: 1 },
      encoding: {
        y: { field: 'cell', type: 'nominal', title: 'Cell', sort: cells },
        x: {
          field: 'ms',
          type: 'quantitative',
          title: 'Added latency (ms)',
          stack: 'zero',
          axis: { format: '.2f' },
        },
        color: {
          field: 'part',
          type: 'nominal',
          title: 'Part',
          scale: { domain: labels, range: OKABE_ITO.slice(0, labels.length) },
          legend: { orient: 'bottom', direction: 'vertical', labelLimit: 400 },
        },
        order: { field: 'order', type: 'quantitative' },
      },
    },
  };
}

/** The four charts, in reading order. */
export function networkCharts(tables: NetworkReportTables): NetworkChart[] {
  return [
    meshArmLatencyChart(tables),
    attributionChart(tables),
    programmingLatencyChart(tables),
    entriesChart(tables),
  ];
}
