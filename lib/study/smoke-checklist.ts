import type { LabConfig } from '../config/schema.ts';
import type { StudyRun } from './plan.ts';
import type { RunRecord } from './results.ts';
import { armById } from './topology.ts';
import { promptEvidenceSource } from './validity.ts';

/**
 * The smoke study's checklist (docs/first-run.md): per run of the smoke plan (the replicas
 * directly, each arm), per run-time proof the full study relies on, pass or fail with the
 * evidence and the fix. It is judged from the run records alone, the same records and reasons
 * the full study keeps, so the checklist cannot pass where a full run would be invalid. Nothing
 * stops it: every run of the smoke plan has its own line.
 */

/** The proofs, in the order a run meets them (run-pipeline.ts). */
export const PROOFS = [
  'ready',
  'preflight',
  'reset',
  'staging',
  'metrics',
  'job',
  'result',
  'requests',
  'ignore-eos',
  'prompt',
  'scorer',
  'other',
] as const;
export type Proof = (typeof PROOFS)[number];

/** What each proof shows, as the checklist names it. */
export const PROOF_TITLES: Readonly<Record<Proof, string>> = {
  ready: 'replicas and front end ready',
  preflight: "front end's preflight",
  reset: 'verified cache reset',
  staging: 'staged client and its gate',
  metrics: '/metrics before and after',
  job: 'client Job succeeded',
  result: 'result file parsed',
  requests: 'every request served and counted',
  'ignore-eos': '--ignore-eos in effect',
  prompt: 'front end saw the prompts',
  scorer: "llm-d's precise scorer matched",
  other: 'other checks',
};

/** What to do when a proof fails; the evidence says what happened. */
export const PROOF_FIXES: Readonly<Record<Proof, string>> = {
  ready:
    'lab logs front-end <arm> and lab logs replica <n> show why it was not serving; a front end that crashes needs its image or settings fixed',
  preflight:
    "the front end's route does not reach a replica of its server set: check its Service, HTTPRoute/Gateway status (kubectl get httproute,gateway -A) and lab logs front-end <arm>",
  reset:
    'vLLM must run with VLLM_SERVER_DEV_MODE=1 (POST /reset_prefix_cache) and the runner must read its log (Role pods/log get); lab logs replica <n>',
  staging:
    'the benchmark client must wait at its closed gate (--ready-check-timeout-sec of vllm bench serve); if it cannot, set runner.stageNextRun: false',
  metrics:
    'vLLM must run without --disable-log-stats and the runner must reach its port (the replicas headless Service); lab logs runner',
  job: 'lab logs job <run-id> shows why the client failed (image pull, dataset path, an error from the front end)',
  result:
    "the client must write --result-filename into its output folder (the Job's results mount on the runner's node); lab logs job <run-id>",
  requests:
    'some requests failed or went elsewhere: lab logs job <run-id> shows the failures; a front end that sends requests outside its server set is misconfigured',
  'ignore-eos':
    'benchmark.image must pass --ignore-eos to vllm bench serve (docs/facts.md §3.8); a request ending on EOS does less work than the others',
  prompt:
    "the Endpoint Picker indexed nothing: its scheduler config needs prefix-cache-scorer and the arm must send prompts over /v1/completions; lab logs front-end <arm>, and the runner's metrics ClusterRole for the EPP's /metrics",
  scorer:
    "llm-d's precise scorer must find the replicas' KV blocks: its block size, hash seed, hash algorithm and KV-event topic model name must equal vLLM's, and the EPP must log at --v 4 (\"Got pod scores\", docs/facts.md §3.7) for the runner to see it; lab logs front-end <arm>",
  other: 'see the evidence; lab logs runner has the whole run',
};

/**
 * `pass`/`fail`: judged. `warn`: judged as far as the evidence goes, which was not enough to tell
 * (llm-d's scorer logging below --v 4): not a failure, shown with its fix. `not-collected`: the runner records no evidence for it here (said why),
 * not judged either way. `not-applicable`: this run has no such proof (a chat arm's prompt-blind
 * control, the first run's staging). `not-reached`: the run stopped at an earlier proof.
 */
export type ProofStatus = 'pass' | 'fail' | 'warn' | 'not-collected' | 'not-applicable' | 'not-reached';

/**
 * One proof of one entry. `P` is the lab's proof names: the LLM-gateway lab's PROOFS, or the
 * network lab's (lib/network/study/smoke-checklist.ts), which name themselves with `title`.
 */
export interface ProofCheck<P extends string = Proof> {
  readonly proof: P;
  readonly status: ProofStatus;
  readonly evidence: string;
  /** Present when the proof failed. */
  readonly fix?: string;
  /** How the checklist names the proof; absent for PROOFS, whose names are PROOF_TITLES. */
  readonly title?: string;
}

