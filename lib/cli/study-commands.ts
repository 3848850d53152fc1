import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { EC2Client } from '@aws-sdk/client-ec2';
import { S3Client } from '@aws-sdk/client-s3';
import { SSMClient } from '@aws-sdk/client-ssm';
import { type Command, CommanderError } from 'commander';
import { AwsCliError } from '../aws-cli/errors.ts';
import { loadLabConfig } from '../config/load.ts';
import { type ControlClients, type ControlContext, controlContext } from '../control/context.ts';
import { runnerJob } from '../control/host-scripts.ts';
import { fetchResults, showStatus, startStudy } from '../control/study-control.ts';

/** Builds the AWS clients for a region (`undefined`: the SDK's own resolution). */
export type ControlClientFactory = (region: string | undefined) => ControlClients;

/** Real SDK v3 clients with the standard credential chain. */
export function sdkControlClients(region: string | undefined): ControlClients {
  const config = region ? { region } : {};
  return {
    cloudFormation: new CloudFormationClient(config),
    ec2: new EC2Client(config),
    ssm: new SSMClient(config),
    s3: new S3Client(config),
  };
}

export interface StudyCommandOptions {
  readonly createClients?: ControlClientFactory;
  /** Waits between Run Command polls (tests pass one that returns at once). */
  readonly sleep?: (ms: number) => Promise<void>;
  readonly now?: () => Date;
}

interface StackOptions {
  readonly stack: string;
  readonly region?: string;
}

/** The default download folder of `lab results`. */
export function defaultResultsDir(stackName: string): string {
  return `./results/${stackName}`;
}

/**
 * `lab run`, `lab status`, `lab results`: control the study on the AWS testbed from a laptop,
 * through SSM Run Command (no open port, no SSH key) and the results bucket.
 */
export function registerStudyCommands(program: Command, options: StudyCommandOptions = {}): void {
  const createClients = options.createClients ?? sdkControlClients;

  async function withContext(
    command: string,
    stack: StackOptions,
    action: (ctx: ControlContext) => Promise<void>,
  ): Promise<void> {
    try {
      const clients = createClients(stack.region);
      const base = {
        command,
        stackName: stack.stack,
        clients,
        write,
        sleep: options.sleep,
        now: options.now,
      };
      const region = await clients.cloudFormation.config.region().catch((error: unknown) => {
        throw controlContext({ ...base, region: '(no region)' }).errors.explainAwsError(error, 'region', {
          stackName: stack.stack,
          region: '(no region)',
        });
      });
      await action(controlContext({ ...base, region }));
    } catch (error) {
      if (error instanceof AwsCliError) {
        process.stderr.write(`${command}: ${error.message}\n`);
        throw new CommanderError(1, 'commander.error', error.message);
      }
      throw error;
    }
  }

  const stackOption = (command: Command) =>
    command
      .requiredOption('--stack <name>', 'the CloudFormation stack of the lab (its stackName setting)')
      .option(
        '--region <region>',
        "the stack's region (default: the AWS SDK's: AWS_REGION, then the profile)",
      );

  stackOption(
    program
      .command('run')
      .description(
        'start the study on the testbed, or resume it: a finished or failed runner is started again and resumes the latest unfinished study of this configuration, skipping every run that already has a valid record',
      )
      .option('--new', 'start a fresh study (a new study id and results folder) instead of resuming one'),
  ).action(async (opts: StackOptions & { new?: boolean }) => {
    const { config } = loadLabConfig({ file: program.opts().config });
    await withContext('lab run', opts, (ctx) =>
      startStudy(ctx, runnerJob(config), { fresh: opts.new === true }),
    );
  });

  stackOption(
    program
      .command('status')
      .description(
        "show the study's progress: state, runs recorded / valid / invalid, current run and phase, elapsed, ETA (from the host, or the last copy in S3 when the instance is gone)",
      ),
  ).action(async (opts: StackOptions) => {
    const { config } = loadLabConfig({ file: program.opts().config });
    await withContext('lab status', opts, (ctx) =>
      showStatus(ctx, runnerJob(config), {
        pricePerHourUsd: config.instance.pricePerHourUsd,
        maxLifetimeHours: config.instance.maxLifetimeHours,
      }),
    );
  });

  stackOption(
    program
      .command('results')
      .description(
        'upload the results from the host now (if it runs), then download them from the results bucket; unchanged files are skipped',
      )
      .option('--out <dir>', 'download folder (default: ./results/<stack>)'),
  ).action(async (opts: StackOptions & { out?: string }) => {
    await withContext('lab results', opts, (ctx) =>
      fetchResults(ctx, opts.out ?? defaultResultsDir(opts.stack)),
    );
  });
}

function write(line: string): void {
  process.stdout.write(`${line}\n`);
}
