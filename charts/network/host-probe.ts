import { Chart, type ChartProps } from 'cdk8s';
import type { Construct } from 'constructs';
import { NETWORK_REQUESTS } from '../../lib/network/resources.ts';
import { HOST_PROBE, PLAIN_NAMESPACE } from '../../lib/network/topology.ts';
import { containerResources } from '../common.ts';
import { cellDeployment } from './common.ts';

export interface HostProbeChartProps extends ChartProps {
  readonly cell: string;
  /** netshoot, pinned (network.probeImage). */
  readonly image: string;
}

/**
 * A privileged pod in the host's network namespace (docs/facts.md §N3) for an operator's
 * `kubectl exec`: rule counts (`iptables-save -t nat`, `nft list table ip kube-proxy`,
 * `ipvsadm -Ln`) and conntrack reads (`/proc/sys/net/netfilter/nf_conntrack_*`). The runner does
 * not use it: it runs the same commands as short privileged Jobs (lib/runner/network/jobs.ts
 * `hostCommandJob`), with no exec right. So it is opt-in (`network.hostProbe`, off by default): a
 * standing privileged pod is an exposure only worth having while someone inspects a node by hand.
 * It listens on nothing: a host-network port would be the node's.
 */
export class HostProbeChart extends Chart {
  constructor(scope: Construct, id: string, props: HostProbeChartProps) {
    super(scope, id, props);
    cellDeployment(this, 'probe', {
      name: HOST_PROBE,
      namespace: PLAIN_NAMESPACE,
      component: 'host-probe',
      cell: props.cell,
      // Never two at once: two probes changing nf_conntrack_max would race.
      strategy: { type: 'Recreate' },
      pod: {
        hostNetwork: true,
        dnsPolicy: 'ClusterFirstWithHostNet',
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
    });
  }
}
