import type { StudyStopVerdict } from '../study/validity.ts';

/** A study-level check proved the rest of the study cannot be valid: stop before spending more. */
export class StudyStopError extends Error {
  constructor(readonly verdict: StudyStopVerdict) {
    super(`${verdict.reason}. To change: ${verdict.change}`);
    this.name = 'StudyStopError';
  }
}
