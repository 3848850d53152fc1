import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import type { NetworkConfig } from '../../lib/config/network.ts';
import { fortioLoadArgs } from '../../lib/network/fortio.ts';
import { NETWORK_REQUESTS } from '../../lib/network/resources.ts';
import {
  FORTIO_HTTP_PORT,
  FORTIO_SERVER,
  GOOD_SERVICE_ACCOUNT,
  MESH_NAMESPACE,
  PLAIN_NAMESPACE,
} from '../../lib/network/topology.ts';
import { COMPONENT_LABEL, containerResources } from '../common.ts';
import { cellNodeSelector, unprivilegedContainer } from './common.ts';

export interface FortioClientJobsChartProps extends ChartProps {
  readonly cell: string;
  readonly withMesh: boolean;
  readonly network: NetworkConfig;
}

/**
 * The fortio client Jobs the runner starts (written outside the apply order: a Job starts load on
 * creation): the fixed-rate run against `fortio` in `plain` (the calibration run, C), and on mesh
 * cells the same run between sidecars in `mesh`, as service account `good`. The runner copies them
 * for every arm and repeat, changing only the URL, rate and duration.
 */
export class FortioClientJobsChart extends Chart {
  constructor(scope: Construct, id: string, props: FortioClientJobsChartProps) {
    super(scope, id, props);
    clientJob(this, 'fortio-plain', PLAIN_NAMESPACE, props);
    if (props.withMesh) clientJob(this, 'fortio-mesh', MESH_NAMESPACE, props, GOOD_SERVICE_ACCOUNT);
  }
}

function clientJob(
  scope: Construct,
  name: string,
  namespace: string,
  props: FortioClientJobsChartProps,
  serviceAccountName?: string,
) {
  const { network } = props;
  const labels = { app: name, [COMPONENT_LABEL]: 'fortio-client' };
  const url = `http://${FORTIO_SERVER}.${namespace}.svc.cluster.local:${FORTIO_HTTP_PORT}/echo`;
  new k8s.KubeJob(scope, name, {
    metadata: { name, namespace, labels },
    spec: {
      backoffLimit: 0,
      template: {
        metadata: { labels },
        spec: {
          restartPolicy: 'Never',
          nodeSelector: cellNodeSelector(props.cell),
          ...(serviceAccountName ? { serviceAccountName } : {}),
          containers: [
            {
              name: 'fortio',
              image: network.fortio.image,
              imagePullPolicy: 'IfNotPresent',
              args: fortioLoadArgs(network, {
                url,
                qps: network.fortio.qps,
                seconds: network.fortio.fixedRateSeconds,
              }),
              resources: containerResources(NETWORK_REQUESTS.fortioClient),
              securityContext: unprivilegedContainer(),
            },
          ],
        },
      },
    },
  });
}
