import { KUBECONFIG_PATH, READY_MARKER, RESULTS_SYNC_SCRIPT } from '../aws/bootstrap/bootstrap.ts';
import { BOOTSTRAP_LOG, MANIFESTS_DIR, shellQuote } from '../aws/bootstrap/shell.ts';
import type { LabConfig } from '../config/schema.ts';
import { NETWORK_RUNNER_NAME, PLAIN_NAMESPACE } from '../network/topology.ts';
import {
  NEW_STUDY_REQUEST_FILE,
  REDO_INVALID_REQUEST_FILE,
  SMOKE_REQUEST_FILE,
  STATUS_FILE,
} from '../runner/layout.ts';
import {
  RESULTS_HOST_PATH,
  RUNNER_ON_DEMAND_DIR,
  STUDY_RUNNER_CHART,
  STUDY_RUNNER_NAME,
} from '../study/topology.ts';

/**
 * The bash scripts `lab run`, `lab status` and `lab results` send to the GPU host through SSM Run
 * Command (`AWS-RunShellScript`, one array entry per line; the `#!/bin/bash` first line makes the
 * agent run them with bash). Every host path and object name comes from the module that owns it:
 * the bootstrap (manifests, kubeconfig, ready marker, sync script), the charts (runner Job and its
 * manifest file), the runner's results layout.
 *
 * The scripts report to the laptop in plain lines plus two markers: `runner job: <state>` and
 * `--- status.json` followed by the file (or `--- no status.json`). `parseHostReport` reads them.
 */

/** Where the runner's manifest lies: applied at boot (runner.autoStart), or kept for `lab run`. */
export const RUNNER_MANIFESTS = [
  `${MANIFESTS_DIR}/${STUDY_RUNNER_CHART}.yaml`,
  `${MANIFESTS_DIR}/${RUNNER_ON_DEMAND_DIR}/${STUDY_RUNNER_CHART}.yaml`,
] as const;

/** The runner's status file on the host. */
export const HOST_STATUS_FILE = `${RESULTS_HOST_PATH}/${STATUS_FILE}`;

/** Exit codes the scripts use for conditions the laptop explains in its own words. */
export const HOST_EXIT = {
  /** The bootstrap has not signalled SUCCESS (no READY_MARKER). */
  notReady: 3,
  /** Neither of RUNNER_MANIFESTS exists. */
  noRunnerManifest: 4,
  /** RESULTS_SYNC_SCRIPT is not installed. */
  noSyncScript: 5,
  /** `lab logs`: the log file is not there (yet). */
  noLogFile: 6,
  /** `lab logs`: the pod, Deployment or Job is not in the namespace. */
  noPod: 7,
} as const;

export const JOB_LINE_PREFIX = 'runner job: ';
export const STATUS_MARKER = '--- status.json';
export const NO_STATUS_MARKER = '--- no status.json';

/** The runner Job's state: absent, still running (or pending), or ended. */
export type RunnerJobState = 'absent' | 'active' | 'succeeded' | 'failed' | 'unknown';

/** Where the runner Job lives: the lab's namespace and the chart's object name. */
export interface RunnerJob {
  readonly namespace: string;
  readonly name: string;
}

/** The runner Job of the configured lab: a network cell's runs in `plain` (charts/network/study-runner.ts). */
export function runnerJob(config: LabConfig): RunnerJob {
  if (config.lab === 'network') return { namespace: PLAIN_NAMESPACE, name: NETWORK_RUNNER_NAME };
  return { namespace: config.namespace, name: STUDY_RUNNER_NAME };
}

/** The field manager of `lab run`'s server-side apply. */
export const APPLY_FIELD_MANAGER = 'lab-run';

/** The first lines of every script: bash, strict mode, kubectl and its kubeconfig. */
export function preamble(purpose: string): string[] {
  return [
    '#!/bin/bash',
    `# ${purpose} (sent by the lab CLI through SSM Run Command; rendered by lib/control/host-scripts.ts)`,
    'set -euo pipefail',
    // A failing kubectl inside $(...) must fail the script, not read as an empty answer.
    'shopt -s inherit_errexit',
    `export KUBECONFIG=${shellQuote(KUBECONFIG_PATH)}`,
    // K3s puts kubectl in /usr/local/bin; the agent's PATH may lack it.
    'export PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"',
  ];
}

function jobSettings(job: RunnerJob): string[] {
  return [`readonly NAMESPACE=${shellQuote(job.namespace)}`, `readonly JOB=${shellQuote(job.name)}`];
}

