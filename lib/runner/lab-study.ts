import type { LabConfig } from '../config/schema.ts';
import type { StudyPlan } from '../study/plan.ts';
import type { StudyRecord } from '../study/results.ts';
import type { RunnerDeps } from './ports.ts';
import { type RunnerOptions, runSmokeStudy, runStudy, type SmokeOutcome } from './run-study.ts';
import { type PlansOf, runSmokeOrFull, type StudyOutcomeOf } from './smoke-or-full.ts';
import { canonicalJson } from './study-id.ts';

/**
 * What the first lab's starting runner works on (smoke-or-full.ts, docs/first-run.md): a
 * smoke-profile deploy runs the smoke study by itself, and the `lab run` after it starts the full
 * study, which checks every arm with the smoke plan before its first long run.
 */

/** The two plans the runner carries (runner-files.ts: plan.json and smoke-plan.json). */
export type LabPlans = PlansOf<StudyPlan>;

export type LabStudyOutcome = StudyOutcomeOf<SmokeOutcome, StudyRecord>;

/** Runs the smoke or the full study; a stopped smoke study throws its stop after its checklist is written. */
export function runLabStudy(
  deps: RunnerDeps,
  config: LabConfig,
  plans: LabPlans,
  options: RunnerOptions = {},
): Promise<LabStudyOutcome> {
  const same = canonicalJson(config);
  return runSmokeOrFull({
    config,
    plans,
    store: deps.store,
    finishedSmoke: (s) =>
      s.metadata.profile === 'smoke' &&
      Boolean(s.metadata.finishedAt) &&
      canonicalJson(s.metadata.config) === same,
    noneFinished: 'study.profile is smoke and no smoke study of this configuration has finished',
    smokeLine: (why) => `smoke study: ${why}`,
    log: (line) => deps.log(line),
    runFull: (full, checks) => runStudy(deps, config, full, options, { checks }),
    runSmoke: (smoke) => runSmokeStudy(deps, config, smoke, options),
  });
}
