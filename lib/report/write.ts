import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { htmlReport } from './html.ts';
import { loadStudy } from './load.ts';
import { markdownReport } from './markdown.ts';
import { reportTables } from './tables.ts';

/** The file a results folder holds for the report. */
export const STUDY_FILE = 'study.json';

export interface WrittenReport {
  readonly study: string;
  readonly markdown: string;
  readonly html: string;
}

/**
 * Reads `<resultsDir>/study.json` and writes `report.md` and `report.html` into `outDir` (default:
 * the results folder). The study JSON is only read, never rewritten.
 */
export async function writeReport(resultsDir: string, outDir: string = resultsDir): Promise<WrittenReport> {
  const study = resolve(resultsDir, STUDY_FILE);
  const tables = reportTables(await loadStudy(study));
  const out = resolve(outDir);
  await mkdir(out, { recursive: true });
  const heading = { source: study };
  const markdown = join(out, 'report.md');
  const html = join(out, 'report.html');
  await writeFile(markdown, markdownReport(tables, heading));
  await writeFile(html, await htmlReport(tables, heading));
  return { study, markdown, html };
}
