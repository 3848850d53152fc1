import type { NetworkCell, NetworkConfig } from '../config/network.ts';

/**
 * Cilium's Helm values for a K3s cell (docs/facts.md §N2), as a typed object computed from the
 * configuration. Keys and types are those of the Cilium chart's values.schema.json (read at chart
 * 1.20.0, the newest release in the helm.cilium.io index available here; the pinned 1.20.2 is a
 * patch release of it): kubeProxyReplacement [string, boolean], k8sServiceHost string,
 * k8sServicePort [string, integer], ipam.mode, routingMode, tunnelProtocol, bpf.lbMapMax
 * [null, integer], operator.replicas, socketLB.hostNamespaceOnly (templates/cilium-configmap.yaml
 * writes bpf-lb-sock-hostns-only only when the key is set), cni.exclusive.
 */

/**
 * `k8sServiceHost` is the node's private IP, known only on the host: the values carry this
 * placeholder and the bootstrap replaces it (from the instance metadata) before `helm install`.
 * With kube-proxy disabled, Cilium cannot reach the API server through the kubernetes Service.
 */
export const NODE_IP_PLACEHOLDER = '__LAB_NODE_PRIVATE_IP__';

/** K3s's API server port. */
export const K3S_API_PORT = 6443;

export type CiliumIpam =
  | { readonly mode: 'kubernetes' }
  | { readonly mode: 'cluster-pool'; readonly operator: { readonly clusterPoolIPv4PodCIDRList: string[] } };

export interface CiliumValues {
  /** Boolean since Cilium 1.14 (the old strings "strict"/"partial" are gone). */
  readonly kubeProxyReplacement: boolean;
  readonly k8sServiceHost: string;
  readonly k8sServicePort: number;
  readonly ipam: CiliumIpam;
  readonly routingMode: 'tunnel' | 'native';
  readonly tunnelProtocol: 'vxlan' | 'geneve';
  readonly bpf: { readonly lbMapMax: number };
  readonly operator: { readonly replicas: number };
  /** Only when Istio runs on the cell: socket LB stays in the host namespace so sidecars see Service IPs. */
  readonly socketLB?: { readonly hostNamespaceOnly: boolean };
  /** Only when Istio runs on the cell: Istio's CNI chains after Cilium's. */
  readonly cni?: { readonly exclusive: boolean };
}

/** The values of a Cilium cell; undefined for kube-proxy cells (no Cilium there). */
export function ciliumValues(network: NetworkConfig, cell: NetworkCell): CiliumValues | undefined {
  if (cell.datapath !== 'cilium') return undefined;
  const { cilium } = network;
  const ipam: CiliumIpam =
    cilium.ipam === 'kubernetes'
      ? { mode: 'kubernetes' }
      : { mode: 'cluster-pool', operator: { clusterPoolIPv4PodCIDRList: [cilium.clusterPoolCidr] } };
  const withIstio = cell.mesh !== 'none';
  return {
    kubeProxyReplacement: true,
    k8sServiceHost: NODE_IP_PLACEHOLDER,
    k8sServicePort: K3S_API_PORT,
    ipam,
    routingMode: 'tunnel',
    tunnelProtocol: 'vxlan',
    bpf: { lbMapMax: cilium.lbMapMax },
    operator: { replicas: 1 },
    ...(withIstio
      ? {
          socketLB: { hostNamespaceOnly: cilium.socketLBHostNamespaceOnly },
          cni: { exclusive: cilium.cniExclusive },
        }
      : {}),
  };
}

/** The pod range Cilium gives pods with these values (for the VPC-overlap check). */
export function ciliumPodRanges(values: CiliumValues, podCidr: string): string[] {
  return values.ipam.mode === 'kubernetes' ? [podCidr] : values.ipam.operator.clusterPoolIPv4PodCIDRList;
}
