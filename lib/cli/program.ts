import { Command } from 'commander';
import { LAB_CONFIG_ENV } from '../config/load.ts';
import { LabConfigError } from '../config/problems.ts';
import { registerCheckCommand } from './check-command.ts';
import { registerConfigCommand } from './config-command.ts';
import { registerPlanCommand } from './plan-command.ts';
import { registerPrereqsCommand } from './prereqs-command.ts';
import { registerReportCommand } from './report-command.ts';
import { registerStudyCommands } from './study-commands.ts';
import { registerTeardownCommand } from './teardown-command.ts';

/** The `lab` command line. Each subcommand lives in its own module and registers itself here. */
export function labProgram(): Command {
  const program = new Command('lab')
    .description('LLM-gateway benchmark lab: configure, check and plan the testbed and its study')
    .option(
      '-c, --config <file>',
      `override file (YAML); default: $${LAB_CONFIG_ENV}, else the built-in defaults`,
    )
    .showHelpAfterError()
    .configureOutput({ outputError: (text, write) => write(text) });
  registerConfigCommand(program);
  registerCheckCommand(program);
  registerPlanCommand(program);
  registerPrereqsCommand(program);
  registerReportCommand(program);
  registerTeardownCommand(program);
  registerStudyCommands(program);
  return program;
}

/** Runs the CLI; known errors become a message and exit code 1, not a stack trace. */
export async function runLab(argv: readonly string[]): Promise<number> {
  try {
    await labProgram().exitOverride().parseAsync(argv, { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof LabConfigError) {
      process.stderr.write(`${error.message}\n`);
      return 1;
    }
    const code = (error as { code?: string; exitCode?: number }).code;
    if (typeof code === 'string' && code.startsWith('commander.')) {
      return (error as { exitCode: number }).exitCode;
    }
    throw error;
  }
}
