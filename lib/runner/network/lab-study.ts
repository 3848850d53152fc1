import type { LabConfig } from '../../config/schema.ts';
import type { NetworkStudyPlan, NetworkStudyRecord } from '../../network/study/model.ts';
import { type PlansOf, runSmokeOrFull, type StudyOutcomeOf } from '../smoke-or-full.ts';
import { smokeStudyId } from '../study-id.ts';
import { type NetworkSmokeOutcome, runNetworkSmokeStudy, runNetworkStudy } from './run-network-study.ts';
import type { NetworkRunnerDeps, NetworkRunnerOptions } from './runner-context.ts';

/**
 * What a starting cell runner works on, as the first lab's (smoke-or-full.ts, docs/first-run.md):
 * the cell's smoke study when `lab run --smoke --cell <name>` asked for it, or when `study.profile`
 * is `smoke` and no smoke study of this cell and configuration has finished yet; otherwise the full
 * study, which runs the smoke plan as its checks before its first long run.
 */

/** The two plans the cell's runner carries (runner-files.ts: plan.json and smoke-plan.json). */
export type NetworkLabPlans = PlansOf<NetworkStudyPlan>;

export type NetworkLabOutcome = StudyOutcomeOf<NetworkSmokeOutcome, NetworkStudyRecord>;

/** Runs the cell's smoke or full study; a stopped smoke study throws its stop after its checklist is written. */
export function runNetworkLabStudy(
  deps: NetworkRunnerDeps,
  config: LabConfig,
  plans: NetworkLabPlans,
  options: NetworkRunnerOptions = {},
): Promise<NetworkLabOutcome> {
  const cell = plans.full.cell;
  // A smoke study's id ends with the hash of its configuration marked as smoke (study-id.ts).
  const hash = smokeStudyId(config, new Date(0)).slice(-8);
  return runSmokeOrFull({
    config,
    plans,
    store: deps.store,
    finishedSmoke: (s) =>
      s.profile === 'smoke' && s.cell === cell && s.state === 'finished' && s.studyId.endsWith(hash),
    noneFinished: `study.profile is smoke and no smoke study of cell ${cell} with this configuration has finished`,
    smokeLine: (why) => `smoke study of cell ${plans.smoke.cell}: ${why}`,
    log: (line) => deps.log(line),
    runFull: (full, checks) => runNetworkStudy(deps, config, full, options, { checks }),
    runSmoke: (smoke) => runNetworkSmokeStudy(deps, config, smoke, options),
  });
}
