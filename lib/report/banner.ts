import { studyPlan } from '../study/plan.ts';
import type { StudyRecord } from '../study/results.ts';

/** How much of its plan a study recorded: the report's banner says so when it is not all. */
export interface StudyCompleteness {
  /** Runs of the plan of the study's own configuration (metadata.config). */
  readonly planned: number;
  /** Planned runs with a record (valid or invalid). */
  readonly recorded: number;
  readonly valid: number;
  readonly invalid: number;
  /** Planned runs without a record, in plan order. */
  readonly missing: readonly string[];
}

/** Reads the plan from the configuration the study ran with, and checks each run for a record. */
export function studyCompleteness(study: StudyRecord): StudyCompleteness {
  const planned = studyPlan(study.metadata.config).runs.map((run) => run.id);
  // A resumed study may hold an invalid attempt and a later valid one: the run counts once, as valid if any attempt is.
  const validity = new Map<string, boolean>();
  for (const run of study.runs) validity.set(run.id, validity.get(run.id) === true || run.valid);
  const recorded = planned.filter((id) => validity.has(id));
  const valid = recorded.filter((id) => validity.get(id)).length;
  return {
    planned: planned.length,
    recorded: recorded.length,
    valid,
    invalid: recorded.length - valid,
    missing: planned.filter((id) => !validity.has(id)),
  };
}

/** Missing run ids named in the banner; the rest are counted. */
const NAMED_MISSING = 12;

/** The banner above the report's tables, or undefined when every planned run has a record. */
export function studyBanner(c: StudyCompleteness): string | undefined {
  if (c.missing.length === 0) return undefined;
  if (c.recorded === 0) {
    return `Empty study: none of the ${c.planned} planned runs has a record yet, so every table below is empty and no comparison can be made. Run the study (lab run), then make the report again.`;
  }
  const named = c.missing.slice(0, NAMED_MISSING).join(', ');
  const more = c.missing.length > NAMED_MISSING ? ` and ${c.missing.length - NAMED_MISSING} more` : '';
  return (
    `Partial study: ${c.recorded} of ${c.planned} planned runs recorded (${c.valid} valid, ${c.invalid} invalid). ` +
    `Missing ${c.missing.length}: ${named}${more}. The tables and comparisons below cover only the recorded runs; ` +
    'lab run resumes the study, skipping every run that already has a valid record.'
  );
}
