import { type Command, CommanderError } from 'commander';
import type { TeardownClients } from '../teardown/plan.ts';
import { resolveStackName, type StackOptions, withStackOptions } from './stack-option.ts';

interface TeardownOptions extends StackOptions {
  readonly yes?: boolean;
}

/** Builds the AWS clients for a region (`undefined`: the SDK's own resolution). */
export type TeardownClientFactory = (region: string | undefined) => TeardownClients;

function fail(message: string): never {
  process.stderr.write(`lab teardown: ${message}\n`);
  throw new CommanderError(1, 'commander.error', message);
}

/**
 * `lab teardown`: recovery for a stack whose `cdk destroy` failed (or is about to) because
 * policies the stack never declared sit on its roles, or because an instance it no longer tracks
 * still runs. Prints the plan; acts only with `--yes`. The stack defaults to the configuration's
 * stackName; the AWS SDK loads only when the command runs.
 */
export function registerTeardownCommand(program: Command, createClients?: TeardownClientFactory): void {
  withStackOptions(
    program
      .command('teardown')
      .description(
        'strip policies the stack did not declare from its IAM roles and terminate untracked lab instances, so that cdk destroy can finish (prints the plan; acts only with --yes)',
      ),
  )
    .option('--yes', 'do what the plan says (detach and delete the policies, terminate the instances)')
    .action(async (options: TeardownOptions) => {
      const stackName = await resolveStackName(program, options);
      const { explainAwsError, TeardownError } = await import('../teardown/errors.ts');
      const { executeTeardown } = await import('../teardown/execute.ts');
      const { formatOutcome, formatPlan, summarizePlan } = await import('../teardown/format.ts');
      const { planIsEmpty, planTeardown } = await import('../teardown/plan.ts');
      const write = (line: string) => process.stdout.write(`${line}\n`);
      try {
        const clients = (createClients ?? (await import('./aws-clients.ts')).sdkTeardownClients)(
          options.region,
        );
        const region = await clients.cloudFormation.config.region().catch((error: unknown) => {
          throw explainAwsError(error, 'region', { stackName, region: '(no region)' });
        });
        const plan = await planTeardown(clients, stackName, region);
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
