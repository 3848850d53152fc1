import type { ResultsVolume } from '../config/results-volume.ts';
import type { KubeObject } from '../kube/cluster-api.ts';

/**
 * `runner.results.upload` runs as a native sidecar (charts/results-upload.ts), which needs
 * Kubernetes 1.29 or later on the runner's node (docs/facts.md §6.4). An older kubelet would run
 * it as a plain init container that never ends, and the runner would never start: say so before
 * installing.
 */

/** The first Kubernetes minor version whose kubelet runs native sidecars by default. */
export const SIDECAR_MIN_MINOR = 29;

/** `v1.30.4-eks-a737599` -> [1, 30]; undefined when unreadable. */
export function kubeletMinor(node: KubeObject): [number, number] | undefined {
  const version = (node as { status?: { nodeInfo?: { kubeletVersion?: string } } }).status?.nodeInfo
    ?.kubeletVersion;
  const match = /^v?(\d+)\.(\d+)/.exec(version ?? '');
  return match ? [Number(match[1]), Number(match[2])] : undefined;
}

/**
 * The check, or undefined without an upload. `runnerNodes` are the nodes the runner may land on
 * (nodesFor(placement.runner)); none is the node check's failure already, so this passes then.
 */
export function uploadCheck(
  results: ResultsVolume,
  runnerNodes: readonly KubeObject[],
): { id: string; subject: string; outcome: 'pass' | 'fail'; message: string; fix?: string } | undefined {
  const upload = results.volume === 'claim' ? results.upload : null;
  if (!upload) return undefined;
  const subject = 'runner.results.upload';
  const old = runnerNodes.filter((node) => {
    const version = kubeletMinor(node);
    return version === undefined || version[0] < 1 || (version[0] === 1 && version[1] < SIDECAR_MIN_MINOR);
  });
  const target = `s3://${upload.bucket}/${upload.prefix}/`;
  if (old.length === 0) {
    return {
      id: 'results-upload',
      subject,
      outcome: 'pass',
      message: `the runner's nodes run Kubernetes 1.${SIDECAR_MIN_MINOR} or later: its sidecar syncs the results to ${target}`,
    };
  }
  const names = old
    .map((node) => {
      const version = kubeletMinor(node);
      return `${node.metadata.name} (${version ? `v${version.join('.')}` : 'unknown version'})`;
    })
    .join(', ');
  return {
    id: 'results-upload',
    subject,
    outcome: 'fail',
    message: `the uploader is a native sidecar, which needs a kubelet of 1.${SIDECAR_MIN_MINOR} or later; the runner may land on ${names}, where the runner would never start`,
    fix: `upgrade those nodes, narrow placement.runnerNodeSelector to newer ones, or set runner.results.upload: null (lab results still copies the claim)`,
  };
}
