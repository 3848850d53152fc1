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
      const { config, source, warnings } = loadLabConfig({ file: program.opts().config });
      process.stdout.write(options.json ? `${JSON.stringify(config, null, 2)}\n` : stringify(config));
      process.stderr.write(`# configuration: ${source}; valid\n`);
      for (const warning of warnings) process.stderr.write(`warning: ${warning}\n`);
    });
}
