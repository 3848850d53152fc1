import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import { CELL_LABEL } from '../../lib/network/topology.ts';
import { COMPONENT_LABEL, labLabels } from '../common.ts';

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

export interface CellDeploymentProps {
  readonly name: string;
  readonly namespace: string;
  /** The lab component (`app.kubernetes.io/component`). */
  readonly component: string;
  readonly cell: string;
  /** The pod, without its node selector (the cell's is added). */
  readonly pod: Omit<k8s.PodSpec, 'nodeSelector'>;
  readonly strategy?: k8s.DeploymentStrategy;
  /** @default 1 */
  readonly replicas?: number;
}

/** A Deployment (one replica unless told) pinned to the cell's node, selected by `app: <name>`. */
export function cellDeployment(scope: Construct, id: string, props: CellDeploymentProps): k8s.KubeDeployment {
  const selector = { app: props.name };
  const labels = { ...selector, [COMPONENT_LABEL]: props.component };
  return new k8s.KubeDeployment(scope, id, {
    metadata: { name: props.name, namespace: props.namespace, labels },
    spec: {
      replicas: props.replicas ?? 1,
      selector: { matchLabels: selector },
      ...(props.strategy ? { strategy: props.strategy } : {}),
      template: { metadata: { labels }, spec: { ...props.pod, nodeSelector: cellNodeSelector(props.cell) } },
    },
  });
}
