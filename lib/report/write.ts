import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { StudyRecord } from '../study/results.ts';
import { studyBanner, studyCompleteness } from './banner.ts';
import { calibrationReport, calibrationSection } from './calibration-section.ts';
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
 * The study JSON of a results folder: `<dir>/study.json`, or in a downloaded results folder,
 * where every study has its own folder (`studies/<id>/`, lib/runner/layout.ts), the latest
 * study's (ids start with the study's start time, so the last in order is the latest). Smoke
 * studies (lib/study/smoke.ts) measure no comparison and are passed over; their checklist is
 * `smoke-checklist.txt` in their folder.
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
  const latest = ids.reverse().find((id) => !isSmokeStudy(join(studies, id, STUDY_FILE))) ?? ids[0];
  return latest ? join(studies, latest, STUDY_FILE) : direct;
}

/**
 * Whether a study.json is a smoke study's (`metadata.profile`; a network cell's: `profile`, as
 * lib/network/study/model.ts records it); an unreadable one is not.
 */
function isSmokeStudy(path: string): boolean {
  try {
    const study = JSON.parse(readFileSync(path, 'utf8')) as StudyRecord & { profile?: string };
    return study.metadata?.profile === 'smoke' || study.profile === 'smoke';
  } catch {
    return false;
  }
}

/**
 * Reads the study JSON of a results folder (`studyFileOf`) and writes `report.md` and `report.html` into `outDir` (default:
 * the results folder). The study JSON is only read, never rewritten.
 */
export async function writeReport(
  resultsDir: string,
  outDir: string = resultsDir,
  options: { calibrate?: boolean } = {},
): Promise<WrittenReport> {
  const study = studyFileOf(resultsDir);
  const record = await loadStudy(study);
  const measured = reportTables(record);
  // The study calibrates itself on its single-replica runs unless asked not to (it takes seconds).
  const tables =
    options.calibrate === false
      ? measured
      : { ...measured, calibrationSection: calibrationSection(calibrationReport(record, measured)) };
  const banner = studyBanner(studyCompleteness(record));
  const heading = { source: study, ...(banner ? { banner } : {}) };
  const written = await writeReportFiles(
    outDir,
    markdownReport(tables, heading),
    await htmlReport(tables, heading),
  );
  return { study, ...written, ...(banner ? { banner } : {}) };
}

/** Writes `report.md` and `report.html` into `outDir` (created if need be); returns their paths. */
export async function writeReportFiles(
  outDir: string,
  markdownText: string,
  htmlText: string,
): Promise<{ markdown: string; html: string }> {
  const out = resolve(outDir);
  const markdown = join(out, 'report.md');
  const html = join(out, 'report.html');
  await writeOut(out, () => mkdir(out, { recursive: true }));
  await writeOut(markdown, () => writeFile(markdown, markdownText));
  await writeOut(html, () => writeFile(html, htmlText));
  return { markdown, html };
}
