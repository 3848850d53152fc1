import { type ReportSection, reportSections, type TextTable } from './format.ts';
import type { ReportTables } from './tables.ts';

/** `report.md`: the tables of docs/facts.md §4.5 as GitHub-flavoured Markdown. Pure. */

export interface ReportHeading {
  /** Where the study JSON was read from, shown under the title. */
  readonly source: string;
  /** Shown above the tables when the study is partial or empty (banner.ts). */
  readonly banner?: string;
}

/** A cell's text made safe inside a Markdown table row. */
function cell(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

export function markdownTable(table: TextTable): string {
  const row = (cells: readonly string[]) => `| ${cells.map(cell).join(' | ')} |`;
  const rule = `|${table.align.map((a) => (a === 'right' ? '---:' : ':---')).join('|')}|`;
  return [row(table.headers), rule, ...table.rows.map(row)].join('\n');
}

/** One report section: `## title`, intro, its table (when it has rows) and the notes below it. */
export function markdownSection(s: ReportSection): string {
  const parts = [`## ${s.title}`, s.intro];
  if (s.items && s.items.length > 0) parts.push(s.items.map((item) => `- ${item}`).join('\n'));
  if (s.table && s.table.rows.length > 0) parts.push(markdownTable(s.table));
  parts.push(...s.notes);
  parts.push(...(s.warnings ?? []).map((w) => `**Warning:** ${w}`));
  return parts.join('\n\n');
}

export function markdownReport(tables: ReportTables, heading: ReportHeading): string {
  const intro = [
    '# LLM-gateway study report',
    `Generated from \`${heading.source}\`, which stays the source of truth. Only valid runs enter the ` +
      'tables, comparisons and charts; invalid runs are listed with their reasons under Invalid runs.',
    ...(heading.banner ? [`> **${heading.banner}**`] : []),
  ];
  return `${[...intro, ...reportSections(tables).map(markdownSection)].join('\n\n')}\n`;
}
