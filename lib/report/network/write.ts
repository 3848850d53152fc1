import type { NetworkStudyRecord } from '../../network/study/model.ts';
import { type WrittenReport, writeReportFiles } from '../write.ts';
import { loadNetworkStudies } from './load.ts';
import { networkHtmlReport, networkMarkdownReport } from './render.ts';
import { type NetworkReportOptions, networkReportTables } from './tables.ts';

/** The banner of a network report: cells whose study is still running, failed, or holds no run. */
export function networkStudyBanner(studies: readonly NetworkStudyRecord[]): string | undefined {
  const notes = studies.flatMap((s) => {
    if (s.state === 'failed') {
      return [
        `cell ${s.cell}'s study failed${s.error ? ` (${s.error})` : ''} after ${s.runs.length} run record(s)`,
      ];
    }
    if (s.state === 'interrupted') {
      return [
        `cell ${s.cell}'s study was interrupted by the Kubernetes API${s.error ? ` (${s.error})` : ''} after ${s.runs.length} run record(s)`,
      ];
    }
    if (s.state === 'running')
      return [`cell ${s.cell}'s study is still running (${s.runs.length} run record(s) so far)`];
    return s.runs.length === 0 ? [`cell ${s.cell}'s study holds no run`] : [];
  });
  if (notes.length === 0) return undefined;
  return (
    `Partial study: ${notes.join('; ')}. The tables cover only the recorded runs; lab run resumes a study, ` +
    'skipping every run that already has a valid record.'
  );
}

export interface WrittenNetworkReport extends Omit<WrittenReport, 'study'> {
  readonly studies: readonly string[];
}

/**
 * Reads the cells' network study files and writes `report.md` and `report.html` into `outDir`.
 * The study files are only read, never rewritten. `options.baselineCell` names the cell the
 * others are compared with (`BaselineError` when the studies hold no such cell).
 */
export async function writeNetworkReport(
  files: readonly string[],
  outDir: string,
  options: NetworkReportOptions = {},
): Promise<WrittenNetworkReport> {
  const studies = await loadNetworkStudies(files);
  const tables = networkReportTables(studies, options);
  const banner = networkStudyBanner(studies);
  const heading = { sources: files, ...(banner ? { banner } : {}) };
  const written = await writeReportFiles(
    outDir,
    networkMarkdownReport(tables, heading),
    await networkHtmlReport(tables, heading),
  );
  return { studies: files, ...written, ...(banner ? { banner } : {}) };
}
