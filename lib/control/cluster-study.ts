import { mkdirSync, renameSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import type { LabConfig } from '../config/schema.ts';
import { groupOf, resourceOfKind } from '../install/steps.ts';
import {
  type AccessQuestion,
  type ClusterApi,
  describeAccess,
  describeRef,
  KubeApiError,
  type KubeObject,
  type ObjectRef,
} from '../kube/cluster-api.ts';
import { STATUS_FILE } from '../runner/layout.ts';
import { pollUntil } from '../runner/poll.ts';
import type { Clock } from '../runner/ports.ts';
import { filePath, RESULTS_SERVER_NAME, type ResultsFile } from '../runner/results-server.ts';
import { RUN_REQUEST_ENV, type RunRequest } from '../runner/run-request.ts';
import type { StudyStatus } from '../runner/status.ts';
import { formatChecklist } from '../study/smoke-checklist.ts';
import { STUDY_RUNNER_NAME } from '../study/topology.ts';
import { formatBytes } from './download.ts';
import type { RunnerJobState, StartRequest } from './host-scripts.ts';
import { formatStudyStatus, parseStudyStatus } from './status-format.ts';
import { studyClockLines } from './study-clock.ts';

/**
 * `lab run`, `lab status` and `lab results` on a cluster the user brings, through the Kubernetes
 * API (never kubectl): the runner Job is applied from the same chart `cdk8s synth` writes, the
 * results claim is read through its results server's pods/proxy (lib/runner/results-server.ts),
 * and what is printed is what the lab's own host prints (status-format.ts, study-clock.ts).
 */

export interface ClusterStudyDeps {
  readonly api: ClusterApi;
  readonly clock: Clock;
  readonly write: (line: string) => void;
  readonly config: LabConfig;
  /** The runner's objects as synthesized (charts/study-runner.ts studyRunnerObjects). */
  readonly runnerObjects: () => readonly KubeObject[];
  /**
   * --kubeconfig and --context as the user passed them, repeated in the hints; absent: the hints
   * name the context the API client uses.
   */
  readonly clusterOptions?: { readonly kubeconfig?: string; readonly context?: string };
}

/** Why a study command stopped on a cluster; the CLI prints the message alone and exits 1. */
export class ClusterStudyError extends Error {
  override readonly name = 'ClusterStudyError';
}

/** How long a deleted runner Job may take to go before `lab run` gives up. */
const JOB_GONE_MS = 2 * 60_000;

/** The results server's component label (charts/results-store.ts). */
const RESULTS_SERVER_SELECTOR = 'app.kubernetes.io/component=results-server';

/** A word the shell reads as itself: quoted only when it has to be. */
function shellWord(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * The next command, for the hints: with the cluster options the user passed (a --kubeconfig
 * dropped from the hint would send it to $KUBECONFIG's cluster, or nowhere).
 */
function again(deps: ClusterStudyDeps, command: string): string {
  const { kubeconfig, context } = deps.clusterOptions ?? { context: deps.api.target.context };
  return [
    'lab',
    command,
    ...(kubeconfig ? ['--kubeconfig', shellWord(kubeconfig)] : []),
    ...(context ? ['--context', shellWord(context)] : []),
  ].join(' ');
}

/** The state of the runner Job from its conditions, as the host's runner_job_state reads them. */
export function runnerJobState(job: KubeObject | undefined): RunnerJobState {
  if (!job) return 'absent';
  const conditions = (job.status as { conditions?: { type?: string; status?: string }[] } | undefined)
    ?.conditions;
  const on = new Set((conditions ?? []).filter((c) => c.status === 'True').map((c) => c.type));
  if (on.has('Failed') || on.has('FailureTarget')) return 'failed';
  if (on.has('Complete') || on.has('SuccessCriteriaMet')) return 'succeeded';
  return 'active';
}

function jobRef(config: LabConfig) {
  return { apiVersion: 'batch/v1', kind: 'Job', name: STUDY_RUNNER_NAME, namespace: config.namespace };
}

/** The running results server's pod; a clear stop when the claim or its server is not there. */
async function resultsPod(deps: ClusterStudyDeps): Promise<string> {
  const { api, config } = deps;
  if (config.runner.results.volume !== 'claim') {
    throw new ClusterStudyError(
      'runner.results.volume is node-folder: on a cluster you bring the results live on a claim; set runner.results.volume: claim and run lab install',
    );
  }
  const pods = await api.list('v1', 'Pod', {
    namespace: config.namespace,
    labelSelector: RESULTS_SERVER_SELECTOR,
  });
  const running = pods.find((pod) => (pod.status as { phase?: string } | undefined)?.phase === 'Running');
  if (!running) {
    const claim = await api.read({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      name: RESULTS_SERVER_NAME,
      namespace: config.namespace,
    });
    const phase = (claim?.status as { phase?: string } | undefined)?.phase;
    if (claim && phase !== 'Bound') {
      const storageClass = (claim.spec as { storageClassName?: string } | undefined)?.storageClassName;
      throw new ClusterStudyError(
        `the results claim ${config.namespace}/${RESULTS_SERVER_NAME} is ${phase ?? 'Pending'} (StorageClass ${storageClass ?? 'none: the cluster has no default'}): no volume was provisioned, so nothing can write or read the results. Check the class's provisioner (kubectl get storageclass), or set runner.results.storageClassName and run lab install again`,
      );
    }
    throw new ClusterStudyError(
      `no results server runs in namespace ${config.namespace} (Deployment ${RESULTS_SERVER_NAME}${pods.length > 0 ? `: pod ${pods[0].metadata.name} is ${(pods[0].status as { phase?: string } | undefined)?.phase ?? 'not running'}` : ''}): run ${again(deps, 'install')} first`,
    );
  }
  return running.metadata.name;
}

async function readResultsFile(
  deps: ClusterStudyDeps,
  pod: string,
  path: string,
): Promise<Buffer | undefined> {
  try {
    return Buffer.from(await deps.api.proxyGet(deps.config.namespace, pod, filePath(path)), 'base64');
  } catch (error) {
    if (error instanceof KubeApiError && error.status === 404) return undefined;
    throw error;
  }
}

async function readStatus(deps: ClusterStudyDeps, pod: string): Promise<StudyStatus | undefined> {
  const bytes = await readResultsFile(deps, pod, STATUS_FILE);
  if (bytes === undefined) return undefined;
  const status = parseStudyStatus(bytes.toString('utf8'));
  if (!status) {
    throw new ClusterStudyError(
      `${STATUS_FILE} in the results claim is not a status file of the study runner: ${bytes.toString('utf8').slice(0, 200)}`,
    );
  }
  return status;
}

function requestOf(start: StartRequest): RunRequest | undefined {
  if (start.fresh) return 'new';
  if (start.redoInvalid) return 'redo-invalid';
  if (start.smoke) return 'smoke';
  return undefined;
}

/** The runner's Job with lab run's request in its env (lib/runner/run-request.ts). */
function withRequest(object: KubeObject, request: RunRequest | undefined): KubeObject {
  if (object.kind !== 'Job' || request === undefined) return object;
  const spec = object.spec as { template: { spec: { containers: { env?: unknown[] }[] } } };
  const [runner, ...others] = spec.template.spec.containers;
  const env = [...(runner.env ?? []), { name: RUN_REQUEST_ENV, value: request }];
  return {
    ...object,
    spec: {
      ...spec,
      template: {
        ...spec.template,
        spec: { ...spec.template.spec, containers: [{ ...runner, env }, ...others] },
      },
    },
  };
}

/**
 * `lab run`: starts the runner Job, or leaves a running one alone; a finished or failed Job is
 * deleted and applied again, and the runner resumes (valid runs are kept and skipped).
 */
export async function startStudyOnCluster(deps: ClusterStudyDeps, start: StartRequest = {}): Promise<void> {
  const { api, config, write } = deps;
  const version = await api.version();
  write(`cluster: context ${api.target.context} at ${api.target.server}, Kubernetes ${version}`);
  const pod = await resultsPod(deps);
  const ref = jobRef(config);
  const state = runnerJobState(await api.read(ref));
  write(`runner job: ${state}`);
  const request = requestOf(start);
  if (state === 'active') {
    write(
      `the study runner ${describeRef(ref)} is running: nothing to start (a resumed study skips the runs that already have a valid record)`,
    );
    if (request)
      write(
        `lab run --${request}: not applied while a runner is at work; run it again once the runner has ended`,
      );
  } else {
    // Every permission first, the old Job's deletion included: a runner half applied, or an
    // old one deleted and no new one started, is worse than none.
    const objects = deps.runnerObjects();
    await reviewRunnerAccess(deps, objects, state !== 'absent' ? ref : undefined);
    if (state !== 'absent') {
      write(
        `the study runner ${describeRef(ref)} has ${state}: deleting it to start again (valid runs are kept and skipped)`,
      );
      await api.remove(ref);
      const gone = await pollUntil(
        async () => ((await api.read(ref)) ? { waiting: `${describeRef(ref)} to go` } : { done: true }),
        {
          clock: deps.clock,
          timeoutMs: JOB_GONE_MS,
          intervalMs: 2_000,
        },
      );
      if ('timedOut' in gone) {
        throw new ClusterStudyError(
          `${describeRef(ref)} was deleted but is still there after 2 minutes (a finalizer?); run lab run again`,
        );
      }
    }
    if (request === 'new')
      write('lab run --new: the runner starts a fresh study; earlier studies stay as they are');
    if (request === 'redo-invalid')
      write(
        'lab run --redo-invalid: the runner runs the invalid runs of the latest study again; every earlier attempt stays on record',
      );
    if (request === 'smoke')
      write(
        'lab run --smoke: the runner runs the smoke study: every arm with a tiny load, then its checklist (lab status prints it)',
      );
    for (const object of objects) await api.apply(withRequest(object, request));
    write(`started the study runner ${describeRef(ref)}`);
  }
  const status = await readStatus(deps, pod);
  if (status) {
    write(state === 'active' ? 'progress:' : 'status.json as the previous runner left it:');
    for (const line of formatStudyStatus(status, deps.clock.now())) write(`  ${line}`);
  } else {
    write('no status.json yet: the runner writes it once it starts (it first waits for every replica).');
  }
  write(`watch it: ${again(deps, 'status')}`);
}

/**
 * Refuses, before anything changes, when the kubeconfig user may not patch (server-side apply)
 * each kind of the runner's objects, or delete the finished runner Job it must replace.
 */
async function reviewRunnerAccess(
  deps: ClusterStudyDeps,
  objects: readonly KubeObject[],
  oldJob: ObjectRef | undefined,
): Promise<void> {
  const questions: AccessQuestion[] = [];
  const asked = new Set<string>();
  for (const object of objects) {
    const group = groupOf(object.apiVersion);
    const resource = resourceOfKind(object.kind);
    const namespace = object.metadata.namespace;
    const key = `${resource}.${group}/${namespace ?? ''}`;
    if (asked.has(key)) continue;
    asked.add(key);
    questions.push({ verb: 'patch', group, resource, ...(namespace ? { namespace } : {}) });
  }
  if (oldJob)
    questions.push({ verb: 'delete', group: 'batch', resource: 'jobs', namespace: oldJob.namespace });
  const refused: string[] = [];
  for (const question of questions)
    if (!(await deps.api.canI(question))) refused.push(describeAccess(question));
  if (refused.length > 0) {
    throw new ClusterStudyError(
      `the kubeconfig user may not start the runner (nothing was changed): ${refused.join('; ')}; use a context that may, or ask an administrator for these permissions`,
    );
  }
}

/** `lab status`: the runner Job's state and status.json from the results claim. */
export async function showStatusOnCluster(deps: ClusterStudyDeps): Promise<void> {
  const { api, config, write } = deps;
  const pod = await resultsPod(deps);
  const state = runnerJobState(await api.read(jobRef(config)));
  const status = await readStatus(deps, pod);
  if (!status) {
    throw new ClusterStudyError(
      `the study has not started yet: there is no ${STATUS_FILE} in the results claim (runner job: ${state}). Start it with ${again(deps, 'run')}; the runner writes status.json once every replica answers`,
    );
  }
  write(`study on context ${api.target.context} (namespace ${config.namespace}), runner job: ${state}`);
  const now = deps.clock.now();
  for (const line of formatStudyStatus(status, now)) write(line);
  // A cluster you bring has no instance the lab prices or shuts down.
  for (const line of studyClockLines(status, { pricePerHourUsd: 0, maxLifetimeHours: 0 }, now)) write(line);
  if ((status.state === 'running' || status.state === 'starting') && state !== 'active') {
    write(
      `note: the runner Job is ${state}, so this status is stale: the runner stopped without finishing. lab run starts it again; valid runs are kept.`,
    );
  }
  if (status.checklist) for (const line of formatChecklist(status.checklist)) write(line);
}

/** Where a listed file goes under `outDir`; undefined when its path would leave it. */
function localPath(outDir: string, path: string): string | undefined {
  const full = resolve(outDir, path);
  const inside = relative(resolve(outDir), full);
  return inside === '' || inside.startsWith('..') || inside.startsWith(sep) ? undefined : full;
}

/**
 * Whether a local file is the copy `lab results` made of a listed one: same size, and the time it
 * was given. utimes takes the claim's time as a Date (whole milliseconds) and Node hands it to the
 * kernel as seconds in a double, so the copy's time can land up to a millisecond below the
 * claim's truncated time: 1796232806027.9998 came back as 1796232806026.999 (about 1 file in 2,000
 * on Node 20.20.2; a second `lab results` fetched such a file again).
 */
export function isSameCopy(
  local: { readonly size: number; readonly mtimeMs: number } | undefined,
  listed: { readonly size: number; readonly mtimeMs: number },
): boolean {
  return local !== undefined && local.size === listed.size && Math.abs(local.mtimeMs - listed.mtimeMs) < 2;
}

/**
 * `lab results`: copies the results claim into `outDir` through the results server, skipping
 * files whose size and time match the copy (each copied file takes the claim's modification time).
 */
export async function fetchResultsFromCluster(deps: ClusterStudyDeps, outDir: string): Promise<void> {
  const { config, write } = deps;
  const pod = await resultsPod(deps);
  const listing = JSON.parse(await deps.api.proxyGet(config.namespace, pod, 'list')) as {
    files: ResultsFile[];
  };
  let fetched = 0;
  let unchanged = 0;
  let bytes = 0;
  for (const file of listing.files) {
    const target = localPath(outDir, file.path);
    if (!target)
      throw new ClusterStudyError(
        `the results server listed ${file.path}, which is outside the results folder`,
      );
    if (isSameCopy(statSync(target, { throwIfNoEntry: false }), file)) {
      unchanged += 1;
      continue;
    }
    const content = await readResultsFile(deps, pod, file.path);
    if (content === undefined) continue; // removed since the listing (a client's scratch output)
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(`${target}.part`, content);
    renameSync(`${target}.part`, target);
    const mtime = new Date(file.mtimeMs);
    utimesSync(target, mtime, mtime);
    fetched += 1;
    bytes += content.length;
    write(`fetched ${file.path} (${formatBytes(content.length)})`);
  }
  if (fetched + unchanged === 0) {
    throw new ClusterStudyError(
      `there are no results in the claim yet: the study's files appear once the runner has started (${again(deps, 'status')})`,
    );
  }
  write(`${fetched} file(s) fetched (${formatBytes(bytes)}), ${unchanged} unchanged, in ${outDir}`);
  write(`make the report: lab report ${join(outDir)}`);
}
