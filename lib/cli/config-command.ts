import type { Command } from 'commander';
import { stringify } from 'yaml';
import { loadLabConfig } from '../config/load.ts';
import { labSettings } from '../config/sections.ts';

/** `lab config`: print the effective configuration and validate it. */
export function registerConfigCommand(program: Command): void {
  program
    .command('config')
    .description('print the effective configuration (defaults merged with overrides) and validate it')
    .option('--json', 'print JSON instead of YAML')
    .action((options: { json?: boolean }) => {
      const { config, source, warnings } = loadLabConfig({ file: program.opts().config });
      const settings = labSettings(config);
      process.stdout.write(options.json ? `${JSON.stringify(settings, null, 2)}\n` : stringify(settings));
      process.stderr.write(`# configuration: ${source}; valid\n`);
      for (const warning of warnings) process.stderr.write(`warning: ${warning}\n`);
    });
}
