import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { studyBanner, studyCompleteness } from './banner.ts';
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
  /** The partial- or empty-study banner the reports carry, if any. */
  readonly banner?: string;
}

/** The report could not be written where asked: the path and the system's reason, no stack trace. */
export class ReportWriteError extends Error {
  override readonly name = 'ReportWriteError';
}

const WRITE_PROBLEMS: Readonly<Record<string, string>> = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'the file system is read-only',
  ENOTDIR: 'a part of the path is a file, not a folder',
  EEXIST: 'a file of that name is in the way',
  EISDIR: 'it is a folder',
  ENOSPC: 'no space left on the device',
};

async function writeOut(path: string, action: () => Promise<unknown>): Promise<void> {
  try {
    await action();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? '';
    const why = WRITE_PROBLEMS[code];
    if (!why) throw error;
    throw new ReportWriteError(`cannot write ${path}: ${why} (${code}); choose another folder with --out`, {
      cause: error,
    });
  }
}

/**
 * Reads `<resultsDir>/study.json` and writes `report.md` and `report.html` into `outDir` (default:
 * the results folder). The study JSON is only read, never rewritten.
 */
export async function writeReport(resultsDir: string, outDir: string = resultsDir): Promise<WrittenReport> {
  const study = resolve(resultsDir, STUDY_FILE);
  const record = await loadStudy(study);
  const tables = reportTables(record);
  const banner = studyBanner(studyCompleteness(record));
  const out = resolve(outDir);
  const heading = { source: study, ...(banner ? { banner } : {}) };
  const markdown = join(out, 'report.md');
  const html = join(out, 'report.html');
  const htmlText = await htmlReport(tables, heading);
  await writeOut(out, () => mkdir(out, { recursive: true }));
  await writeOut(markdown, () => writeFile(markdown, markdownReport(tables, heading)));
  await writeOut(html, () => writeFile(html, htmlText));
  return { study, markdown, html, ...(banner ? { banner } : {}) };
}
