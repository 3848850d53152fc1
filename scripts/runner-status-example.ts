/**
 * docs/runner.md's `status.json` (`<!-- example-of: runner-status -->`, npm run docs:examples):
 * what the runner's own studyStatus writes for the default study 14 min 20 s in, seven runs of
 * two minutes each recorded valid and the eighth waiting for its Job for 20 s. The study id,
 * run ids, counts, ETA and progress line are the code's; the times are the example's.
 */
import { defaultLabConfig } from '../lib/config/load.ts';
import { progressLine, studyEtaMs, studyStatus } from '../lib/runner/status.ts';
import { newStudyId } from '../lib/runner/study-id.ts';
import { studyPlan } from '../lib/study/plan.ts';

const START = Date.parse('2025-10-14T09:00:00.000Z');
const RECORDED = 7;
const RUN_MS = 2 * 60_000;
const ELAPSED_MS = 20_000;
const PHASE = 'waiting for job';

export function runnerStatusExample(): string {
  const config = defaultLabConfig();
  const plan = studyPlan(config);
  const current = plan.runs[RECORDED];
  if (!current) throw new Error(`the default study has no run ${RECORDED + 1}`);
  const runStarted = new Date(START + RECORDED * RUN_MS);
  // As the runner's eta(): the recorded runs' durations, and the runs after this one.
  const etaMs = studyEtaMs(
    Array.from({ length: RECORDED }, () => RUN_MS),
    ELAPSED_MS,
    plan.runs.length - (RECORDED + 1),
  );
  const index = RECORDED + 1;
  const status = studyStatus({
    state: 'running',
    studyId: newStudyId(config, new Date(START)),
    studyStartedAt: new Date(START).toISOString(),
    startedAt: new Date(START),
    now: new Date(runStarted.getTime() + ELAPSED_MS),
    runIds: plan.runs.map((run) => run.id),
    records: new Map(plan.runs.slice(0, RECORDED).map((run) => [run.id, { valid: true }])),
    active: { index, run: current, phase: PHASE, startedAt: runStarted },
    elapsedMs: ELAPSED_MS,
    etaMs,
    message: progressLine(index, plan.runs.length, current.id, PHASE, ELAPSED_MS, etaMs),
  });
  return JSON.stringify(status, null, 2);
}