/**
 * Bash function `runner_job_state`: prints absent, active, succeeded or failed from the Job's
 * conditions (Complete / Failed, and the *Target conditions newer Kubernetes sets first).
 * A Job without a final condition is active: its pod runs or waits to be scheduled. A kubectl
 * that fails returns 1 explicitly: errexit does not apply inside `$(...) || ...`.
 */
export function jobStateFunction(): string[] {
  return [
    'runner_job_state() {',
    '  local found conditions',
    `  found=$(kubectl -n "$NAMESPACE" get job "$JOB" --ignore-not-found -o 'jsonpath={.metadata.name} {.status.conditions[?(@.status=="True")].type}') || return 1`,
    '  if [ -z "$found" ]; then',
    '    echo absent',
    '    return 0',
    '  fi',
    `  conditions=" \${found#* } "`,
    '  case "$conditions" in',
    '  *" Failed "* | *" FailureTarget "*) echo failed ;;',
    '  *" Complete "* | *" SuccessCriteriaMet "*) echo succeeded ;;',
    '  *) echo active ;;',
    '  esac',
    '}',
  ];
}

/** Bash function `print_status`: the status block of the report. */
export function printStatusFunction(): string[] {
  return [
    'print_status() {',
    '  if [ -f "$STATUS_FILE" ]; then',
    `    echo ${shellQuote(STATUS_MARKER)}`,
    '    cat "$STATUS_FILE"',
    '    echo',
    '  else',
    `    echo ${shellQuote(NO_STATUS_MARKER)}`,
    '  fi',
    '}',
  ];
}

/**
 * `lab run`: starts the study runner Job, or leaves a running one alone. A finished or failed Job
 * is deleted and created again from the synthesized manifest; the runner skips every run that
 * already has a valid record, so this resumes an interrupted study.
 */
/** What `lab run` asks of the runner it starts: at most one of these. */
export interface StartRequest {
  readonly fresh?: boolean;
  readonly redoInvalid?: boolean;
  readonly smoke?: boolean;
}

export function renderStartStudy(job: RunnerJob, start: StartRequest = {}): string[] {
  // `lab run --new`: the runner starts a fresh study (and removes the request) instead of
  // resuming the latest unfinished one (lib/runner/study-id.ts). `lab run --redo-invalid`: it
  // resumes the latest study of its configuration even when finished, and runs its invalid runs.
  // `lab run --smoke`: it runs the smoke study (lib/runner/lab-study.ts).
  const option = start.fresh
    ? '--new'
    : start.redoInvalid
      ? '--redo-invalid'
      : start.smoke
        ? '--smoke'
        : undefined;
  const freshRequest = start.smoke
    ? [
        `  date -u +%FT%TZ > ${shellQuote(`${RESULTS_HOST_PATH}/${SMOKE_REQUEST_FILE}`)}`,
        '  echo "lab run --smoke: the runner runs the smoke study: every arm with a tiny load, then its checklist (lab status prints it)"',
      ]
    : start.fresh
      ? [
          `  date -u +%FT%TZ > ${shellQuote(`${RESULTS_HOST_PATH}/${NEW_STUDY_REQUEST_FILE}`)}`,
          '  echo "lab run --new: the runner starts a fresh study; earlier studies stay as they are"',
        ]
      : start.redoInvalid
        ? [
            `  date -u +%FT%TZ > ${shellQuote(`${RESULTS_HOST_PATH}/${REDO_INVALID_REQUEST_FILE}`)}`,
            '  echo "lab run --redo-invalid: the runner runs the invalid runs of the latest study again; every earlier attempt stays on record"',
          ]
        : [];
  return [
    ...preamble('Starts or resumes the lab study'),
    ...jobSettings(job),
    `readonly READY_MARKER=${shellQuote(READY_MARKER)}`,
    `readonly BOOTSTRAP_LOG=${shellQuote(BOOTSTRAP_LOG)}`,
    `readonly STATUS_FILE=${shellQuote(HOST_STATUS_FILE)}`,
    `readonly RUNNER_MANIFESTS=(${RUNNER_MANIFESTS.map(shellQuote).join(' ')})`,
    ...jobStateFunction(),
    ...printStatusFunction(),
    'if [ ! -f "$READY_MARKER" ]; then',
    '  echo "the testbed is not ready yet: the bootstrap has not signalled SUCCESS (last line of $BOOTSTRAP_LOG: $(tail -n 1 "$BOOTSTRAP_LOG" 2>/dev/null || true))" >&2',
    `  exit ${HOST_EXIT.notReady}`,
    'fi',
    'state=$(runner_job_state)',
    `echo "${JOB_LINE_PREFIX}$state"`,
    'if [ "$state" = active ]; then',
    '  echo "the study runner Job $NAMESPACE/$JOB is running: nothing to start (a resumed study skips the runs that already have a valid record)"',
    ...(option
      ? [
          `  echo "lab run ${option}: not applied while a runner is at work; run it again once the runner has ended"`,
        ]
      : []),
    'else',
    ...freshRequest,
    "  manifest=''",
    `  for candidate in "\${RUNNER_MANIFESTS[@]}"; do`,
    '    if [ -f "$candidate" ]; then',
    '      manifest=$candidate',
    '      break',
    '    fi',
    '  done',
    '  if [ -z "$manifest" ]; then',
    `    echo "no study runner manifest on the host (looked for \${RUNNER_MANIFESTS[*]})" >&2`,
    `    exit ${HOST_EXIT.noRunnerManifest}`,
    '  fi',
    '  if [ "$state" != absent ]; then',
    '    echo "the study runner Job $NAMESPACE/$JOB has $state: deleting it to start again (valid runs are kept and skipped)"',
    '    kubectl -n "$NAMESPACE" delete job "$JOB" --ignore-not-found --wait=true',
    '  fi',
    `  kubectl apply --server-side --field-manager=${APPLY_FIELD_MANAGER} -f "$manifest"`,
    '  echo "started the study runner Job $NAMESPACE/$JOB from $manifest"',
    'fi',
    'print_status',
  ];
}

