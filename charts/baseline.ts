import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import type { LabConfig } from '../lib/config/schema.ts';
import { pairSuffix, studyPairs } from '../lib/study/pairs.ts';
import { armById, frontEnd, KUBE_PROXY_NODE_PORT, replicaSetName, VLLM_PORT } from '../lib/study/topology.ts';
import { COMPONENT_LABEL, port } from './common.ts';

export interface KubeProxyBaselineChartProps extends ChartProps {
  readonly config: LabConfig;
}

/**
 * The baseline arm (docs/facts.md §3.2): a NodePort Service over the standard replicas. kube-proxy
 * balances per connection, so a keep-alive client sticks to one pod.
 */
export class KubeProxyBaselineChart extends Chart {
  constructor(scope: Construct, id: string, props: KubeProxyBaselineChartProps) {
    super(scope, id, props);
    const { config } = props;
    for (const pair of studyPairs(config)) {
      const fe = frontEnd(config, armById(config, 'kube-proxy'), pair);
      // Pair 1's Service (`study.parallelism: 2`) takes the next node port.
      new k8s.KubeService(this, `service${pairSuffix(pair)}`, {
        metadata: { name: fe.service, labels: { [COMPONENT_LABEL]: 'baseline' } },
        spec: {
          type: 'NodePort',
          selector: { app: replicaSetName(config, 'standard', pair) },
          ports: [
            {
              name: 'http',
              port: fe.port,
              targetPort: port(VLLM_PORT),
              nodePort: KUBE_PROXY_NODE_PORT + pair,
            },
          ],
        },
      });
    }
  }
}
