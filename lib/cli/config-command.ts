import type { Command } from 'commander';

/** `lab config`: print the effective configuration and validate it. */
export function registerConfigCommand(program: Command): void {
  program
    .command('config')
    .description('print the effective configuration (defaults merged with overrides) and validate it')
    .option('--json', 'print JSON instead of YAML')
    .action(async (options: { json?: boolean }) => {
      const { loadLabConfig } = await import('../config/load.ts');
      const { stringify } = await import('yaml');
      const { labSettings } = await import('../config/sections.ts');
      const { config, source, warnings } = loadLabConfig({ file: program.opts().config });
      const settings = labSettings(config);
      process.stdout.write(options.json ? `${JSON.stringify(settings, null, 2)}\n` : stringify(settings));
      process.stderr.write(`# configuration: ${source}; valid\n`);
      for (const warning of warnings) process.stderr.write(`warning: ${warning}\n`);
    });
}
