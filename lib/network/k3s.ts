import type { NetworkCell, NetworkConfig } from '../config/network.ts';
import { CELL_LABEL } from './topology.ts';

/**
 * The K3s server flags that make a cell's datapath (docs/facts.md §N2), pure so the bootstrap
 * renders exactly what the tests check. They come on top of the bootstrap's common flags.
 *
 * - every cell: its pod and Service ranges, no bundled ServiceLB (no LoadBalancer Service can
 *   reach outside the node), and the cell label on the node that every pod of the cell selects;
 * - Cilium: `--flannel-backend=none --disable-network-policy --disable-kube-proxy`, Cilium is the
 *   CNI and replaces kube-proxy;
 * - otherwise flannel with kube-proxy in the cell's mode (`--kube-proxy-arg=proxy-mode=<mode>`).
 */
export function k3sServerFlags(network: NetworkConfig, cell: NetworkCell): string[] {
  const common = [
    `--cluster-cidr=${network.podCidr}`,
    `--service-cidr=${network.serviceCidr}`,
    '--disable=servicelb',
    `--node-label=${CELL_LABEL}=${cell.name}`,
  ];
  if (cell.datapath === 'cilium') {
    return [...common, '--flannel-backend=none', '--disable-network-policy', '--disable-kube-proxy'];
  }
  return [...common, `--kube-proxy-arg=proxy-mode=${cell.datapath}`];
}