export interface ChecklistEntry<P extends string = Proof> {
  /** The arm, or `replicas` for the replicas directly (the network lab: the experiment and arm, or `cell`). */
  readonly subject: string;
  readonly runId: string;
  readonly title: string;
  readonly checks: readonly ProofCheck<P>[];
}

/** One check the host makes after the runner (the results and log uploads to S3), filled in later. */
export interface HostCheck {
  readonly check: string;
  readonly status: 'pass' | 'fail' | 'pending';
  readonly evidence: string;
  readonly fix?: string;
}

export interface SmokeChecklist<P extends string = Proof> {
  /** The smoke study whose records it judges (`studies/<id>/`). */
  readonly studyId: string;
  /** The network lab: the cell whose smoke study this is (each cell has its own host and checklist). */
  readonly cell?: string;
  readonly writtenAt: string;
  /** No proof failed and the smoke study was not stopped. */
  readonly passed: boolean;
  readonly entries: readonly ChecklistEntry<P>[];
  /** Why the smoke study stopped before its last run (every run left is `not-reached`). */
  readonly stopped?: string;
  /** Filled in by `lab status` from S3: the uploads the runner cannot see. */
  readonly host?: readonly HostCheck[];
}

/** A checklist of either lab, as status.json carries it and `lab status` prints it. */
export type AnyChecklist = SmokeChecklist<string>;

/** How the checklist names a proof. */
export function proofTitle(check: ProofCheck<string>): string {
  return check.title ?? PROOF_TITLES[check.proof as Proof] ?? check.proof;
}

/** Which proof an invalid reason belongs to (the reasons of validity.ts and run-pipeline.ts). */
export function proofOfReason(reason: string): Proof {
  const notStarted = reason.startsWith('not started: ');
  const text = notStarted ? reason.slice('not started: '.length) : reason;
  if (notStarted) {
    if (text.startsWith('preflight failed')) return 'preflight';
    if (text.includes('prefix cache reset not verified')) return 'reset';
    if (text.includes('/metrics could not be read')) return 'metrics';
    return 'ready';
  }
  if (text.includes('result file')) return 'result';
  if (/^client \S+: Job /.test(text)) return 'job';
  if (/completed \d+ of \d+ prompts/.test(text) || /served \d+ requests/.test(text)) return 'requests';
  if (text.includes('restarted during the run')) return 'ready';
  if (text.includes('/metrics') || text.includes('counter went backwards')) return 'metrics';
  if (text.includes('finished with reason "stop"')) return 'ignore-eos';
  if (text.startsWith('front end did not see the prompts')) return 'prompt';
  if (text.startsWith("llm-d's precise scorer")) return 'scorer';
  if (text.includes('cache was not reset') || text.includes('reset')) return 'reset';
  return 'other';
}

/** The checklist of a smoke study from its plan and records; `stopped` when the study stopped early. */
export function smokeChecklist(
  config: LabConfig,
  runs: readonly StudyRun[],
  records: ReadonlyMap<string, RunRecord>,
  studyId: string,
  writtenAt: Date,
  stopped?: string,
): SmokeChecklist {
  const entries = runs.map((run, i) => entryOf(config, run, records.get(run.id), i === 0, stopped));
  const failed = entries.some((e) => e.checks.some((c) => c.status === 'fail'));
  return {
    studyId,
    writtenAt: writtenAt.toISOString(),
    passed: !failed && stopped === undefined,
    entries,
    ...(stopped !== undefined ? { stopped } : {}),
  };
}

/** Every failed proof as `<run>: <proof>: <evidence>`, for a stop's reason. */
export function checklistFailures(checklist: AnyChecklist): string[] {
  return checklist.entries.flatMap((e) =>
    e.checks
      .filter((c) => c.status === 'fail')
      .map(
        (c) => `${e.subject}${e.runId.endsWith('-b') ? ' (pair b)' : ''}: ${proofTitle(c)}: ${c.evidence}`,
      ),
  );
}

