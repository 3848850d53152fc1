import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import { uploadChecks } from '../../lib/control/smoke-uploads.ts';
import { type LabStudyOutcome, runLabStudy } from '../../lib/runner/lab-study.ts';
import { SMOKE_REQUEST_FILE, studyDir } from '../../lib/runner/layout.ts';
import type { BenchmarkSpec, StudyPlan } from '../../lib/study/plan.ts';
import { smokePlan } from '../../lib/study/smoke.ts';
import { formatChecklist, type SmokeChecklist } from '../../lib/study/smoke-checklist.ts';
import { armById, targetBaseUrl } from '../../lib/study/topology.ts';
import { calibratedHitRate, type Lab, runnerIn, startLab, stopLabs } from './rehearsal-kit.ts';

/**
 * The smoke study rehearsed with one arm broken on purpose, an EPP that never sees a prompt (its
 * prefix indexer stays at 0): test/runner/smoke-rehearsal.test.ts drives it, and docs/first-run.md
 * shows its checklist (`<!-- example-of: smoke-checklist -->`, made by smokeChecklistExample, kept
 * current by npm run docs:examples and test/docs/examples.test.ts). The fake clock starts at a fixed
 * time and the study id hashes the configuration, so the checklist is the same on every run.
 */

export const BROKEN_ARM = 'epp-completions';
/** Two runs of the full study stand for its hours: the checks must stop it before either. */
export const FULL_RUNS = ['partition', 'arm-epp-completions-prefix'];

function hitRate(spec: BenchmarkSpec): number {
  // The smoke study's replicas-directly run has the partition's shape.
  return spec.id.startsWith('smoke-partition') ? 0.81 : calibratedHitRate(spec);
}

/** A rehearsal lab serving the smoke plan and FULL_RUNS of the full study. */
export async function smokeLab(
  config: LabConfig = defaultLabConfig(),
): Promise<{ lab: Lab; smoke: StudyPlan }> {
  const smoke = smokePlan(config);
  const lab = await startLab({
    config,
    runs: FULL_RUNS,
    alsoServes: smoke.runs,
    cluster: { hitRate, jobSeconds: 40, jobStartSeconds: 20 },
  });
  return { lab, smoke };
}

/** Starts the runner's entry point (smoke or full study, as the host's runner does). */
export function startSmokeOrFull(lab: Lab, smoke: StudyPlan): Promise<LabStudyOutcome> {
  const { deps, options } = runnerIn(lab);
  return runLabStudy(deps, lab.config, { full: lab.plan, smoke }, options);
}

/** The default lab with BROKEN_ARM's EPP broken, after a `lab run --smoke` (the smoke request). */
export async function rehearseBrokenSmoke(): Promise<{
  lab: Lab;
  smoke: StudyPlan;
  done: LabStudyOutcome;
  /** Fake minutes the smoke study took. */
  minutes: number;
}> {
  const { lab, smoke } = await smokeLab();
  lab.pickers.indexerSize[BROKEN_ARM] = 0;
  writeFileSync(join(lab.dir, SMOKE_REQUEST_FILE), '');
  const t0 = lab.clock.ms;
  const done = await startSmokeOrFull(lab, smoke);
  return { lab, smoke, done, minutes: (lab.clock.ms - t0) / 60_000 };
}

/** Where the page's results bucket stands: `lab status` names it from the stack's outputs. */
const EXAMPLE_RESULTS = 's3://llmgatewaylab-results-0123456789ab/LlmGatewayLab/';

/**
 * The page's excerpt of the checklist as `lab status` prints it while the host runs and has not
 * synced yet: the header, the broken arm in full, one passing arm shortened to its prompt proof, and
 * the upload lines. The rehearsal's loopback front end is shown as the in-cluster address the
 * runner uses on a testbed (targetBaseUrl), which is the only thing changed.
 */
export function checklistExcerpt(lab: Lab, checklist: SmokeChecklist, passingArm = 'epp'): string {
  const where = `${EXAMPLE_RESULTS}${studyDir(checklist.studyId)}/`;
  const uploads = uploadChecks(checklist, [], where, true);
  let text = formatChecklist({ ...checklist, host: uploads }).join('\n');
  for (const entry of checklist.entries) {
    if (!entry.subject || entry.subject === 'replicas') continue;
    const arm = armById(lab.config, entry.subject);
    text = text.replaceAll(
      `${lab.frontEnds.url}/${arm.id}`,
      targetBaseUrl(lab.config, { kind: 'arm', arm: arm.id }),
    );
  }
  // Blocks: the header, one per entry (its line and the indented proofs below it), the host's.
  const blocks: string[][] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith(' ') && blocks.length > 0) blocks.at(-1)?.push(line);
    else blocks.push([line]);
  }
  const entryBlock = (subject: string, runId: string) => {
    const block = blocks.find((b) => b[0]?.startsWith(`${subject} (${runId}): `));
    if (!block) throw new Error(`the checklist has no entry for ${subject} (${runId})`);
    return block;
  };
  const broken = checklist.entries.find((e) => e.subject === BROKEN_ARM);
  const passing = checklist.entries.find((e) => e.subject === passingArm);
  if (!broken || !passing) throw new Error(`the checklist has no entry for ${BROKEN_ARM} or ${passingArm}`);
  const passingBlock = entryBlock(passing.subject, passing.runId);
  const host = blocks.find((b) => b[0] === 'host:');
  if (!host) throw new Error('the checklist has no host lines');
  return [
    ...(blocks[0] ?? []),
    ...entryBlock(broken.subject, broken.runId),
    passingBlock[0],
    '  …',
    ...passingBlock.filter((line) => line.includes('front end saw the prompts:')),
    ...host,
  ].join('\n');
}

/** Runs the rehearsal and returns the page's excerpt; leaves no server or folder behind. */
export async function smokeChecklistExample(): Promise<string> {
  const { lab, done } = await rehearseBrokenSmoke();
  try {
    const checklist = done.kind === 'smoke' ? done.outcome.checklist : undefined;
    if (!checklist) throw new Error(`the rehearsal's smoke study wrote no checklist (${done.kind})`);
    return checklistExcerpt(lab, checklist);
  } finally {
    await stopLabs();
    rmSync(lab.dir, { recursive: true, force: true });
    rmSync(`${lab.dir}.token`, { force: true });
  }
}
