import { describe, expect, test } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import type { NetworkCell } from '../../lib/config/network.ts';
import { ciliumValues, NODE_IP_PLACEHOLDER } from '../../lib/network/cilium-values.ts';
import { fortioLoadArgs, fortioServerArgs } from '../../lib/network/fortio.ts';
import { k3sServerFlags } from '../../lib/network/k3s.ts';

const network = (overrides: object = {}) => parseLabConfig({ lab: 'network', network: overrides }).network;
const cell = (datapath: NetworkCell['datapath'], mesh: NetworkCell['mesh'] = 'none'): NetworkCell => ({
  name: `dp-${datapath}`,
  datapath,
  mesh,
});

describe('K3s server flags per cell (docs/facts.md §N2)', () => {
  test('a Cilium cell turns off flannel, the network policy controller and kube-proxy', () => {
    expect(k3sServerFlags(network(), cell('cilium'))).toEqual([
      '--cluster-cidr=10.42.0.0/16',
      '--service-cidr=10.43.0.0/16',
      '--disable=servicelb',
      '--node-label=network-lab/cell=dp-cilium',
      '--flannel-backend=none',
      '--disable-network-policy',
      '--disable-kube-proxy',
    ]);
  });

  test.each(['iptables', 'nftables', 'ipvs'] as const)(
    'a %s cell keeps flannel and sets kube-proxy mode',
    (mode) => {
      const flags = k3sServerFlags(network(), cell(mode));
      expect(flags).toContain(`--kube-proxy-arg=proxy-mode=${mode}`);
      expect(flags.filter((f) => f.includes('flannel') || f.includes('disable-kube-proxy'))).toEqual([]);
    },
  );

  test('the pod and Service ranges come from the configuration', () => {
    const flags = k3sServerFlags(
      network({ podCidr: '172.20.0.0/16', serviceCidr: '172.21.0.0/16' }),
      cell('iptables'),
    );
    expect(flags.slice(0, 2)).toEqual(['--cluster-cidr=172.20.0.0/16', '--service-cidr=172.21.0.0/16']);
  });
});

describe('Cilium values', () => {
  test('none on a kube-proxy cell', () => {
    expect(ciliumValues(network(), cell('iptables'))).toBeUndefined();
  });

  test('the spec values on a Cilium cell, with the node IP left for the bootstrap', () => {
    expect(ciliumValues(network(), cell('cilium'))).toEqual({
      kubeProxyReplacement: true,
      k8sServiceHost: NODE_IP_PLACEHOLDER,
      k8sServicePort: 6443,
      ipam: { mode: 'kubernetes' },
      routingMode: 'tunnel',
      tunnelProtocol: 'vxlan',
      bpf: { lbMapMax: 65_536 },
      operator: { replicas: 1 },
    });
  });

  test('with Istio on the cell: socket LB in the host namespace, a non-exclusive CNI', () => {
    const values = ciliumValues(
      network({ cilium: { socketLBHostNamespaceOnly: true, cniExclusive: false } }),
      cell('cilium', 'sidecar'),
    );
    expect(values?.socketLB).toEqual({ hostNamespaceOnly: true });
    expect(values?.cni).toEqual({ exclusive: false });
  });

  test('cluster-pool IPAM carries its pool; lbMapMax follows the configuration', () => {
    const values = ciliumValues(
      network({ cilium: { ipam: 'cluster-pool', clusterPoolCidr: '10.200.0.0/16', lbMapMax: 131_072 } }),
      cell('cilium'),
    );
    expect(values?.ipam).toEqual({
      mode: 'cluster-pool',
      operator: { clusterPoolIPv4PodCIDRList: ['10.200.0.0/16'] },
    });
    expect(values?.bpf.lbMapMax).toBe(131_072);
  });
});

describe('fortio command lines', () => {
  test('load carries the configured resolution, connections and percentiles', () => {
    const args = fortioLoadArgs(network(), { url: 'http://x:8080/echo', qps: 500, seconds: 25 });
    expect(args.join(' ')).toBe(
      'load -c 16 -qps 500 -t 25s -r 0.00001 -p 50,90,99 -json - http://x:8080/echo',
    );
    const grpc = fortioLoadArgs(network(), {
      url: 'x:8079',
      qps: 0,
      seconds: 20,
      grpc: true,
      keepalive: false,
    });
    expect(grpc).toEqual(expect.arrayContaining(['-grpc', '-ping', '-keepalive=false']));
  });

  test('the server allows the E6 download size', () => {
    expect(fortioServerArgs(network({ experiments: { largeBodyMiB: 100 } }))).toContain('102400');
  });
});
