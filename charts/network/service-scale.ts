import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import type { NetworkConfig } from '../../lib/config/network.ts';
import { NETWORK_REQUESTS } from '../../lib/network/resources.ts';
import {
  PLAIN_NAMESPACE,
  SCALE_BACKEND,
  SCALE_BACKEND_PORT,
  SCALE_SERVICE_LABEL,
} from '../../lib/network/topology.ts';
import { containerResources } from '../common.ts';
import { cellDeployment, unprivilegedContainer } from './common.ts';

/** ConfigMap holding the E9 Service template, and its key. */
export const SERVICE_TEMPLATE_CONFIG_MAP = 'service-scale-template';
export const SERVICE_TEMPLATE_KEY = 'service.json';

/**
 * E9's Service as the runner creates it N times: ClusterIP, one TCP port, selecting the backend of
 * `experiments.serviceScale.backendsPerService` replicas, so every Service has that many endpoints
 * and a predictable number of data-plane entries. The runner replaces the name's number
 * (scale-00000 -> scale-01234).
 */
export function scaleServiceTemplate(): k8s.KubeServiceProps & { metadata: { name: string } } {
  return {
    metadata: {
      name: 'scale-00000',
      namespace: PLAIN_NAMESPACE,
      labels: { [SCALE_SERVICE_LABEL]: 'true' },
    },
    spec: {
      type: 'ClusterIP',
      selector: { app: SCALE_BACKEND },
      ports: [
        {
          name: 'tcp-backend',
          port: SCALE_BACKEND_PORT,
          targetPort: k8s.IntOrString.fromNumber(SCALE_BACKEND_PORT),
          protocol: 'TCP',
        },
      ],
    },
  };
}

export interface ServiceScaleChartProps extends ChartProps {
  readonly cell: string;
  readonly network: NetworkConfig;
}

/** The E9 backend (`backendsPerService` replicas: that many endpoints behind every Service) and the Service template. */
export class ServiceScaleChart extends Chart {
  constructor(scope: Construct, id: string, props: ServiceScaleChartProps) {
    super(scope, id, props);
    cellDeployment(this, 'backend', {
      name: SCALE_BACKEND,
      namespace: PLAIN_NAMESPACE,
      component: 'service-scale',
      cell: props.cell,
      replicas: props.network.experiments.serviceScale.backendsPerService,
      pod: {
        containers: [
          {
            name: 'backend',
            image: props.network.fortio.image,
            imagePullPolicy: 'IfNotPresent',
            // Only the port the Services target: every other listener off.
            args: [
              'server',
              '-http-port',
              String(SCALE_BACKEND_PORT),
              ...['-grpc-port', '-tcp-port', '-udp-port', '-redirect-port'].flatMap((flag) => [
                flag,
                'disabled',
              ]),
            ],
            ports: [{ name: 'tcp-backend', containerPort: SCALE_BACKEND_PORT, protocol: 'TCP' }],
            resources: containerResources(NETWORK_REQUESTS.scaleBackend),
            securityContext: unprivilegedContainer(),
          },
        ],
      },
    });
    // Rendered, not created: the runner creates the Services at run time.
    const template = k8s.KubeService.manifest(scaleServiceTemplate());
    new k8s.KubeConfigMap(this, 'template-config', {
      metadata: { name: SERVICE_TEMPLATE_CONFIG_MAP, namespace: PLAIN_NAMESPACE },
      data: { [SERVICE_TEMPLATE_KEY]: `${JSON.stringify(template, null, 2)}\n` },
    });
  }
}
