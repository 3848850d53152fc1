import { BOOTSTRAP_LOG } from '../aws/bootstrap/shell.ts';
import type { LabConfig } from '../config/schema.ts';
import { MESH_NAMESPACES, PLAIN_NAMESPACE } from '../network/topology.ts';
import { RUNNER_LOG_FILE } from '../runner/layout.ts';
import { studyArms } from '../study/arms.ts';
import { studyPlan } from '../study/plan.ts';
import { frontEnd, RESULTS_HOST_PATH, replicaSetName } from '../study/topology.ts';
import { type ControlContext, controlError } from './context.ts';
import { readSyncedCopy, syncedCopyLine } from './download.ts';
import { HOST_EXIT } from './host-scripts.ts';
import { LOG_CHUNK_BYTES, parseFileLog, parsePodLog, renderFileLog, renderPodLog } from './log-scripts.ts';
import { commandFailed, type HostCommandResult, runOnHost } from './run-command.ts';
import { describeTestbed, instanceState, notRunningReason, type Testbed } from './testbed.ts';

/** Where a log lives: a file on the host, or what `kubectl logs` reads. */
export type LogSource =
  | {
      readonly kind: 'file';
      /** For messages: `the bootstrap log`. */
      readonly title: string;
      readonly file: string;
      /** The file's key under the stack's results prefix, when the host syncs it to S3. */
      readonly syncedAs?: string;
    }
  | {
      readonly kind: 'pod';
      readonly title: string;
      readonly namespace: string;
      readonly target: string;
      readonly container?: string;
      readonly previous?: boolean;
      /** A network-lab cell's other test-pod namespaces, named when the pod is not found. */
      readonly otherNamespaces?: readonly string[];
    };

/** A `lab logs` argument that names no log of this lab; the message says what would. */
export class LogSourceError extends Error {
  override readonly name = 'LogSourceError';
}

export const LOG_SOURCES = ['bootstrap', 'runner', 'replica', 'front-end', 'job', 'pod'] as const;

export interface PodLogOptions {
  readonly container?: string;
  readonly previous?: boolean;
  readonly namespace?: string;
  /** The network-lab cell (`--cell`): its pods' namespaces are named in the hints. */
  readonly cell?: string;
}

/**
 * The namespaces of a network-lab cell's test pods: plain, and on a cell with a mesh the two mesh
 * namespaces (mesh with its policies, mesh-default for E2's no-policy row). Unknown cell: all.
 */
export function networkPodNamespaces(config: LabConfig, cellName: string | undefined): string[] {
  const cell = cellName === undefined ? undefined : config.network.cells.find((c) => c.name === cellName);
  return cell?.mesh === 'none' ? [PLAIN_NAMESPACE] : [PLAIN_NAMESPACE, ...MESH_NAMESPACES];
}

/** "a, b or c" */
function orList(items: readonly string[]): string {
  return items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}`;
}

/** A Kubernetes object name: a DNS-1123 subdomain. */
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

function required(source: string, name: string | undefined, what: string): string {
  if (!name) throw new LogSourceError(`lab logs ${source} needs ${what}.`);
  if (!OBJECT_NAME.test(name) && !/^\d+$/.test(name)) {
    throw new LogSourceError(
      `"${name}" is not a Kubernetes object name (lowercase letters, digits, - and .).`,
    );
  }
  return name;
}

function replicaPod(config: LabConfig, name: string): string {
  if (!/^\d+$/.test(name)) return name;
  const index = Number(name);
  if (index >= config.vllm.replicas) {
    throw new LogSourceError(
      `there is no replica ${index}: vllm.replicas is ${config.vllm.replicas}, so the indices are 0 to ${config.vllm.replicas - 1}.`,
    );
  }
  return `${replicaSetName(config, 'standard')}-${index}`;
}

/** The Deployment that decides an arm's routing: its router, or its Endpoint Picker. */
function frontEndDeployment(config: LabConfig, name: string): { namespace: string; deployment: string } {
  const arms = studyArms(config);
  const arm = arms.find((a) => a.id === name || a.frontEndId === name);
  if (!arm) {
    const ids = [...new Set(arms.map((a) => a.frontEndId))].join(', ');
    throw new LogSourceError(`no front end "${name}" in this study; its front ends: ${ids}.`);
  }
  const fe = frontEnd(config, arm);
  const deployment = fe.restartDeployments[0];
  if (!deployment) {
    throw new LogSourceError(
      `front end ${arm.frontEndId} is a Kubernetes Service (kube-proxy): it has no pod of its own; read a replica's log instead (lab logs replica 0).`,
    );
  }
  // Router and Endpoint Picker Deployments live in the lab's namespace, whatever the arm's Service.
  return { namespace: config.namespace, deployment };
}

