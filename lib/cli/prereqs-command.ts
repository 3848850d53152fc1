import { type Command, CommanderError } from 'commander';

/** `lab prereqs`: the commands that install the third-party prerequisites, in order. */
export function registerPrereqsCommand(program: Command): void {
  program
    .command('prereqs')
    .description(
      'print the commands that install the prerequisites (CRDs, controllers) before the lab manifests',
    )
    .option(
      '--json',
      'print the list as JSON (as in dist/prerequisites.json, or dist/<cell>/ for the network lab)',
    )
    .option('--cell <name>', 'network lab: only this cell (default: every cell)')
    .action(async (options: { json?: boolean; cell?: string }) => {
      const { loadLabConfig } = await import('../config/load.ts');
      const { networkPrerequisites, prerequisiteScript, prerequisites } = await import(
        '../prereqs/prerequisites.ts'
      );
      const { config } = loadLabConfig({ file: program.opts().config });
      if (config.lab === 'network') {
        // One cluster per cell, each with its own prerequisites (dist/<cell>/prerequisites.json).
        const names = config.network.cells.map((c) => c.name);
        if (options.cell && !names.includes(options.cell)) {
          const message = `--cell ${options.cell}: no such cell in network.cells (cells: ${names.join(', ')})`;
          process.stderr.write(`lab prereqs: ${message}\n`);
          throw new CommanderError(1, 'commander.error', message);
        }
        const cells = config.network.cells.filter((c) => !options.cell || c.name === options.cell);
        const lists = cells.map((cell) => ({ cell: cell.name, list: networkPrerequisites(config, cell) }));
        if (options.json) {
          const json = options.cell ? lists[0].list : Object.fromEntries(lists.map((l) => [l.cell, l.list]));
          process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
          return;
        }
        const lines = lists.flatMap(({ cell, list }) => [
          `# ---- cell ${cell}: on its own cluster, in dist/${cell}/ ----`,
          ...(list.prerequisites.length > 0 ? prerequisiteScript(list) : ['# (nothing to install first)']),
        ]);
        process.stdout.write(`${lines.join('\n')}\n`);
        return;
      }
      const list = prerequisites(config);
      if (options.json) {
        process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
        return;
      }
      process.stdout.write(`${prerequisiteScript(list).join('\n')}\n`);
    });
}
