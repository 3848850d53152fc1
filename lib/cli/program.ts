import { Command, CommanderError } from 'commander';
import { LabConfigError } from '../config/problems.ts';
import { registerCheckCommand } from './check-command.ts';
import { registerClusterCommands } from './cluster-commands.ts';
import { registerConfigCommand } from './config-command.ts';
import { registerDoctorCommand } from './doctor-command.ts';
import { oneLineError } from './messages.ts';
import { registerPlanCommand } from './plan-command.ts';
import { registerPrereqsCommand } from './prereqs-command.ts';
import { registerReportCommand } from './report-command.ts';
import { registerStudyCommands } from './study-commands.ts';
import { registerTeardownCommand } from './teardown-command.ts';

/** lib/config/load.ts's LAB_CONFIG_ENV, spelled out: that module loads zod, which `lab --help` need not wait for. */
const LAB_CONFIG_ENV = 'LAB_CONFIG';

/**
 * The `lab` command line. Each subcommand lives in its own module and registers itself here;
 * registering loads only commander: a command's modules (zod, the AWS SDK, vega, the Kubernetes
 * schemas) load in its action, when it runs.
 */
export function labProgram(): Command {
  const program = new Command('lab')
    .description('LLM-gateway benchmark lab: configure, check and plan the testbed and its study')
    .option(
      '-c, --config <file>',
      `override file (YAML); default: $${LAB_CONFIG_ENV}, else the built-in defaults`,
    );
  registerConfigCommand(program);
  registerCheckCommand(program);
  registerPlanCommand(program);
  registerPrereqsCommand(program);
  registerDoctorCommand(program);
  registerClusterCommands(program);
  registerReportCommand(program);
  registerTeardownCommand(program);
  registerStudyCommands(program);
  oneLineErrors(program, 'lab');
  return program;
}

/** Every command writes its usage errors as one line that names it (see messages.ts). */
function oneLineErrors(command: Command, path: string): void {
  command.configureOutput({ outputError: (text, write) => write(oneLineError(path, text)) });
  for (const sub of command.commands) oneLineErrors(sub, `${path} ${sub.name()}`);
}

/**
 * Every command throws its usage error instead of calling process.exit: a subcommand does not
 * inherit exitOverride() set on its parent after it was added, and a process.exit deep in
 * commander would skip the caller's clean-up.
 */
function throwingOnExit(command: Command): Command {
  command.exitOverride();
  for (const sub of command.commands) throwingOnExit(sub);
  return command;
}

/** Runs the CLI; known errors become a message and exit code 1, not a stack trace. */
export async function runLab(argv: readonly string[]): Promise<number> {
  try {
    await throwingOnExit(labProgram()).parseAsync(argv, { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode;
    if (error instanceof LabConfigError) {
      process.stderr.write(`${error.message}\n`);
      return 1;
    }
    throw error;
  }
}
