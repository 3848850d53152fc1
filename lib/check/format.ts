import type { CheckReport } from './check.ts';
import { lessonLabel, type Note, type Violation } from './violation.ts';

/** Text output of `lab check`: one line per finding, then a summary. */

const LABEL_WIDTH = 10;

function label(lesson: number): string {
  return lessonLabel(lesson).padEnd(LABEL_WIDTH);
}

const where = (file: string | undefined) => (file ? `  (${file})` : '');

/** `lesson 3  StatefulSet vllm/qwen3  spec...args: --disable-log-stats ...  (dist/20-model-servers.yaml)` */
export function formatViolation(v: Violation): string {
  return `${label(v.lesson)}${v.object}  ${v.field}: ${v.message}${where(v.file)}`;
}

export function formatNote(n: Note): string {
  return `${'note'.padEnd(LABEL_WIDTH)}${n.object}: ${n.message}${where(n.file)}`;
}

export function summarize(report: CheckReport, objects: number, files: number): string {
  const scanned = `${objects} object${objects === 1 ? '' : 's'} in ${files} file${files === 1 ? '' : 's'}`;
  const notes =
    report.notes.length > 0 ? `; ${report.notes.length} note${report.notes.length === 1 ? '' : 's'}` : '';
  if (report.violations.length === 0) return `lab check: ${scanned}, no violations${notes}`;
  const counts = new Map<string, number>();
  for (const v of report.violations) {
    const key = lessonLabel(v.lesson);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const byLesson = [...counts].map(([key, count]) => `${key}: ${count}`).join(', ');
  const total = report.violations.length;
  return `lab check: ${total} violation${total === 1 ? '' : 's'} (${byLesson}) in ${scanned}${notes}`;
}
