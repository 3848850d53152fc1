import { barChartSpec, renderChartSvg, reportCharts } from './charts.ts';
import { type ReportSection, reportSections, type TextTable } from './format.ts';
import type { ReportHeading } from './markdown.ts';
import type { ReportTables } from './tables.ts';

/**
 * `report.html`: the same tables as the Markdown report plus three charts, in one self-contained
 * file (inline CSS and SVG, no script, nothing fetched).
 */

/**
 * Notes explain (neutral grey); warnings must not be missed (dark orange, with a bar and the word
 * "Warning:", so they do not depend on colour). Both keep at least WCAG's 4.5:1 contrast on white.
 */
export const NOTE_COLOUR = '#4d4d4d';
export const WARNING_COLOUR = '#9a4400';

const STYLE = `
body { font-family: Helvetica, Arial, sans-serif; color: #222; margin: 2rem auto; max-width: 80rem; padding: 0 1rem; line-height: 1.4; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.2rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; }
p.intro { color: #555; max-width: 60rem; }
p.note { color: ${NOTE_COLOUR}; }
p.warning { color: ${WARNING_COLOUR}; border-left: 4px solid ${WARNING_COLOUR}; padding-left: 0.6rem; }
ul.headline { padding-left: 1.2rem; }
ul.headline li { margin: 0.25rem 0; }
p.banner { background: #fff4e5; border-left: 4px solid #e08a00; padding: 0.6rem 0.8rem; font-weight: bold; }
div.table { max-width: 100%; overflow-x: auto; margin: 0.6rem 0; }
table { border-collapse: collapse; font-size: 0.88rem; }
th, td { border: 1px solid #d6d6d6; padding: 0.25rem 0.55rem; vertical-align: top; }
th { background: #f3f5f8; text-align: left; }
td.right { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.prose { white-space: normal; min-width: 8rem; }
tr:nth-child(even) td { background: #fafafa; }
section#invalid td:nth-child(2) { color: #b00020; font-weight: bold; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5rem; }
figure.chart { margin: 0; padding: 0.6rem; border: 1px solid #e3e3e3; border-radius: 4px; background: #fff; }
figure.chart svg { max-width: 100%; height: auto; display: block; }
`;

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/**
 * A right-aligned cell longer than this many characters is a sentence (a verdict such as "+0.1
 * points, same within noise (...)"), not a figure: it may wrap, where a figure stays on one line.
 * Kept on one line, such cells made the first table 1,583 px wide in a 1,152 px column.
 */
const PROSE_CELL_CHARS = 24;

function cellClass(text: string, align: string): string {
  return align === 'right' && text.length > PROSE_CELL_CHARS && text.includes(' ') ? 'right prose' : align;
}

/** A table in a box that scrolls sideways rather than clip, should a table still be wider than the page. */
export function htmlTable(table: TextTable): string {
  const head = table.headers.map((h) => `<th>${escapeHtml(h)}</th>`).join('');
  const body = table.rows
    .map(
      (row) =>
        `<tr>${row.map((c, i) => `<td class="${cellClass(c, table.align[i] ?? 'left')}">${escapeHtml(c)}</td>`).join('')}</tr>`,
    )
    .join('\n');
  return `<div class="table">\n<table>\n<thead><tr>${head}</tr></thead>\n<tbody>\n${body}\n</tbody>\n</table>\n</div>`;
}

/** One report section: heading, intro, its table (when it has rows) and the notes below it. */
export function htmlSection(s: ReportSection): string {
  const parts = [
    `<section id="${s.id}">`,
    `<h2>${escapeHtml(s.title)}</h2>`,
    `<p class="intro">${escapeHtml(s.intro)}</p>`,
  ];
  if (s.items && s.items.length > 0) {
    parts.push(`<ul class="headline">${s.items.map((item) => `<li>${escapeHtml(item)}</li>`).join('')}</ul>`);
  }
  if (s.table && s.table.rows.length > 0) parts.push(htmlTable(s.table));
  for (const note of s.notes) parts.push(`<p class="note">${escapeHtml(note)}</p>`);
  for (const warning of s.warnings ?? []) {
    parts.push(`<p class="warning"><strong>Warning:</strong> ${escapeHtml(warning)}</p>`);
  }
  parts.push('</section>');
  return parts.join('\n');
}

/**
 * One chart as a figure: its SVG, or its title and `empty` when it has nothing to draw. `data`
 * becomes `data-*` attributes (what the chart holds, for tests and readers of the source).
 */
export function htmlChartFigure(
  id: string,
  title: string,
  svg: string | undefined,
  empty: string,
  data: Readonly<Record<string, string | number>> = {},
): string {
  if (svg === undefined) {
    return (
      `<figure class="chart" id="chart-${id}"><figcaption>${escapeHtml(title)}</figcaption>` +
      `<p class="note">${escapeHtml(empty)}</p></figure>`
    );
  }
  const attributes = Object.entries(data)
    .map(([key, value]) => ` data-${key}="${escapeHtml(String(value))}"`)
    .join('');
  return `<figure class="chart" id="chart-${id}"${attributes}>\n${svg}\n</figure>`;
}

/** A charts section: a heading, its intro (HTML: escape text with `escapeHtml`) and the figures side by side. */
export function htmlChartsSection(
  intro: string,
  figures: readonly string[],
  id = 'charts',
  title = 'Charts',
): string {
  return [
    `<section id="${id}">`,
    `<h2>${escapeHtml(title)}</h2>`,
    `<p class="intro">${intro}</p>`,
    `<div class="charts">\n${figures.join('\n')}\n</div>`,
    '</section>',
  ].join('\n');
}

async function chartsSection(tables: ReportTables): Promise<string> {
  const figures: string[] = [];
  for (const chart of reportCharts(tables)) {
    const svg = chart.bars.length === 0 ? undefined : await renderChartSvg(barChartSpec(chart));
    figures.push(
      htmlChartFigure(chart.id, chart.title, svg, 'No valid prefix-workload arm run to chart.', {
        bars: chart.bars.length,
      }),
    );
  }
  return htmlChartsSection(
    'Valid prefix-workload arm runs only. Dashed lines are references: the measured ideal ' +
      "partition and, for the hit rate, the formula's single-replica bound of the workload.",
    figures,
  );
}

export async function htmlReport(tables: ReportTables, heading: ReportHeading): Promise<string> {
  const sections = reportSections(tables);
  const charts = await chartsSection(tables);
  const body: string[] = [];
  for (const s of sections) {
    body.push(htmlSection(s));
    // The charts follow the comparison they illustrate.
    if (s.id === 'left-on-the-table') body.push(charts);
  }
  return htmlPage({
    title: 'LLM-gateway study report',
    intro:
      `Generated from <code>${escapeHtml(heading.source)}</code>, which stays the source of truth. Only valid runs ` +
      'enter the tables, comparisons and charts; invalid runs are listed with their reasons under Invalid runs.',
    ...(heading.banner ? { banner: heading.banner } : {}),
    body: body.join('\n'),
  });
}

/** What a self-contained report page holds; `intro` and `body` are HTML, the rest text. */
export interface HtmlPage {
  readonly title: string;
  readonly intro: string;
  readonly banner?: string;
  readonly body: string;
}

/** The self-contained page both labs' reports use: inline CSS, no script, nothing fetched. */
export function htmlPage(page: HtmlPage): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(page.title)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>${escapeHtml(page.title)}</h1>
<p class="intro">${page.intro}</p>
${page.banner ? `<p class="banner" id="banner" role="status">${escapeHtml(page.banner)}</p>\n` : ''}${page.body}
</body>
</html>
`;
}
