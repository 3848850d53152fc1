import { type Command, CommanderError, InvalidArgumentError } from 'commander';
import type { ControlClients, ControlContext } from '../control/context.ts';
import { loadProgramConfig, resolveStackName, type StackOptions, withStackOptions } from './stack-option.ts';

/** Builds the AWS clients for a region (`undefined`: the SDK's own resolution). */
export type ControlClientFactory = (region: string | undefined) => ControlClients;

export interface StudyCommandOptions {
  /** Default: the real SDK clients (lib/cli/aws-clients.ts), loaded when a command runs. */
  readonly createClients?: ControlClientFactory;
  /** Waits between Run Command polls (tests pass one that returns at once). */
  readonly sleep?: (ms: number) => Promise<void>;
  readonly now?: () => Date;
}

/** The default download folder of `lab results`. */
export function defaultResultsDir(stackName: string): string {
  return `./results/${stackName}`;
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
  ): Promise<void> {
    const { AwsCliError } = await import('../aws-cli/errors.ts');
    const { controlContext } = await import('../control/context.ts');
    try {
      const createClients = options.createClients ?? (await import('./aws-clients.ts')).sdkControlClients;
      const clients = createClients(region);
      const base = { command, stackName, clients, write, sleep: options.sleep, now: options.now };
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

  withStackOptions(
    program
      .command('run')
      .description(
        'start the study on the testbed, or resume it: a finished or failed runner is started again and skips every run that already has a valid record',
      ),
  ).action(async (opts: StackOptions) => {
    const config = await loadProgramConfig(program);
    const { runnerJob } = await import('../control/host-scripts.ts');
    const { startStudy } = await import('../control/study-control.ts');
    await withContext('lab run', opts.stack ?? config.stackName, opts.region, (ctx) =>
      startStudy(ctx, runnerJob(config)),
    );
  });

  withStackOptions(
    program
      .command('status')
      .description(
        "show the study's progress: state, runs recorded / valid / invalid, current run and phase, elapsed, ETA (from the host, or the last copy in S3 when the instance is gone)",
      ),
  ).action(async (opts: StackOptions) => {
    const config = await loadProgramConfig(program);
    const { runnerJob } = await import('../control/host-scripts.ts');
    const { showStatus } = await import('../control/study-control.ts');
    await withContext('lab status', opts.stack ?? config.stackName, opts.region, (ctx) =>
      showStatus(ctx, runnerJob(config)),
    );
  });

  withStackOptions(
    program
      .command('results')
      .description(
        'upload the results from the host now (if it runs), then download them from the results bucket; unchanged files are skipped',
      )
      .option('--out <dir>', 'download folder (default: ./results/<stack>)'),
  ).action(async (opts: StackOptions & { out?: string }) => {
    const stackName = await resolveStackName(program, opts);
    const { fetchResults } = await import('../control/study-control.ts');
    await withContext('lab results', stackName, opts.region, (ctx) =>
      fetchResults(ctx, opts.out ?? defaultResultsDir(stackName)),
    );
  });

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
      .option('--follow', 'keep printing new lines, polling the host every 5 s, for --follow-for minutes')
      .option(
        '--follow-for <minutes>',
        'how long --follow polls before it stops and says so',
        wholeNumber('--follow-for', 1, 60),
        10,
      )
      .option('--container <name>', "a pod log: the container (default: the pod's default container)")
      .option('--previous', "a pod log: the previous container's, after a restart or crash")
      .option('--namespace <ns>', "pod: the pod's namespace (default: the configuration's namespace)"),
  ).action(async (source: string, name: string | undefined, opts: LogsCommandOptions) => {
    const config = await loadProgramConfig(program);
    const { logSource, LogSourceError, showLogs } = await import('../control/logs.ts');
    let resolved: Awaited<ReturnType<typeof logSource>>;
    try {
      resolved = await logSource(config, source, name, opts);
    } catch (error) {
      if (!(error instanceof LogSourceError)) throw error;
      process.stderr.write(`lab logs: ${error.message}\n`);
      throw new CommanderError(1, 'commander.error', error.message);
    }
    await withContext('lab logs', opts.stack ?? config.stackName, opts.region, (ctx) =>
      showLogs(ctx, resolved, {
        tailLines: opts.tail,
        followPolls: opts.follow ? (opts.followFor * 60) / FOLLOW_POLL_SECONDS : 0,
        pollMs: FOLLOW_POLL_SECONDS * 1000,
        note: (line) => process.stderr.write(`${line}\n`),
      }),
    );
  });
}

/** How often `lab logs --follow` asks the host for new lines: one Run Command each time. */
export const FOLLOW_POLL_SECONDS = 5;

function write(line: string): void {
  process.stdout.write(`${line}\n`);
}