/** The benchmark client named by a benchmark id, or by a run id whose run has one client. */
async function benchmarkJob(config: LabConfig, name: string): Promise<string> {
  const plan = studyPlan(config);
  const benchmarks = plan.runs.flatMap((run) => run.benchmarks);
  const byBenchmark = benchmarks.find((b) => b.id === name || `bench-${b.id}` === name);
  const run = plan.runs.find((r) => r.id === name);
  const spec = byBenchmark ?? (run?.benchmarks.length === 1 ? run.benchmarks[0] : undefined);
  if (!spec) {
    const choices = run ? run.benchmarks.map((b) => b.id) : plan.runs.map((r) => r.id);
    const what = run
      ? `run ${name} has ${run.benchmarks.length} clients; name one`
      : `no run or benchmark "${name}" in this study`;
    throw new LogSourceError(`${what}: ${choices.join(', ')}.`);
  }
  // The chart owns the Job's name; loaded here only (cdk8s is heavy).
  const { benchmarkJobName } = await import('../../charts/benchmark-job.ts');
  return benchmarkJobName(spec);
}

/** Turns `lab logs <source> [name]` into a log of this configuration's testbed. */
export async function logSource(
  config: LabConfig,
  source: string,
  name: string | undefined,
  options: PodLogOptions = {},
): Promise<LogSource> {
  const pod = (title: string, namespace: string, target: string): Extract<LogSource, { kind: 'pod' }> => ({
    kind: 'pod',
    title,
    namespace,
    target,
    ...(options.container ? { container: options.container } : {}),
    ...(options.previous ? { previous: true } : {}),
  });
  // A network-lab cell runs no replica, front end or benchmark client: its pods are named as pods.
  if (config.lab === 'network' && ['replica', 'front-end', 'job'].includes(source)) {
    throw new LogSourceError(
      `"${source}" is a log of the LLM-gateway lab; a network-lab cell has: bootstrap, runner, pod (with --namespace ${orList(networkPodNamespaces(config, options.cell))}; default ${PLAIN_NAMESPACE}).`,
    );
  }
  switch (source) {
    case 'bootstrap':
      return { kind: 'file', title: 'the bootstrap log', file: BOOTSTRAP_LOG };
    case 'runner':
      return {
        kind: 'file',
        title: "the study runner's log",
        file: `${RESULTS_HOST_PATH}/${RUNNER_LOG_FILE}`,
        syncedAs: RUNNER_LOG_FILE,
      };
    case 'replica': {
      const podName = replicaPod(config, required(source, name, 'a replica index (0) or pod name (qwen3-0)'));
      return pod(`replica ${podName}`, config.namespace, `pod/${podName}`);
    }
    case 'front-end': {
      const fe = frontEndDeployment(config, required(source, name, 'a front end or arm id'));
      return pod(`front end deployment/${fe.deployment}`, fe.namespace, `deployment/${fe.deployment}`);
    }
    case 'job': {
      const job = await benchmarkJob(config, required(source, name, 'a benchmark or run id'));
      return pod(`benchmark client job/${job}`, config.namespace, `job/${job}`);
    }
    case 'pod': {
      const podName = required(source, name, 'a pod name');
      if (config.lab !== 'network')
        return pod(`pod ${podName}`, options.namespace ?? config.namespace, `pod/${podName}`);
      const namespace = options.namespace ?? PLAIN_NAMESPACE;
      const otherNamespaces = networkPodNamespaces(config, options.cell).filter((n) => n !== namespace);
      return { ...pod(`pod ${podName}`, namespace, `pod/${podName}`), otherNamespaces };
    }
    default:
      throw new LogSourceError(`unknown log "${source}"; the logs: ${LOG_SOURCES.join(', ')}.`);
  }
}

