import { type Command, CommanderError } from 'commander';
import type { ClusterApi } from '../kube/cluster-api.ts';
import type { Clock } from '../runner/ports.ts';
import { type ClusterOptions, kubeConfigSource, withClusterOptions } from './cluster-options.ts';

/** Fetches a prerequisite's release asset (GitHub redirects release downloads; fetch follows). */
async function download(url: string): Promise<string> {
  const response = await fetch(url, { signal: AbortSignal.timeout(120_000) });
  if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`);
  return response.text();
}

/** What a command that talks to a cluster is given: the API and the clock, a line writer, a downloader. */
export interface ClusterSession {
  readonly api: ClusterApi;
  readonly clock: Clock;
  readonly write: (line: string) => void;
  readonly download: (url: string) => Promise<string>;
}

/**
 * Runs a command against the cluster the options name (kubectl's rules). What the user can act on
 * (a bad kubeconfig, an unreachable server, refused credentials or RBAC, a stop of the install) is
 * one line on stderr and exit 1; anything else is a bug and propagates.
 */
export async function onCluster(
  name: string,
  options: ClusterOptions,
  act: (session: ClusterSession) => Promise<void>,
  overrides: ClusterCommandOptions = {},
): Promise<void> {
  const { KubeApiError } = await import('../kube/cluster-api.ts');
  const { clusterApiFor, loadKubeConfig } = await import('../kube/kubeconfig.ts');
  const { InstallStopped } = await import('../install/apply.ts');
  const write = (line: string) => process.stdout.write(`${line}\n`);
  const clock = overrides.clock ?? {
    now: () => new Date(),
    sleep: (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
  };
  try {
    const api = clusterApiFor(loadKubeConfig(kubeConfigSource(options)));
    await act({ api, clock, write, download: overrides.download ?? download });
  } catch (error) {
    if (error instanceof KubeApiError || error instanceof InstallStopped || isPlanError(error)) {
      const message = (error as Error).message;
      process.stderr.write(`lab ${name}: ${message}\n`);
      throw new CommanderError(1, `lab.${name}.failed`, message);
    }
    throw error;
  }
}

/** What tests swap in a cluster command: the waits' clock and the release download. */
export interface ClusterCommandOptions {
  readonly clock?: Clock;
  /** Fetches a prerequisite's release asset. */
  readonly download?: (url: string) => Promise<string>;
}

/**
 * `lab install` and `lab uninstall`: the lab on a cluster the user brings, through the Kubernetes
 * API (never kubectl). Errors are one line and exit 1.
 */
export function registerClusterCommands(program: Command, commandOptions: ClusterCommandOptions = {}): void {
  const run = async (
    name: string,
    options: ClusterOptions & { deleteResults?: boolean },
    action: 'install' | 'uninstall',
  ) => {
    const { loadLabConfig } = await import('../config/load.ts');
    const { installLab } = await import('../install/install.ts');
    const { installPlan } = await import('../install/plan.ts');
    const { uninstallLab } = await import('../install/uninstall.ts');
    await onCluster(
      name,
      options,
      async (session) => {
        const { config } = loadLabConfig({ file: program.opts().config });
        const plan = installPlan(config);
        if (action === 'install') await installLab(plan, session);
        else
          await uninstallLab(plan, config.namespace, {
            ...session,
            deleteResults: options.deleteResults === true,
          });
      },
      commandOptions,
    );
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
