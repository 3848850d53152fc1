import { type Command, CommanderError, InvalidArgumentError } from 'commander';
import type { LabConfig } from '../config/schema.ts';
import type { ClusterStudyDeps } from '../control/cluster-study.ts';
import type { ControlClients, ControlContext } from '../control/context.ts';
import { type ClusterOptions, kubeConfigSource, withClusterOptions } from './cluster-options.ts';
import { loadProgramConfig, resolveStackName, type StackOptions, withStackOptions } from './stack-option.ts';

/** Builds the AWS clients for a region (`undefined`: the SDK's own resolution). */
export type ControlClientFactory = (region: string | undefined) => ControlClients;

export interface StudyCommandOptions {
  /** Default: the real SDK clients (lib/cli/aws-clients.ts), loaded when a command runs. */
  readonly createClients?: ControlClientFactory;
  /** Waits between Run Command polls (tests pass one that returns at once). */
  readonly sleep?: (ms: number) => Promise<void>;
  readonly now?: () => Date;
  /**
   * Ctrl-C while `lab logs --follow` streams from a cluster: calls `stop`; returns what stops
   * listening. Default: the process's SIGINT.
   */
  readonly onInterrupt?: (stop: () => void) => () => void;
}

/** The default download folder of `lab results` from a cluster you bring: per kubeconfig context. */
export function defaultClusterResultsDir(context: string): string {
  return `./results/cluster-${context.replace(/[^A-Za-z0-9._-]/g, '_')}`;
}

/** The default download folder of `lab results`: per stack, and per cell of a network lab. */
export function defaultResultsDir(stackName: string, cell?: string): string {
  return cell === undefined ? `./results/${stackName}` : `./results/${stackName}/${cell}`;
}

interface CellOption {
  readonly cell?: string;
}

/** `--cell` of run, status, results and logs: a network-lab cell's host and results prefix. */
const CELL_OPTION = [
  '--cell <name>',
  'network lab: the cell whose host and results to use (its stack outputs Cell<Name>..., results under <stack>/<cell>/)',
] as const;

/**
 * The cell a study command addresses, checked against the configuration before any AWS call: the
 * network lab has one host per cell, so it needs one; the LLM-gateway lab has none.
 */
function checkedCell(command: string, config: LabConfig, cell: string | undefined): string | undefined {
  if (config.lab !== 'network') {
    if (cell !== undefined) {
      fail(
        command,
        `--cell ${cell}: cells belong to the network lab; this configuration is the LLM-gateway lab (one GPU host)`,
      );
    }
    return undefined;
  }
  const names = config.network.cells.map((c) => c.name);
  if (cell === undefined) {
    fail(command, `the network lab has one host per cell: name one with --cell (cells: ${names.join(', ')})`);
  }
  if (!names.includes(cell))
    fail(command, `--cell ${cell}: no such cell in network.cells (cells: ${names.join(', ')})`);
  return cell;
}

function fail(command: string, message: string): never {
  process.stderr.write(`${command}: ${message}\n`);
  throw new CommanderError(1, 'commander.error', message);
}

function wholeNumber(option: string, min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(
        `${option} must be a whole number from ${min} to ${max}, got "${value}".`,
      );
    }
    return n;
  };
}

interface LogsCommandOptions extends StackOptions {
  readonly tail: number;
  readonly follow?: boolean;
  readonly followFor: number;
  readonly container?: string;
  readonly previous?: boolean;
  readonly namespace?: string;
}

/**
 * `lab run`, `lab status`, `lab results`, `lab logs`: control the study on the AWS testbed from a
 * laptop, through SSM Run Command (no open port, no SSH key) and the results bucket. The AWS SDK
 * and the control modules load when one of them runs, not when the program starts.
 */
