import type { Command } from 'commander';

/** `--kubeconfig` and `--context`: the commands that talk to a cluster the user brings. */
export interface ClusterOptions {
  readonly kubeconfig?: string;
  readonly context?: string;
}

/** Adds the cluster options with kubectl's meaning (KUBECONFIG, then ~/.kube/config). */
export function withClusterOptions(command: Command): Command {
  return command
    .option('--kubeconfig <file>', 'kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config)')
    .option('--context <name>', "kubeconfig context (default: the kubeconfig's current context)");
}

/** The options as loadKubeConfig takes them (absent ones left out). */
export function kubeConfigSource(options: ClusterOptions): { kubeconfig?: string; context?: string } {
  return {
    ...(options.kubeconfig ? { kubeconfig: options.kubeconfig } : {}),
    ...(options.context ? { context: options.context } : {}),
  };
}