export interface ShowLogsOptions {
  readonly tailLines: number;
  /** Polls after the first answer; 0 prints once. */
  readonly followPolls: number;
  readonly pollMs: number;
  /** Lines about the log, kept apart from the log itself (stderr). */
  readonly note: (line: string) => void;
}

/** Script limit on the host for one answer. */
export const LOG_TIMEOUT_SECONDS = 60;

/**
 * `lab logs`: prints the last lines of a log on the testbed, then with `followPolls` asks again
 * every `pollMs` for what came after, a bounded number of times. The runner's log falls back to
 * its last copy in the results bucket when the instance is gone.
 */
export async function showLogs(
  ctx: ControlContext,
  source: LogSource,
  options: ShowLogsOptions,
): Promise<void> {
  const testbed = await describeTestbed(ctx);
  const state = await instanceState(ctx, testbed.instanceId);
  if (state !== 'running') {
    const why = notRunningReason(testbed.instanceId, state);
    if (source.kind === 'file' && source.syncedAs) {
      await showSyncedLog(ctx, testbed, source.syncedAs, why, options);
      return;
    }
    throw controlError('instance-not-running', `Cannot read ${source.title}: ${why}.`);
  }
  options.note(`${source.title} on instance ${testbed.instanceId} (stack ${testbed.stackName}):`);
  const follower =
    source.kind === 'file'
      ? fileFollower(ctx, testbed, source, options)
      : podFollower(ctx, testbed, source, options);
  await follower.poll(true);
  for (let i = 0; i < options.followPolls; i++) {
    await ctx.sleep(options.pollMs);
    await follower.poll(false);
  }
  follower.flush();
  if (options.followPolls > 0) {
    const minutes = Math.round((options.followPolls * options.pollMs) / 60_000);
    options.note(`stopped following after ${minutes} min (--follow-for); run the command again to go on.`);
  }
}

interface Follower {
  poll(first: boolean): Promise<void>;
  /** Prints what is left of a last line without its newline. */
  flush(): void;
}

function ask(
  ctx: ControlContext,
  testbed: Testbed,
  title: string,
  lines: string[],
): Promise<HostCommandResult> {
  return runOnHost(ctx, testbed.instanceId, {
    comment: `lab logs: ${title} of ${testbed.stackName}`,
    lines,
    timeoutSeconds: LOG_TIMEOUT_SECONDS,
  });
}

/** Writes complete lines; a line cut at the chunk limit waits for the rest in the next answer. */
function lineWriter(ctx: ControlContext) {
  let partial = '';
  return {
    print(text: string) {
      const lines = (partial + text).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) ctx.write(line);
    },
    flush() {
      if (partial) ctx.write(partial);
      partial = '';
    },
  };
}

function fileFollower(
  ctx: ControlContext,
  testbed: Testbed,
  source: Extract<LogSource, { kind: 'file' }>,
  options: ShowLogsOptions,
): Follower {
  let offset: number | undefined;
  const writer = lineWriter(ctx);
  return {
    flush: writer.flush,
    async poll(first) {
      const result = await ask(
        ctx,
        testbed,
        source.title,
        renderFileLog({ file: source.file, tailLines: options.tailLines, from: offset }),
      );
      if (result.status !== 'Success') {
        if (result.exitCode === HOST_EXIT.noLogFile) {
          throw controlError(
            'no-log',
            `${source.file} is not on instance ${testbed.instanceId} yet: ${source.syncedAs ? `the study runner writes it once it starts (lab status --stack ${testbed.stackName})` : 'the bootstrap writes it from its first step'}.`,
          );
        }
        throw commandFailed(`Reading ${source.title}`, testbed.instanceId, result);
      }
      const answer = parseFileLog(result.stdout);
      if (!answer)
        throw controlError(
          'command-failed',
          `Unexpected answer from the host for ${source.title}: ${result.stdout.slice(0, 200)}`,
        );
      if (first && answer.text.length >= LOG_CHUNK_BYTES) {
        options.note(
          `(the last ${LOG_CHUNK_BYTES} bytes only: Run Command returns at most 24,000 characters)`,
        );
      }
      offset = answer.next;
      writer.print(answer.text);
    },
  };
}

