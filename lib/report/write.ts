import { existsSync, readdirSync } from 'node:fs';
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
 * The study JSON of a results folder: `<dir>/study.json`, or in a downloaded results folder,
 * where every study has its own folder (`studies/<id>/`, lib/runner/layout.ts), the latest
 * study's (ids start with the study's start time, so the last in order is the latest).
 */
export function studyFileOf(resultsDir: string): string {
  const direct = resolve(resultsDir, STUDY_FILE);
  if (existsSync(direct)) return direct;
  const studies = resolve(resultsDir, 'studies');
  const ids = existsSync(studies)
    ? readdirSync(studies)
        .filter((id) => /^\d{8}-\d{6}-[0-9a-f]{8}$/.test(id) && existsSync(join(studies, id, STUDY_FILE)))
        .sort()
    : [];
  return ids.length > 0 ? join(studies, ids[ids.length - 1], STUDY_FILE) : direct;
}

/**
 * Reads the study JSON of a results folder (`studyFileOf`) and writes `report.md` and `report.html` into `outDir` (default:
 * the results folder). The study JSON is only read, never rewritten.
 */
export async function writeReport(resultsDir: string, outDir: string = resultsDir): Promise<WrittenReport> {
  const study = studyFileOf(resultsDir);
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