export function registerStudyCommands(program: Command, options: StudyCommandOptions = {}): void {
  async function withContext(
    command: string,
    stackName: string,
    region: string | undefined,
    action: (ctx: ControlContext) => Promise<void>,
    cell?: string,
  ): Promise<void> {
    const { AwsCliError } = await import('../aws-cli/errors.ts');
    const { controlContext } = await import('../control/context.ts');
    try {
      const createClients = options.createClients ?? (await import('./aws-clients.ts')).sdkControlClients;
      const clients = createClients(region);
      const base = { command, cell, stackName, clients, write, sleep: options.sleep, now: options.now };
      const resolved = await clients.cloudFormation.config.region().catch((error: unknown) => {
        throw controlContext({ ...base, region: '(no region)' }).errors.explainAwsError(error, 'region', {
          stackName,
          region: '(no region)',
        });
      });
      await action(controlContext({ ...base, region: resolved }));
    } catch (error) {
      if (error instanceof AwsCliError) {
        process.stderr.write(`${command}: ${error.message}\n`);
        throw new CommanderError(1, 'commander.error', error.message);
      }
      throw error;
    }
  }

  /** --kubeconfig / --context given: the command works on a cluster the user brings, through its API. */
  const onCluster = (opts: ClusterOptions): boolean => Boolean(opts.kubeconfig || opts.context);

  async function withCluster(
    command: string,
    opts: ClusterOptions & StackOptions & CellOption,
    action: (deps: ClusterStudyDeps) => Promise<void>,
  ): Promise<void> {
    if (opts.stack !== undefined || opts.region !== undefined || opts.cell !== undefined) {
      fail(
        command,
        "--stack, --region and --cell address the lab's own AWS hosts; --kubeconfig and --context a cluster you bring: use one or the other",
      );
    }
    const config = await loadProgramConfig(program);
    if (config.lab === 'network') {
      fail(
        command,
        "--kubeconfig/--context: the network lab's cells run on their own hosts (npx cdk deploy), not on a cluster you bring",
      );
    }
    const { KubeApiError } = await import('../kube/cluster-api.ts');
    const { clusterApiFor, loadKubeConfig } = await import('../kube/kubeconfig.ts');
    const { ClusterStudyError } = await import('../control/cluster-study.ts');
    try {
      const api = clusterApiFor(loadKubeConfig(kubeConfigSource(opts)));
      const now = options.now ?? (() => new Date());
      const sleep =
        options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
      await action({
        api,
        config,
        clock: { now, sleep },
        write,
        runnerObjects: () => [],
        clusterOptions: kubeConfigSource(opts),
      });
    } catch (error) {
      if (error instanceof KubeApiError || error instanceof ClusterStudyError) {
        fail(command, error.message);
      }
      throw error;
    }
  }

  withClusterOptions(
    withStackOptions(
      program
        .command('run')
        .description(
          'start the study on the testbed, or resume it: a finished or failed runner is started again and resumes the latest unfinished study of this configuration, skipping every run that already has a valid record',
        )
        .option('--new', 'start a fresh study (a new study id and results folder) instead of resuming one')
        .option(
          '--redo-invalid',
          'run the invalid runs of the latest study of this configuration again, even when it finished; every earlier attempt stays on record',
        )
        .option(
          '--smoke',
          'run the smoke study: every arm (network lab: every experiment of the cell) with a tiny load, ending with a checklist of every proof (lab status prints it); see docs/first-run.md',
        )
        .option(...CELL_OPTION),
    ),
  ).action(
    async (
      opts: ClusterOptions &
        StackOptions &
        CellOption & { new?: boolean; redoInvalid?: boolean; smoke?: boolean },
    ) => {
      const chosen = (['new', 'redoInvalid', 'smoke'] as const).filter((o) => opts[o]);
      if (onCluster(opts)) {
        if (chosen.length > 1) {
          fail(
            'lab run',
            '--new, --redo-invalid and --smoke exclude each other: --new starts a fresh study, --redo-invalid runs the invalid runs of the latest one again, --smoke runs the smoke study',
          );
        }
        const { startStudyOnCluster } = await import('../control/cluster-study.ts');
        const { studyRunnerObjects } = await import('../../charts/study-runner.ts');
        await withCluster('lab run', opts, (deps) =>
          startStudyOnCluster(
            {
              ...deps,
              runnerObjects: () =>
                studyRunnerObjects(deps.config) as unknown as ReturnType<ClusterStudyDeps['runnerObjects']>,
            },
            { fresh: opts.new === true, redoInvalid: opts.redoInvalid === true, smoke: opts.smoke === true },
          ),
        );
        return;
      }
      const config = await loadProgramConfig(program);
      const cell = checkedCell('lab run', config, opts.cell);
      if (chosen.length > 1) {
        fail(
          'lab run',
          '--new, --redo-invalid and --smoke exclude each other: --new starts a fresh study, --redo-invalid runs the invalid runs of the latest one again, --smoke runs the smoke study',
        );
      }
      if (opts.redoInvalid && config.lab === 'network') {
        fail(
          'lab run',
          "--redo-invalid: only the LLM-gateway lab's runner redoes invalid runs; a network cell resumes its unfinished study with lab run --cell <name>",
        );
      }
      const { runnerJob } = await import('../control/host-scripts.ts');
      const { startStudy } = await import('../control/study-control.ts');
      await withContext(
        'lab run',
        opts.stack ?? config.stackName,
        opts.region,
        (ctx) =>
          startStudy(ctx, runnerJob(config), {
            fresh: opts.new === true,
            redoInvalid: opts.redoInvalid === true,
            smoke: opts.smoke === true,
          }),
        cell,
      );
    },
  );

  withClusterOptions(
    withStackOptions(
      program
        .command('status')
        .description(
          "show the study's progress: state, runs recorded / valid / invalid, current run and phase, elapsed, ETA (from the host, or the last copy in S3 when the instance is gone)",
        )
        .option(...CELL_OPTION),
    ),
  ).action(async (opts: ClusterOptions & StackOptions & CellOption) => {
    if (onCluster(opts)) {
      const { showStatusOnCluster } = await import('../control/cluster-study.ts');
      await withCluster('lab status', opts, showStatusOnCluster);
      return;
    }
    const config = await loadProgramConfig(program);
    const cell = checkedCell('lab status', config, opts.cell);
    // A cell's host is priced and guarded by network.instance (lib/aws/lab-stack.ts addCellOutputs).
    const instance = cell === undefined ? config.instance : config.network.instance;
    const { runnerJob } = await import('../control/host-scripts.ts');
    const { showStatus } = await import('../control/study-control.ts');
    const { pricePerHour } = await import('../doctor/hosts.ts');
    await withContext(
      'lab status',
      opts.stack ?? config.stackName,
      opts.region,
      (ctx) =>
        showStatus(
          ctx,
          runnerJob(config),
          { pricePerHourUsd: instance.pricePerHourUsd, maxLifetimeHours: instance.maxLifetimeHours },
          (type) => pricePerHour(config, type),
        ),
      cell,
    );
  });

  withClusterOptions(
    withStackOptions(
      program
        .command('results')
        .description(
          'upload the results from the host now (if it runs), then download them from the results bucket; unchanged files are skipped',
        )
        .option(
          '--out <dir>',
          'download folder (default: ./results/<stack>, a cell: ./results/<stack>/<cell>)',
        )
        .option(...CELL_OPTION),
    ),
  ).action(async (opts: ClusterOptions & StackOptions & CellOption & { out?: string }) => {
    if (onCluster(opts)) {
      const { fetchResultsFromCluster } = await import('../control/cluster-study.ts');
      await withCluster('lab results', opts, (deps) =>
        fetchResultsFromCluster(deps, opts.out ?? defaultClusterResultsDir(deps.api.target.context)),
      );
      return;
    }
    // With --stack the configuration is not read: the stack's outputs name its cells.
    const cell =
      opts.stack === undefined
        ? checkedCell('lab results', await loadProgramConfig(program), opts.cell)
        : opts.cell;
    const stackName = await resolveStackName(program, opts);
    const { fetchResults } = await import('../control/study-control.ts');
    await withContext(
      'lab results',
      stackName,
      opts.region,
      (ctx) => fetchResults(ctx, opts.out ?? defaultResultsDir(stackName, cell)),
      cell,
    );
  });

  withClusterOptions(
    withStackOptions(
      program
        .command('logs')
        .description(
          "print a log from the testbed through SSM: the bootstrap's, the study runner's, or a pod's (a replica, a front end, a benchmark client's Job, any pod)",
        )
        .argument('<source>', 'bootstrap | runner | replica | front-end | job | pod')
        .argument(
          '[name]',
          'replica: its index or pod name (qwen3-0, qwen3-kv-1); front-end: a front end or arm id (router-round-robin, epp); job: a benchmark or run id; pod: a pod name',
        )
        .option('--tail <lines>', 'lines from the end of the log', wholeNumber('--tail', 1, 10_000), 200)
        .option(
          '--follow',
          'keep printing new lines: on the lab host polling every 5 s for --follow-for minutes; on a cluster (--kubeconfig/--context) streamed until the container ends or Ctrl-C',
        )
        .option(
          '--follow-for <minutes>',
          'how long --follow polls before it stops and says so',
          wholeNumber('--follow-for', 1, 60),
          10,
        )
        .option('--container <name>', "a pod log: the container (default: the pod's default container)")
        .option('--previous', "a pod log: the previous container's, after a restart or crash")
        .option(
          '--namespace <ns>',
          "pod: the pod's namespace (default: the configuration's namespace; a network-lab cell's: plain, also mesh and mesh-default)",
        )
        .option(...CELL_OPTION),
    ),
  ).action(
    async (
      source: string,
      name: string | undefined,
      opts: ClusterOptions & LogsCommandOptions & CellOption,
    ) => {
      const config = await loadProgramConfig(program);
      const cell = onCluster(opts) ? undefined : checkedCell('lab logs', config, opts.cell);
      const { logSource, LogSourceError, showLogs } = await import('../control/logs.ts');
      let resolved: Awaited<ReturnType<typeof logSource>>;
      try {
        resolved = await logSource(config, source, name, opts);
      } catch (error) {
        if (!(error instanceof LogSourceError)) throw error;
        process.stderr.write(`lab logs: ${error.message}\n`);
        throw new CommanderError(1, 'commander.error', error.message);
      }
      if (onCluster(opts)) {
        const { followClusterLogs, showClusterLogs } = await import('../control/cluster-logs.ts');
        if (!opts.follow) {
          await withCluster('lab logs', opts, (deps) =>
            showClusterLogs(deps.api, deps.config, resolved, opts.tail, write),
          );
          return;
        }
        // Streamed by the API until the container ends or Ctrl-C (--follow-for is the host's polls).
        const interrupted = new AbortController();
        const listen = options.onInterrupt ?? onSigint;
        const unlisten = listen(() => interrupted.abort());
        try {
          await withCluster('lab logs', opts, async (deps) => {
            await followClusterLogs(
              deps.api,
              deps.config,
              resolved,
              opts.tail,
              { write, print: (text) => process.stdout.write(text) },
              interrupted.signal,
            );
          });
        } finally {
          unlisten();
        }
        return;
      }
      await withContext(
        'lab logs',
        opts.stack ?? config.stackName,
        opts.region,
        (ctx) =>
          showLogs(ctx, resolved, {
            tailLines: opts.tail,
            followPolls: opts.follow ? (opts.followFor * 60) / FOLLOW_POLL_SECONDS : 0,
            pollMs: FOLLOW_POLL_SECONDS * 1000,
            note: (line) => process.stderr.write(`${line}\n`),
          }),
        cell,
      );
    },
  );
}

/** How often `lab logs --follow` asks the host for new lines: one Run Command each time. */
export const FOLLOW_POLL_SECONDS = 5;

/** Ctrl-C: `stop` instead of Node's default exit, until the returned function is called. */
function onSigint(stop: () => void): () => void {
  process.on('SIGINT', stop);
  return () => process.off('SIGINT', stop);
}

function write(line: string): void {
  process.stdout.write(`${line}\n`);
}