/** `2025-10-14T09:14:20.5Z` -> `2025-10-14T09:14:20.500000000Z`: kubelet timestamps compare as text. */
export function timestampKey(timestamp: string): string {
  const match = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$/.exec(timestamp);
  if (!match) return timestamp;
  return `${match[1]}.${(match[2] ?? '').padEnd(9, '0')}Z`;
}

/**
 * What `--follow` prints of a pod log answer: the lines after the last one printed. Lines carry
 * kubectl's `--timestamps` prefix. The next poll asks `--since-time` for the last line's second
 * (plain RFC 3339, whole seconds: whatever precision kubelet applies, nothing after the last line
 * is left out), so an answer repeats lines already printed; they are skipped by timestamp, and
 * lines at exactly the last timestamp by their text.
 */
export class PodLogCursor {
  private lastKey = '';
  private atLast = new Set<string>();

  /** The new lines, without their timestamps; a last line without its newline is left for next time. */
  take(text: string): string[] {
    const lines = text.split('\n');
    lines.pop();
    const fresh: string[] = [];
    for (const line of lines) {
      const space = line.indexOf(' ');
      const key = timestampKey(space < 0 ? line : line.slice(0, space));
      const body = space < 0 ? '' : line.slice(space + 1);
      if (key < this.lastKey || (key === this.lastKey && this.atLast.has(body))) continue;
      if (key !== this.lastKey) {
        this.lastKey = key;
        this.atLast = new Set();
      }
      this.atLast.add(body);
      fresh.push(body);
    }
    return fresh;
  }

  /** `--since-time` for the next poll: the last timestamp, whole seconds. */
  since(): string | undefined {
    return this.lastKey ? `${this.lastKey.slice(0, 19)}Z` : undefined;
  }
}

function podFollower(
  ctx: ControlContext,
  testbed: Testbed,
  source: Extract<LogSource, { kind: 'pod' }>,
  options: ShowLogsOptions,
): Follower {
  const cursor = new PodLogCursor();
  return {
    flush() {},
    async poll(first) {
      const since = first ? undefined : cursor.since();
      const request = {
        namespace: source.namespace,
        target: source.target,
        container: source.container,
        previous: source.previous,
        tailLines: options.tailLines,
        ...(since ? { since } : {}),
      };
      const result = await ask(ctx, testbed, source.title, renderPodLog(request));
      if (result.status !== 'Success') {
        if (result.exitCode === HOST_EXIT.noPod) {
          throw controlError(
            'no-pod',
            `There is no ${source.target} in namespace ${source.namespace} on instance ${testbed.instanceId}. ${result.stderr.trim()}${
              source.otherNamespaces?.length
                ? ` The cell's other test pods are in ${orList(source.otherNamespaces)} (--namespace).`
                : ''
            }`,
          );
        }
        throw commandFailed(`Reading the log of ${source.title}`, testbed.instanceId, result);
      }
      const text = parsePodLog(result.stdout);
      if (text === undefined)
        throw controlError(
          'command-failed',
          `Unexpected answer from the host for ${source.title}: ${result.stdout.slice(0, 200)}`,
        );
      for (const line of cursor.take(text)) ctx.write(line);
    },
  };
}

async function showSyncedLog(
  ctx: ControlContext,
  testbed: Testbed,
  name: string,
  why: string,
  options: ShowLogsOptions,
): Promise<void> {
  const copy = await readSyncedCopy(ctx, testbed, name, {
    kind: 'no-log',
    why,
    meaning: 'the study never started before the instance ended.',
  });
  options.note(`${why}.`);
  options.note(syncedCopyLine(testbed, copy));
  if (options.followPolls > 0) options.note('--follow needs a running instance: printed once.');
  const lines = copy.text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  for (const line of lines.slice(-options.tailLines)) ctx.write(line);
}
