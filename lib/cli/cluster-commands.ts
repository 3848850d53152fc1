import { type Command, CommanderError } from 'commander';
import { type ClusterOptions, kubeConfigSource, withClusterOptions } from './cluster-options.ts';

/** Fetches a prerequisite's release asset (GitHub redirects release downloads; fetch follows). */
async function download(url: string): Promise<string> {
  const response = await fetch(url, { signal: AbortSignal.timeout(120_000) });
  if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`);
  return response.text();
}

/**
 * `lab install` and `lab uninstall`: the lab on a cluster the user brings, through the Kubernetes
 * API (never kubectl). Errors are one line and exit 1.
 */
export interface ClusterCommandOptions {
  /** The waits' clock (tests pass a fake one). */
  readonly clock?: { now(): Date; sleep(ms: number): Promise<void> };
  /** Fetches a prerequisite's release asset (tests serve their own). */
  readonly download?: (url: string) => Promise<string>;
}

export function registerClusterCommands(program: Command, commandOptions: ClusterCommandOptions = {}): void {
  const run = async (
    name: string,
    options: ClusterOptions & { deleteResults?: boolean },
    action: 'install' | 'uninstall',
  ) => {
    const { loadLabConfig } = await import('../config/load.ts');
    const { KubeApiError } = await import('../kube/cluster-api.ts');
    const { clusterApiFor, loadKubeConfig } = await import('../kube/kubeconfig.ts');
    const { InstallStopped, installLab } = await import('../install/install.ts');
    const { installPlan } = await import('../install/plan.ts');
    const { uninstallLab } = await import('../install/uninstall.ts');
    const write = (line: string) => process.stdout.write(`${line}\n`);
    const clock = commandOptions.clock ?? {
      now: () => new Date(),
      sleep: (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
    };
    try {
      const { config } = loadLabConfig({ file: program.opts().config });
      const plan = installPlan(config);
      const api = clusterApiFor(loadKubeConfig(kubeConfigSource(options)));
      if (action === 'install')
        await installLab(plan, { api, clock, write, download: commandOptions.download ?? download });
      else
        await uninstallLab(plan, config.namespace, {
          api,
          clock,
          write,
          deleteResults: options.deleteResults === true,
        });
    } catch (error) {
      if (error instanceof KubeApiError || error instanceof InstallStopped || isPlanError(error)) {
        const message = (error as Error).message;
        process.stderr.write(`lab ${name}: ${message}\n`);
        throw new CommanderError(1, `lab.${name}.failed`, message);
      }
      throw error;
    }
  };
  withClusterOptions(
    program
      .command('install')
      .description(
        'install the prerequisites and the lab on an existing cluster (kubeconfig), checking first what it must offer and waiting for each step',
      ),
  ).action((options: ClusterOptions) => run('install', options, 'install'));
  withClusterOptions(
    program
      .command('uninstall')
      .description(
        'remove from the cluster what lab install and the study created (labelled objects only), and say what is left; the results claim stays unless --delete-results',
      )
      .option(
        '--delete-results',
        "also delete the results claim (the study's results) and the lab's namespace",
      ),
  ).action((options: ClusterOptions & { deleteResults?: boolean }) => run('uninstall', options, 'uninstall'));
}

function isPlanError(error: unknown): boolean {
  return error instanceof Error && /^lab install installs the LLM-gateway lab/.test(error.message);
}
