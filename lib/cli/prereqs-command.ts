import { type Command, CommanderError } from 'commander';
import type { PrerequisiteList } from '../prereqs/prerequisites.ts';
import { onCluster } from './cluster-commands.ts';
import { type ClusterOptions, withClusterOptions } from './cluster-options.ts';

interface PrereqsOptions extends ClusterOptions {
  readonly json?: boolean;
  readonly cell?: string;
  readonly apply?: boolean;
}

function fail(message: string): never {
  process.stderr.write(`lab prereqs: ${message}\n`);
  throw new CommanderError(1, 'commander.error', message);
}

/**
 * `lab prereqs`: the commands that install the third-party prerequisites, in order; with
 * `--apply`, the prerequisites themselves applied to a cluster through its API, as `lab install`
 * applies them before the lab's charts.
 */
export function registerPrereqsCommand(program: Command): void {
  withClusterOptions(
    program
      .command('prereqs')
      .description(
        'print the commands that install the prerequisites (CRDs, controllers) before the lab manifests; with --apply, install them on a cluster (kubeconfig) and wait for them',
      )
      .option(
        '--json',
        'print the list as JSON (as in dist/prerequisites.json, or dist/<cell>/ for the network lab)',
      )
      .option('--cell <name>', 'network lab: only this cell (default: every cell)')
      .option(
        '--apply',
        "apply the prerequisites through the cluster's API (server-side, CRDs waited Established; Helm releases checked) instead of printing them",
      ),
  ).action(async (options: PrereqsOptions) => {
    const { loadLabConfig } = await import('../config/load.ts');
    const { networkPrerequisites, prerequisiteScript, prerequisites } = await import(
      '../prereqs/prerequisites.ts'
    );
    const { config } = loadLabConfig({ file: program.opts().config });
    if (!options.apply && (options.kubeconfig || options.context)) {
      fail(
        '--kubeconfig and --context choose the cluster for --apply: add --apply, or leave them out to print the commands',
      );
    }
    if (options.apply && options.json) {
      fail('--json prints the list; --apply installs it: use one of them');
    }
    if (config.lab === 'network') {
      // One cluster per cell, each with its own prerequisites (dist/<cell>/prerequisites.json).
      const names = config.network.cells.map((c) => c.name);
      if (options.cell && !names.includes(options.cell)) {
        fail(`--cell ${options.cell}: no such cell in network.cells (cells: ${names.join(', ')})`);
      }
      if (options.apply) {
        // A kubeconfig context is one cluster, and each cell is a cluster of its own.
        const name = options.cell ?? (names.length === 1 ? names[0] : undefined);
        const cell = config.network.cells.find((c) => c.name === name);
        if (cell === undefined) {
          fail(
            `--apply installs one cell's prerequisites on that cell's cluster: add --cell <name> (cells: ${names.join(', ')})`,
          );
        }
        await applyList('prereqs', options, () => networkPrerequisites(config, cell));
        return;
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
    if (options.apply) {
      await applyList('prereqs', options, () => prerequisites(config));
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

async function applyList(name: string, options: ClusterOptions, list: () => PrerequisiteList): Promise<void> {
  const { installPrerequisites } = await import('../install/prerequisites.ts');
  await onCluster(name, options, (session) => installPrerequisites(list(), session));
}
