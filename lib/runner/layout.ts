/**
 * The results folder the runner writes (host path `/var/lib/lab/results`, mounted at
 * `/results` in the runner pod). The report and the laptop CLI read the same names.
 *
 * ```
 * study.json                       StudyRecord: metadata + every recorded run, in plan order
 * status.json                      StudyStatus: progress, rewritten on every step
 * runner.log                       every progress line, appended
 * runs/<run-id>.json               RunRecord of one run (the same object as in study.json)
 * <benchmark-id>/<benchmark-id>.json   the client's saved JSON (written by its Job)
 * <benchmark-id>/<benchmark-id>.log    the client pod's log (saved by the runner)
 * gpu-uuids.json, gpu-topology.txt, host.json   left by the host's bootstrap, read if present
 * ```
 */

export const STUDY_FILE = 'study.json';
export const STATUS_FILE = 'status.json';
export const RUNNER_LOG_FILE = 'runner.log';
export const RUNS_DIR = 'runs';

/** Bootstrap files: `{ "<name>": "GPU-<uuid>", ... }` from `nvidia-smi --query-gpu=index,uuid`. */
export const GPU_UUIDS_FILE = 'gpu-uuids.json';
/** `nvidia-smi topo -m` as text. */
export const GPU_TOPOLOGY_FILE = 'gpu-topology.txt';
/** `{ "instanceType": "g6.12xlarge", "availabilityZone": "us-west-2b", "k3sVersion": "v1.33.4+k3s1" }` */
export const HOST_FILE = 'host.json';

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
