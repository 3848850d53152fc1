import type { k8s } from 'cdk8s-plus-34';
import { CELL_LABEL } from '../../lib/network/topology.ts';
import { labLabels } from '../common.ts';

/** Labels on every object of a network-lab cell: the project's, and the cell's name. */
export function cellLabels(cell: string): Record<string, string> {
  return { ...labLabels(), [CELL_LABEL]: cell };
}

/**
 * Pins a pod to the cell's node: K3s labels the node with the cell (lib/network/k3s.ts), so on a
 * cluster that is not a cell nothing schedules until the node is labelled (docs/network-lab.md).
 */
export function cellNodeSelector(cell: string): Record<string, string> {
  return { [CELL_LABEL]: cell };
}

/** Containers of the lab's own test servers: no privilege, image's user. */
export function unprivilegedContainer(): k8s.SecurityContext {
  return { allowPrivilegeEscalation: false, readOnlyRootFilesystem: false, runAsNonRoot: false };
}
