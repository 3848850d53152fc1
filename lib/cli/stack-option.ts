import type { Command } from 'commander';
import type { LabConfig } from '../config/schema.ts';

/** `--stack` and `--region` as the commands that talk to a deployed lab take them. */
export interface StackOptions {
  readonly stack?: string;
  readonly region?: string;
}

/** Adds `--stack` (default: the configuration's stackName) and `--region` to a command. */
export function withStackOptions(command: Command): Command {
  return command
    .option(
      '--stack <name>',
      "the lab's CloudFormation stack (default: the configuration's stackName, chosen by --config or $LAB_CONFIG)",
    )
    .option('--region <region>', "the stack's region (default: the AWS SDK's: AWS_REGION, then the profile)");
}

/** The configuration as `--config` or `$LAB_CONFIG` select it; loaded on use (zod is not free). */
export async function loadProgramConfig(program: Command): Promise<LabConfig> {
  const { loadLabConfig } = await import('../config/load.ts');
  return loadLabConfig({ file: program.opts().config }).config;
}

/**
 * The stack for a command that needs the configuration for nothing else: an explicit `--stack`
 * does not load (or validate) the configuration at all.
 */
export async function resolveStackName(program: Command, options: StackOptions): Promise<string> {
  return options.stack ?? (await loadProgramConfig(program)).stackName;
}
