import { renderChartSvg } from '../charts.ts';
import type { ReportSection } from '../format.ts';
import { escapeHtml, htmlChartFigure, htmlChartsSection, htmlPage, htmlSection } from '../html.ts';
import { markdownSection } from '../markdown.ts';
import { type NetworkChart, networkCharts } from './charts.ts';
import { networkReportSections } from './format.ts';
import type { NetworkReportTables } from './tables.ts';

/** The network report as Markdown (tables) and as one self-contained HTML page (tables and charts). */

export const NETWORK_REPORT_TITLE = 'Network study report';

/** The heading of a network report: the study files it was made from, and a banner if any. */
export interface NetworkReportHeading {
  readonly sources: readonly string[];
  readonly banner?: string;
}

const intro = (sources: string) =>
  `Generated from ${sources}, which stay the source of truth. Only valid runs enter the tables, ` +
  'comparisons and charts; invalid runs are listed with their reasons under Invalid runs.';

export function networkMarkdownReport(tables: NetworkReportTables, heading: NetworkReportHeading): string {
  const head = [
    `# ${NETWORK_REPORT_TITLE}`,
    intro(heading.sources.map((s) => `\`${s}\``).join(', ')),
    ...(heading.banner ? [`> **${heading.banner}**`] : []),
  ];
  return `${[...head, ...networkReportSections(tables).map(markdownSection)].join('\n\n')}\n`;
}

async function figure(chart: NetworkChart): Promise<string> {
  const svg = chart.spec ? await renderChartSvg(chart.spec) : undefined;
  return htmlChartFigure(chart.id, chart.title, svg, chart.empty, chart.counts);
}

/** Sections after which the charts come: the comparison each chart illustrates. */
const CHARTS_AFTER: ReportSection['id'] = 'attribution';
const SCALE_CHARTS_AFTER: ReportSection['id'] = 'services-at-scale';

export async function networkHtmlReport(
  tables: NetworkReportTables,
  heading: NetworkReportHeading,
): Promise<string> {
  const charts = networkCharts(tables);
  const latency = charts.filter((c) => c.id === 'mesh-arm-latency' || c.id === 'attribution');
  const scale = charts.filter((c) => c.id === 'programming-latency' || c.id === 'entries');
  const body: string[] = [];
  for (const s of networkReportSections(tables)) {
    body.push(htmlSection(s));
    if (s.id === CHARTS_AFTER) {
      body.push(
        htmlChartsSection(
          'Valid fixed-rate runs only: each circle is a repeat, the black tick the mean; the stacked bar splits the added latency as the table above.',
          await Promise.all(latency.map(figure)),
          'charts-mesh',
          'Charts: mesh latency',
        ),
      );
    }
    if (s.id === SCALE_CHARTS_AFTER) {
      body.push(
        htmlChartsSection(
          'Valid Service scale steps only, one line per cell and its datapath; log-scaled values, symlog Service counts.',
          await Promise.all(scale.map(figure)),
          'charts-scale',
          'Charts: Services at scale',
        ),
      );
    }
  }
  return htmlPage({
    title: NETWORK_REPORT_TITLE,
    intro: intro(heading.sources.map((s) => `<code>${escapeHtml(s)}</code>`).join(', ')),
    ...(heading.banner ? { banner: heading.banner } : {}),
    body: body.join('\n'),
  });
}
