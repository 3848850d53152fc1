import { formatElapsed, formatEta, type StudyState, type StudyStatus } from '../runner/status.ts';

const STATES: readonly StudyState[] = ['starting', 'running', 'finished', 'failed', 'interrupted'];

/** Reads status.json as the runner writes it (lib/runner/status.ts); undefined if it is not that. */
export function parseStudyStatus(text: string): StudyStatus | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const s = value as Record<string, unknown>;
  const numbers = ['totalRuns', 'recordedRuns', 'validRuns', 'invalidRuns'];
  if (!STATES.includes(s.state as StudyState)) return undefined;
  if (!numbers.every((key) => typeof s[key] === 'number')) return undefined;
  if (typeof s.startedAt !== 'string' || typeof s.updatedAt !== 'string') return undefined;
  return value as StudyStatus;
}

function ago(ms: number): string {
  return `${formatElapsed(ms)} ago`;
}

/**
 * The progress of a study in lines: state, runs recorded / valid / invalid of the total, the
 * current run and its phase, elapsed time, ETA and the last message.
 */
export function formatStudyStatus(status: StudyStatus, now: Date): string[] {
  const started = Date.parse(status.startedAt);
  const updated = Date.parse(status.updatedAt);
  const over = status.state === 'finished' || status.state === 'failed' || status.state === 'interrupted';
  const lines = [
    `state:     ${status.state} (status.json updated ${status.updatedAt}, ${ago(now.getTime() - updated)})`,
    `runs:      ${status.recordedRuns} of ${status.totalRuns} recorded: ${status.validRuns} valid, ${status.invalidRuns} invalid`,
  ];
  if (status.current) {
    const c = status.current;
    lines.push(
      `current:   run ${c.index}/${status.totalRuns} ${c.id}: ${c.phase} (run elapsed ${formatElapsed(c.elapsedSeconds * 1000)})`,
    );
  }
  const elapsedMs = (over ? updated : now.getTime()) - started;
  lines.push(`elapsed:   ${formatElapsed(elapsedMs)} since the runner started at ${status.startedAt}`);
  if (!over) {
    lines.push(
      `ETA:       ${status.etaSeconds === undefined ? 'unknown until a run has finished' : formatEta(status.etaSeconds * 1000)}`,
    );
  }
  lines.push(`message:   ${status.message}`);
  if (status.error) lines.push(`error:     ${status.error}`);
  return lines;
}