function entryOf(
  config: LabConfig,
  run: StudyRun,
  record: RunRecord | undefined,
  first: boolean,
  stopped: string | undefined,
): ChecklistEntry {
  const subject = run.arm ?? 'replicas';
  const head = { subject, runId: run.id, title: run.title };
  if (!record) {
    const why = stopped ? `not run: the smoke study stopped (${stopped})` : 'not run';
    return {
      ...head,
      checks: PROOFS.filter((p) => p !== 'other').map((proof) => ({
        proof,
        status: 'not-reached',
        evidence: why,
      })),
    };
  }
  const byProof = new Map<Proof, string[]>();
  for (const reason of record.invalidReasons) {
    const proof = proofOfReason(reason);
    byProof.set(proof, [...(byProof.get(proof) ?? []), reason]);
  }
  // A run that was not started stopped at its first failing proof: nothing after it ran.
  const notStarted = record.invalidReasons.find((r) => r.startsWith('not started: '));
  const stopAt = notStarted ? PROOFS.indexOf(proofOfReason(notStarted)) : PROOFS.length;
  const checks: ProofCheck[] = [];
  for (const [index, proof] of PROOFS.entries()) {
    const reasons = byProof.get(proof);
    if (reasons) {
      checks.push({ proof, status: 'fail', evidence: reasons.join('; '), fix: fixFor(proof, run) });
    } else if (index > stopAt) {
      if (proof !== 'other')
        checks.push({
          proof,
          status: 'not-reached',
          evidence: `not reached: the run stopped at "${PROOF_TITLES[PROOFS[stopAt]]}"`,
        });
    } else if ((proof === 'requests' || proof === 'ignore-eos') && byProof.has('metrics')) {
      // Both are judged from the scrapes before and after; without them they are not judged.
      checks.push({
        proof,
        status: 'not-collected',
        evidence: 'not judged: a scrape of /metrics is missing',
      });
    } else if (proof !== 'other') {
      checks.push({ proof, ...passed(config, proof, run, record, first) });
    }
  }
  return { ...head, checks };
}

/** The fix of a proof, with the arm and run put in. */
function fixFor(proof: Proof, run: StudyRun): string {
  return PROOF_FIXES[proof].replaceAll('<arm>', run.arm ?? 'replicas').replaceAll('<run-id>', run.id);
}

/** A proof with no failing reason: its evidence from the record, or why it is not judged here. */
function passed(
  config: LabConfig,
  proof: Exclude<Proof, 'other'>,
  run: StudyRun,
  r: RunRecord,
  first: boolean,
): Omit<ProofCheck, 'proof'> {
  switch (proof) {
    case 'ready':
      return { status: 'pass', evidence: 'the replicas served /v1/models and the front end was available' };
    case 'preflight':
      if (!run.arm) return { status: 'not-applicable', evidence: 'the replicas directly have no front end' };
      return r.preflight
        ? { status: r.preflight.ok ? 'pass' : 'fail', evidence: r.preflight.detail }
        : { status: 'not-applicable', evidence: 'an arm’s preflight is once, recorded with its first run' };
    case 'reset': {
      const resets = r.resets ?? [];
      if (resets.length === 0) return { status: 'not-collected', evidence: 'the record lists no reset' };
      return {
        status: 'pass',
        evidence: resets.map((x) => `${x.pod} ${x.verifiedBy}`).join(', '),
      };
    }
    case 'staging':
      return stagingCheck(config, r, first);
    case 'metrics':
      return {
        status: 'pass',
        evidence: `vllm: series on every replica before and after (${r.replicas.map((x) => `${x.pod} ${x.vllmSeries}`).join(', ')})`,
      };
    case 'job':
      return { status: 'pass', evidence: r.clients.map((c) => `${c.benchmarkId} ${c.job}`).join(', ') };
    case 'result':
      return {
        status: 'pass',
        evidence: r.clients
          .map((c) => `${c.resultFile}: completed ${c.result?.completed ?? '?'} of ${c.prompts}`)
          .join(', '),
      };
    case 'requests': {
      const total = r.replicas.reduce((s, x) => s + x.requests, 0);
      return {
        status: 'pass',
        evidence: `replicas served ${total} requests (${r.replicas.map((x) => `${x.pod} ${x.requests}`).join(', ')}), expected ${run.expectedRequests}`,
      };
    }
    case 'ignore-eos':
      return {
        status: 'pass',
        evidence: 'no request finished with reason "stop": every one ran to its output length',
      };
    case 'prompt':
      return promptCheck(config, run, r);
    case 'scorer':
      return scorerCheck(config, run, r);
  }
}

/**
 * llm-d's precise scorer (`scorerEvidence`, lib/study/precise-evidence.ts): recorded on llm-d
 * prefix runs over /v1/completions. Never matched fails (the run is invalid too); a log that cannot
 * show it (below --v 4) is a warning with its fix, never a pass.
 */
