import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import { stringify } from 'yaml';
import type { CiliumValues } from '../../lib/network/cilium-values.ts';
import {
  BAD_SERVICE_ACCOUNT,
  CELL_CONFIG_MAP,
  CELL_KEY,
  type CellDescription,
  CILIUM_VALUES_KEY,
  GOOD_SERVICE_ACCOUNT,
  MESH_NAMESPACE,
  MESH_NAMESPACES,
  meshNamespaceLabels,
  PLAIN_NAMESPACE,
} from '../../lib/network/topology.ts';

export interface CellNamespacesChartProps extends ChartProps {
  readonly cell: CellDescription;
  /** The Cilium Helm values of a Cilium cell, recorded beside the cell so `lab check` can judge them. */
  readonly ciliumValues?: CiliumValues;
}

/**
 * The namespaces of a cell, applied first: `plain` (never labelled for Istio) and, on cells with a
 * mesh, `mesh` labelled for the cell's mesh mode with the `good`/`bad` service accounts of E2, and
 * `mesh-default`, labelled the same, where no PeerAuthentication is ever created (E2's mesh default).
 * The `network-cell` ConfigMap in `plain` says what the cell is.
 */
export class CellNamespacesChart extends Chart {
  constructor(scope: Construct, id: string, props: CellNamespacesChartProps) {
    super(scope, id, props);
    const { cell } = props;
    new k8s.KubeNamespace(this, 'plain', { metadata: { name: PLAIN_NAMESPACE } });
    if (cell.mesh !== 'none') {
      // Pods created before the label get no sidecar: the namespaces are applied before any pod.
      for (const name of MESH_NAMESPACES) {
        new k8s.KubeNamespace(this, name, { metadata: { name, labels: meshNamespaceLabels(cell.mesh) } });
      }
      for (const name of [GOOD_SERVICE_ACCOUNT, BAD_SERVICE_ACCOUNT]) {
        new k8s.KubeServiceAccount(this, `sa-${name}`, {
          metadata: { name, namespace: MESH_NAMESPACE },
          automountServiceAccountToken: false,
        });
      }
    }
    new k8s.KubeConfigMap(this, 'cell', {
      metadata: { name: CELL_CONFIG_MAP, namespace: PLAIN_NAMESPACE },
      data: {
        [CELL_KEY]: `${JSON.stringify(cell, null, 2)}\n`,
        ...(props.ciliumValues ? { [CILIUM_VALUES_KEY]: stringify(props.ciliumValues) } : {}),
      },
    });
  }
}
