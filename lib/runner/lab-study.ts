import type { LabConfig } from '../config/schema.ts';
import type { StudyPlan } from '../study/plan.ts';
import type { StudyRecord } from '../study/results.ts';
import type { RunnerDeps } from './ports.ts';
import { type RunnerOptions, runSmokeStudy, runStudy, type SmokeOutcome } from './run-study.ts';
import { canonicalJson } from './study-id.ts';

/**
 * What a starting runner works on (docs/first-run.md): the smoke study when `lab run --smoke` asked
 * for it, or when `study.profile` is `smoke` and no smoke study of this configuration has finished
 * yet; otherwise the full study, which checks every arm with the smoke plan before its first long
 * run. So a smoke-profile deploy runs the smoke study by itself, and the `lab run` after it starts
 * the full study.
 */

/** The two plans the runner carries (runner-files.ts: plan.json and smoke-plan.json). */
export interface LabPlans {
  readonly full: StudyPlan;
  readonly smoke: StudyPlan;
}

export type LabStudyOutcome =
  | { readonly kind: 'smoke'; readonly outcome: SmokeOutcome }
  | { readonly kind: 'full'; readonly study: StudyRecord };

/** Runs the smoke or the full study; a stopped smoke study throws its stop after its checklist is written. */
export async function runLabStudy(
  deps: RunnerDeps,
  config: LabConfig,
  plans: LabPlans,
  options: RunnerOptions = {},
): Promise<LabStudyOutcome> {
  const why = await smokeWhy(deps, config);
  if (why === undefined) {
    return {
      kind: 'full',
      study: await runStudy(deps, config, plans.full, options, { checks: plans.smoke }),
    };
  }
  deps.log(`smoke study: ${why}`);
  const outcome = await runSmokeStudy(deps, config, plans.smoke, options);
  if (outcome.error) throw outcome.error;
  return { kind: 'smoke', outcome };
}

/** Why this runner runs the smoke study, or undefined for the full study. The request is taken. */
async function smokeWhy(deps: RunnerDeps, config: LabConfig): Promise<string | undefined> {
  if (await deps.store.takeSmokeRequest()) return 'lab run --smoke asked for it';
  if (config.study.profile !== 'smoke') return undefined;
  const same = canonicalJson(config);
  const { studies } = await deps.store.listStudies();
  const done = studies.some(
    (s) =>
      s.metadata.profile === 'smoke' && s.metadata.finishedAt && canonicalJson(s.metadata.config) === same,
  );
  return done ? undefined : 'study.profile is smoke and no smoke study of this configuration has finished';
}
