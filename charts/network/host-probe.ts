import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import { NETWORK_REQUESTS } from '../../lib/network/resources.ts';
import { HOST_PROBE, PLAIN_NAMESPACE } from '../../lib/network/topology.ts';
import { COMPONENT_LABEL, containerResources } from '../common.ts';
import { cellNodeSelector } from './common.ts';

export interface HostProbeChartProps extends ChartProps {
  readonly cell: string;
  /** netshoot, pinned (network.probeImage). */
  readonly image: string;
}

/**
 * A privileged pod in the host's network namespace (network-lab-spec 3): the runner execs rule
 * counts (`iptables-save -t nat`, `nft list table ip kube-proxy`, `ipvsadm -Ln`) and conntrack
 * reads and limits (`/proc/sys/net/netfilter/nf_conntrack_*`, writable only from the host network
 * namespace) in it. It listens on nothing: a host-network port would be the node's.
 */
export class HostProbeChart extends Chart {
  constructor(scope: Construct, id: string, props: HostProbeChartProps) {
    super(scope, id, props);
    const selector = { app: HOST_PROBE };
    const labels = { ...selector, [COMPONENT_LABEL]: 'host-probe' };
    new k8s.KubeDeployment(this, 'probe', {
      metadata: { name: HOST_PROBE, namespace: PLAIN_NAMESPACE, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: selector },
        // Never two at once: two probes changing nf_conntrack_max would race.
        strategy: { type: 'Recreate' },
        template: {
          metadata: { labels },
          spec: {
            hostNetwork: true,
            dnsPolicy: 'ClusterFirstWithHostNet',
            nodeSelector: cellNodeSelector(props.cell),
            terminationGracePeriodSeconds: 1,
            containers: [
              {
                name: 'netshoot',
                image: props.image,
                imagePullPolicy: 'IfNotPresent',
                command: ['sleep', 'infinity'],
                resources: containerResources(NETWORK_REQUESTS.hostProbe),
                securityContext: { privileged: true, runAsNonRoot: false, readOnlyRootFilesystem: false },
              },
            ],
          },
        },
      },
    });
  }
}
