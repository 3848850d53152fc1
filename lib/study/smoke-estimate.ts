import type { LabConfig } from '../config/schema.ts';
import { DEFAULT_RUN_OVERHEADS, estimateStudy, type StudyEstimate } from './duration.ts';
import { smokePlan, smokeWorkload } from './smoke.ts';

/** The smoke study's target for the default lab: at most this long after the bootstrap (docs/first-run.md). */
export const SMOKE_TARGET_MINUTES = 10;

/**
 * The smoke study's duration and cost, estimated as the full study's are (lib/study/duration.ts),
 * from its own plan and its tiny workload, on the same hosts at the same price.
 */
export function estimateSmoke(config: LabConfig, pricePerHourUsd: number): StudyEstimate {
  const tiny: LabConfig = { ...config, workload: smokeWorkload(config) };
  return estimateStudy(tiny, smokePlan(config), DEFAULT_RUN_OVERHEADS, pricePerHourUsd);
}

const minutes = (seconds: number) => `${(seconds / 60).toFixed(1)} min`;

/**
 * The smoke study beside the full study, as `lab plan` prints it: its own time and cost, and the
 * full study's with the smoke checks it begins with.
 */
export function formatSmokeEstimate(smoke: StudyEstimate, full: StudyEstimate): string {
  const over =
    smoke.totalSeconds > SMOKE_TARGET_MINUTES * 60 ? ` (over the ${SMOKE_TARGET_MINUTES}-minute target)` : '';
  return [
    `Smoke study (lab run --smoke, or study.profile: smoke): ${smoke.runs.length} tiny runs, every arm once, ${minutes(smoke.totalSeconds)} after the bootstrap${over}, about ${smoke.costUsd.toFixed(2)} USD`,
    `  the full study begins with the same checks: ${minutes(smoke.totalSeconds + full.totalSeconds)} in all, about ${(smoke.costUsd + full.costUsd).toFixed(2)} USD`,
    '',
  ].join('\n');
}
