import type { LabConfig } from '../../config/schema.ts';
import type { NetworkStudyPlan, NetworkStudyRecord } from '../../network/study/model.ts';
import { smokeStudyId } from '../study-id.ts';
import { type NetworkSmokeOutcome, runNetworkSmokeStudy, runNetworkStudy } from './run-network-study.ts';
import type { NetworkRunnerDeps, NetworkRunnerOptions } from './runner-context.ts';

/**
 * What a starting cell runner works on (docs/first-run.md), as the first lab's (lib/runner/lab-study.ts):
 * the cell's smoke study when `lab run --smoke --cell <name>` asked for it, or when `study.profile`
 * is `smoke` and no smoke study of this cell and configuration has finished yet; otherwise the full
 * study, which runs the smoke plan as its checks before its first long run.
 */

/** The two plans the cell's runner carries (runner-files.ts: plan.json and smoke-plan.json). */
export interface NetworkLabPlans {
  readonly full: NetworkStudyPlan;
  readonly smoke: NetworkStudyPlan;
}

export type NetworkLabOutcome =
  | { readonly kind: 'smoke'; readonly outcome: NetworkSmokeOutcome }
  | { readonly kind: 'full'; readonly study: NetworkStudyRecord };

/** Runs the cell's smoke or full study; a stopped smoke study throws its stop after its checklist is written. */
export async function runNetworkLabStudy(
  deps: NetworkRunnerDeps,
  config: LabConfig,
  plans: NetworkLabPlans,
  options: NetworkRunnerOptions = {},
): Promise<NetworkLabOutcome> {
  const why = await smokeWhy(deps, config, plans.full.cell);
  if (why === undefined) {
    return {
      kind: 'full',
      study: await runNetworkStudy(deps, config, plans.full, options, { checks: plans.smoke }),
    };
  }
  deps.log(`smoke study of cell ${plans.smoke.cell}: ${why}`);
  const outcome = await runNetworkSmokeStudy(deps, config, plans.smoke, options);
  if (outcome.error) throw outcome.error;
  return { kind: 'smoke', outcome };
}

/** Why this runner runs the smoke study, or undefined for the full study. The request is taken. */
async function smokeWhy(
  deps: NetworkRunnerDeps,
  config: LabConfig,
  cell: string,
): Promise<string | undefined> {
  if (await deps.store.takeSmokeRequest()) return 'lab run --smoke asked for it';
  if (config.study.profile !== 'smoke') return undefined;
  // A smoke study's id ends with the hash of its configuration marked as smoke (study-id.ts).
  const hash = smokeStudyId(config, new Date(0)).slice(-8);
  const { studies } = await deps.store.listStudies();
  const done = studies.some(
    (s) => s.profile === 'smoke' && s.cell === cell && s.state === 'finished' && s.studyId.endsWith(hash),
  );
  return done
    ? undefined
    : `study.profile is smoke and no smoke study of cell ${cell} with this configuration has finished`;
}