/** `lab status`: the runner Job's state (best effort) and status.json. */
export function renderReadStatus(job: RunnerJob): string[] {
  return [
    ...preamble("Reads the lab study's progress"),
    ...jobSettings(job),
    `readonly STATUS_FILE=${shellQuote(HOST_STATUS_FILE)}`,
    ...jobStateFunction(),
    ...printStatusFunction(),
    // K3s may be down while status.json is still there: the file matters more.
    'state=$(runner_job_state 2>/dev/null) || state=unknown',
    `echo "${JOB_LINE_PREFIX}$state"`,
    'print_status',
  ];
}

/** `lab results`: uploads the results folder now, with the script the bootstrap installed. */
export function renderSyncResults(): string[] {
  return [
    ...preamble('Uploads the lab results to S3 now'),
    `readonly SYNC_SCRIPT=${shellQuote(RESULTS_SYNC_SCRIPT)}`,
    'if [ ! -x "$SYNC_SCRIPT" ]; then',
    '  echo "$SYNC_SCRIPT is not installed: the bootstrap writes it in its first step" >&2',
    `  exit ${HOST_EXIT.noSyncScript}`,
    'fi',
    'timeout 600 "$SYNC_SCRIPT"',
    `echo "uploaded ${RESULTS_HOST_PATH}/ to the results bucket"`,
  ];
}

/** A rendered script as one text (what the agent writes to its script file). */
export function scriptText(lines: readonly string[]): string {
  return `${lines.join('\n')}\n`;
}

/** What a script reported, split from its other output lines. */
export interface HostReport {
  readonly job?: RunnerJobState;
  /** The text of status.json; undefined when the host has none. */
  readonly statusText?: string;
  /** True when the script looked and status.json was not there. */
  readonly noStatus: boolean;
  /** Every other line, in order. */
  readonly lines: readonly string[];
}

const JOB_STATES: readonly RunnerJobState[] = ['absent', 'active', 'succeeded', 'failed', 'unknown'];

export function parseHostReport(stdout: string): HostReport {
  const all = stdout.split('\n');
  const lines: string[] = [];
  let job: RunnerJobState | undefined;
  let statusText: string | undefined;
  let noStatus = false;
  for (let i = 0; i < all.length; i++) {
    const line = all[i] as string;
    if (line === STATUS_MARKER) {
      statusText = all.slice(i + 1).join('\n');
      break;
    }
    if (line === NO_STATUS_MARKER) {
      noStatus = true;
      continue;
    }
    if (line.startsWith(JOB_LINE_PREFIX)) {
      const state = line.slice(JOB_LINE_PREFIX.length) as RunnerJobState;
      job = JOB_STATES.includes(state) ? state : 'unknown';
      continue;
    }
    if (line !== '') lines.push(line);
  }
  return { ...(job ? { job } : {}), ...(statusText !== undefined ? { statusText } : {}), noStatus, lines };
}
