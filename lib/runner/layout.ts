/**
 * The results folder the runner writes (host path `/var/lib/lab/results`, mounted at
 * `/results` in the runner pod; the host syncs it to `s3://<bucket>/<stack>/`). The report and
 * the laptop CLI read the same names. Every study has its own folder, so a new study never
 * overwrites an earlier one, here or in S3. docs/runner.md draws this tree, and
 * test/runner/smoke-rehearsal.test.ts checks it against what a rehearsal's runner writes.
 *
 * ```
 * status.json                      StudyStatus of the runner at work (names its study), rewritten on every step
 * new-study.request                left by `lab run --new`; the runner starts a fresh study and removes it
 * smoke.request                    left by `lab run --smoke`; the runner runs the smoke study and removes it
 * studies/<study-id>/              one study (study-id.ts):
 *   study.json                     StudyRecord: metadata + every recorded run, in plan order
 *   runner.log                     every progress line, appended
 *   smoke-checklist.json, .txt     a smoke study's checklist (lib/study/smoke-checklist.ts)
 *   runs/<run-id>.json             RunRecord of one run (the same object as in study.json)
 *   <benchmark-id>/<benchmark-id>.json   the client's saved JSON (copied from the Job's output)
 *   <benchmark-id>/<benchmark-id>.log    the client pod's log (saved by the runner)
 *   attempts/<run-id>/<n>/...      every attempt's client files, written once (a killed runner's too)
 * <benchmark-id>/<benchmark-id>.json   where a client's Job writes (its scratch output; the runner
 *                                  copies it into the study folder and removes it)
 * host/gpu-uuids.json             left by the host's bootstrap: { "<replica pod>": "GPU-<uuid>" }
 * host/nvidia-smi-topo.txt         left by the host's bootstrap: `nvidia-smi topo -m`
 * host/host.json                   optional: { instanceType, availabilityZone, k3sVersion }
 * ```
 * The runner reads the `host/` files if present; it has no GPU and cannot run nvidia-smi itself.
 *
 * On a cluster of several nodes the folder is a host folder of one node: the runner's. Every
 * client Job is therefore pinned to the runner's node (`onRunnerNode`), so its saved JSON lands
 * where the runner reads it, whichever node the scheduler would otherwise have picked.
 */

import type { JobObject } from './ports.ts';

export const STUDY_FILE = 'study.json';
export const STATUS_FILE = 'status.json';
export const RUNNER_LOG_FILE = 'runner.log';
export const RUNS_DIR = 'runs';
/** Holds one folder per study. */
export const STUDIES_DIR = 'studies';
/** Every attempt's client files, write-once, inside a study folder. */
export const ATTEMPTS_DIR = 'attempts';
/** `lab run --new` leaves this file; the runner then starts a fresh study and removes it. */
export const NEW_STUDY_REQUEST_FILE = 'new-study.request';
/**
 * `lab run --redo-invalid` leaves this file; the runner then resumes the latest study of its
 * configuration even when it finished, runs only its invalid runs again, and removes it.
 */
export const REDO_INVALID_REQUEST_FILE = 'redo-invalid.request';

/**
 * `lab run --smoke` leaves this file; the runner then runs the smoke study (lib/study/smoke.ts),
 * whatever `study.profile` says, and removes it.
 */
export const SMOKE_REQUEST_FILE = 'smoke.request';
/** A smoke study's checklist, in its study folder: the JSON and the text `lab status` prints. */
export const SMOKE_CHECKLIST_FILE = 'smoke-checklist.json';
export const SMOKE_CHECKLIST_TEXT_FILE = 'smoke-checklist.txt';

/** A study's folder, relative to the results folder. */
export function studyDir(studyId: string): string {
  return `${STUDIES_DIR}/${studyId}`;
}

/** Where attempt `n` of a run keeps its client files, relative to the study folder. */
export function attemptDir(runId: string, attempt: number): string {
  return `${ATTEMPTS_DIR}/${runId}/${attempt}`;
}

/** `{ "qwen3-0": "GPU-<uuid>", ... }`: the bootstrap runs `nvidia-smi -L` in each replica pod. */
export const GPU_UUIDS_FILE = 'host/gpu-uuids.json';
/** `nvidia-smi topo -m` as text, saved by the bootstrap. */
export const GPU_TOPOLOGY_FILE = 'host/nvidia-smi-topo.txt';
/** Optional: `{ "instanceType": "g6.12xlarge", "availabilityZone": "us-west-2b", "k3sVersion": "v1.33.4+k3s1" }` */
export const HOST_FILE = 'host/host.json';

/** Path of a run record, relative to the results folder. */
export function runRecordPath(runId: string): string {
  return `${RUNS_DIR}/${runId}.json`;
}

/** Where a client's Job writes its saved JSON (charts/benchmark-job.ts mounts `<results>/<id>` at /out). */
export function clientResultPath(benchmarkId: string, resultFile: string): string {
  return `${benchmarkId}/${resultFile}`;
}

export function clientLogPath(benchmarkId: string): string {
  return `${benchmarkId}/${benchmarkId}.log`;
}

/** Env var of the runner pod carrying its node's name (the downward API's `spec.nodeName`). */
export const RUNNER_NODE_ENV = 'LAB_RUNNER_NODE';

/**
 * The Job, required to run on `node`: a node-affinity term on the node's `metadata.name`, the way
 * the DaemonSet controller pins its pods, so the scheduler still checks resources and taints (a
 * bare `nodeName` would bypass it). The Job's own nodeSelector and tolerations stay: they must
 * admit the node too. Without a node name (a runner outside a pod), the Job is left as it is.
 */
export function onRunnerNode(job: JobObject, node: string | undefined): JobObject {
  if (!node) return job;
  const template = job.spec.template as { metadata?: unknown; spec: Record<string, unknown> };
  const affinity = {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [node] }] }],
      },
    },
  };
  return {
    ...job,
    spec: { ...job.spec, template: { ...template, spec: { ...template.spec, affinity } } },
  };
}