function scorerCheck(config: LabConfig, run: StudyRun, r: RunRecord): Omit<ProofCheck, 'proof'> {
  const arm = run.arm === undefined ? undefined : armById(config, run.arm);
  if (!arm || promptEvidenceSource(arm.frontEnd, arm.api, run.dataset) !== 'llmd-kv-index')
    return {
      status: 'not-applicable',
      evidence: "only llm-d prefix runs over /v1/completions have the precise scorer's look-ups to judge",
    };
  const e = r.scorerEvidence;
  if (!e)
    return { status: 'not-collected', evidence: "the runner recorded no look-ups of llm-d's precise scorer" };
  const fix = PROOF_FIXES.scorer.replaceAll('<arm>', arm.id);
  if (e.verdict === 'matched') {
    const pods = Object.entries(e.podsWithBlocks)
      .map(([pod, n]) => `${pod} ${n}`)
      .join(', ');
    return {
      status: 'pass',
      evidence: `${e.lookupsWithBlocks} of ${e.lookups} look-ups found blocks (${pods})`,
    };
  }
  if (e.verdict === 'never-matched') return { status: 'fail', evidence: e.message, fix };
  return { status: 'warn', evidence: `not observable: ${e.message}`, fix };
}

function stagingCheck(config: LabConfig, r: RunRecord, first: boolean): Omit<ProofCheck, 'proof'> {
  if (!config.runner.stageNextRun)
    return {
      status: 'not-applicable',
      evidence: 'runner.stageNextRun is false: clients start with their run',
    };
  const s = r.staging;
  if (!s) {
    return first
      ? { status: 'not-applicable', evidence: 'the first run is never staged' }
      : {
          status: 'not-collected',
          evidence: 'this run was not staged (the run before it ended before staging it)',
        };
  }
  if (s.fellBack)
    return {
      status: 'fail',
      evidence: `staged during ${s.during}, but fell back: ${s.fellBack}`,
      fix: PROOF_FIXES.staging,
    };
  return {
    status: 'pass',
    evidence: `staged during ${s.during}; gate${Object.keys(s.gates).length > 1 ? 's' : ''} ${Object.keys(s.gates).join(', ')} opened at ${s.gatesOpenedAt ?? '?'}`,
  };
}

function promptCheck(config: LabConfig, run: StudyRun, r: RunRecord): Omit<ProofCheck, 'proof'> {
  if (!run.arm) return { status: 'not-applicable', evidence: 'the replicas directly have no front end' };
  const arm = armById(config, run.arm);
  const source = promptEvidenceSource(arm.frontEnd, arm.api, run.dataset);
  if (!source) {
    return {
      status: 'not-applicable',
      evidence:
        arm.frontEnd === 'epp' || arm.frontEnd === 'ai-gateway' || arm.frontEnd === 'llmd'
          ? `a ${arm.api} ${run.dataset} run is the prompt-blind control: no evidence is expected`
          : `the ${arm.id} front end keeps no prompt index the runner reads`,
    };
  }
  const e = r.promptEvidence;
  if (!e)
    return { status: 'not-collected', evidence: `the runner recorded no ${source} evidence for this run` };
  if (e.status === 'seen') return { status: 'pass', evidence: `${e.component}: ${e.detail}` };
  if (e.status === 'unavailable') return { status: 'not-collected', evidence: `${e.component}: ${e.detail}` };
  return { status: 'fail', evidence: `${e.component}: ${e.detail}`, fix: PROOF_FIXES.prompt };
}

const MARKS: Readonly<Record<ProofStatus | HostCheck['status'], string>> = {
  pass: 'PASS',
  fail: 'FAIL',
  warn: 'WARN',
  'not-collected': 'not collected',
  'not-applicable': 'n/a',
  'not-reached': 'not reached',
  pending: 'pending',
};

/** The checklist as `lab status` prints it and `smoke-checklist.txt` holds it: failures with their fix. */
export function formatChecklist(checklist: AnyChecklist): string[] {
  const lines = [
    `smoke checklist of study ${checklist.studyId}${checklist.cell ? ` of cell ${checklist.cell}` : ''} (${checklist.writtenAt}): ${checklist.passed ? 'every proof passed' : 'FAILED'}`,
  ];
  if (checklist.stopped) lines.push(`  the smoke study stopped: ${checklist.stopped}`);
  for (const entry of checklist.entries) {
    const failed = entry.checks.filter((c) => c.status === 'fail').length;
    const warned = entry.checks.filter((c) => c.status === 'warn').length;
    lines.push(
      `${entry.subject} (${entry.runId}): ${failed === 0 ? 'ok' : `${failed} failed`}${warned > 0 ? `, ${warned} warning${warned > 1 ? 's' : ''}` : ''}`,
    );
    for (const c of entry.checks) {
      lines.push(`  ${MARKS[c.status].padEnd(13)} ${proofTitle(c)}: ${c.evidence}`);
      if (c.fix) lines.push(`  ${''.padEnd(13)} fix: ${c.fix}`);
    }
  }
  if (checklist.host) {
    lines.push('host:');
    for (const c of checklist.host) {
      lines.push(`  ${MARKS[c.status].padEnd(13)} ${c.check}: ${c.evidence}`);
      if (c.fix) lines.push(`  ${''.padEnd(13)} fix: ${c.fix}`);
    }
  }
  return lines;
}
