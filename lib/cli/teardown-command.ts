import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { EC2Client } from '@aws-sdk/client-ec2';
import { IAMClient } from '@aws-sdk/client-iam';
import { type Command, CommanderError } from 'commander';
import { explainAwsError, TeardownError } from '../teardown/errors.ts';
import { executeTeardown } from '../teardown/execute.ts';
import { formatOutcome, formatPlan, summarizePlan } from '../teardown/format.ts';
import { planIsEmpty, planTeardown, type TeardownClients } from '../teardown/plan.ts';

interface TeardownOptions {
  readonly stack: string;
  readonly region?: string;
  readonly yes?: boolean;
}

/** Builds the AWS clients for a region (`undefined`: the SDK's own resolution). */
export type TeardownClientFactory = (region: string | undefined) => TeardownClients;

/** Real SDK v3 clients with the standard credential chain. */
export function sdkClients(region: string | undefined): TeardownClients {
  const config = region ? { region } : {};
  return {
    cloudFormation: new CloudFormationClient(config),
    iam: new IAMClient(config),
    ec2: new EC2Client(config),
  };
}

function fail(message: string): never {
  process.stderr.write(`lab teardown: ${message}\n`);
  throw new CommanderError(1, 'commander.error', message);
}

/**
 * `lab teardown --stack <name>`: recovery for a stack whose `cdk destroy` failed (or is about to)
 * because policies the stack never declared sit on its roles, or because an instance it no longer
 * tracks still runs. Prints the plan; acts only with `--yes`.
 */
export function registerTeardownCommand(
  program: Command,
  createClients: TeardownClientFactory = sdkClients,
): void {
  program
    .command('teardown')
    .description(
      'strip policies the stack did not declare from its IAM roles and terminate untracked lab instances, so that cdk destroy can finish (prints the plan; acts only with --yes)',
    )
    .requiredOption('--stack <name>', 'the CloudFormation stack of the lab (its stackName setting)')
    .option('--region <region>', "the stack's region (default: the AWS SDK's: AWS_REGION, then the profile)")
    .option('--yes', 'do what the plan says (detach and delete the policies, terminate the instances)')
    .action(async (options: TeardownOptions) => {
      const write = (line: string) => process.stdout.write(`${line}\n`);
      try {
        const clients = createClients(options.region);
        const region = await clients.cloudFormation.config.region().catch((error: unknown) => {
          throw explainAwsError(error, 'region', { stackName: options.stack, region: '(no region)' });
        });
        const plan = await planTeardown(clients, options.stack, region);
        for (const line of formatPlan(plan)) write(line);
        write(summarizePlan(plan));
        if (planIsEmpty(plan)) return;
        if (!options.yes) {
          write(
            `Nothing was changed. Run again with --yes to do this, then run cdk destroy again: npx cdk destroy ${plan.stackName}`,
          );
          return;
        }
        const outcome = await executeTeardown(clients, plan, write);
        write(formatOutcome(plan, outcome));
      } catch (error) {
        if (error instanceof TeardownError) fail(error.message);
        throw error;
      }
    });
}
