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
 * host/gpu-uuids.json             left by the host's bootstrap: { "<replica pod>": "GPU-<uuid>" }
 * host/nvidia-smi-topo.txt         left by the host's bootstrap: `nvidia-smi topo -m`
 * host/host.json                   optional: { instanceType, availabilityZone, k3sVersion }
 * ```
 * The runner reads the `host/` files if present; it has no GPU and cannot run nvidia-smi itself.
 */

export const STUDY_FILE = 'study.json';
export const STATUS_FILE = 'status.json';
export const RUNNER_LOG_FILE = 'runner.log';
export const RUNS_DIR = 'runs';

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
