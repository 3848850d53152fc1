import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import type { NetworkConfig } from '../../lib/config/network.ts';
import { fortioL4ServerArgs, fortioServerArgs } from '../../lib/network/fortio.ts';
import { NETWORK_REQUESTS } from '../../lib/network/resources.ts';
import {
  FORTIO_AUTHZ_SERVER,
  FORTIO_GRPC_PORT,
  FORTIO_HTTP_PORT,
  FORTIO_L4_PORT,
  FORTIO_PERMISSIVE_SERVER,
  FORTIO_SERVER,
  GRPC_PORT_NAME,
  HTTP_PORT_NAME,
  MESH_DEFAULT_NAMESPACE,
  MESH_NAMESPACE,
  PLAIN_NAMESPACE,
  TCP_PORT_NAME,
} from '../../lib/network/topology.ts';
import { COMPONENT_LABEL, containerResources, port } from '../common.ts';
import { cellDeployment, unprivilegedContainer } from './common.ts';

export interface FortioServersChartProps extends ChartProps {
  readonly cell: string;
  readonly withMesh: boolean;
  readonly network: NetworkConfig;
}

/**
 * The fortio servers (docs/facts.md §N3): `fortio` in `plain` on every cell; on mesh cells also
 * `fortio`, `fortio-permissive` and `fortio-authz` in `mesh`, and `fortio` in `mesh-default`. Every server is the same pod: HTTP on
 * 8080 and gRPC on 8079 in one container, and the same server on a second container port (8082)
 * for E4, so the Service's `http-` and `tcp-` ports reach distinct target ports.
 */
export class FortioServersChart extends Chart {
  constructor(scope: Construct, id: string, props: FortioServersChartProps) {
    super(scope, id, props);
    fortioServer(this, PLAIN_NAMESPACE, FORTIO_SERVER, props);
    if (props.withMesh) {
      for (const name of [FORTIO_SERVER, FORTIO_PERMISSIVE_SERVER])
        fortioServer(this, MESH_NAMESPACE, name, props);
      // Curls only (E2's AuthorizationPolicy rows): a light request (NETWORK_REQUESTS.fortioLightServer).
      fortioServer(this, MESH_NAMESPACE, FORTIO_AUTHZ_SERVER, props, true);
      // E2's mesh default: the same server where no PeerAuthentication applies; curls only too.
      fortioServer(this, MESH_DEFAULT_NAMESPACE, FORTIO_SERVER, props, true);
    }
  }
}

function fortioServer(
  scope: Construct,
  namespace: string,
  name: string,
  props: FortioServersChartProps,
  curlsOnly = false,
) {
  const { network } = props;
  const selector = { app: name };
  const labels = { ...selector, [COMPONENT_LABEL]: 'fortio-server' };
  const container = (
    containerName: string,
    args: string[],
    ports: k8s.ContainerPort[],
    light: boolean,
  ): k8s.Container => ({
    name: containerName,
    image: network.fortio.image,
    imagePullPolicy: 'IfNotPresent',
    args,
    ports,
    resources: containerResources(light ? NETWORK_REQUESTS.fortioLightServer : NETWORK_REQUESTS.fortioServer),
    securityContext: unprivilegedContainer(),
  });
  cellDeployment(scope, `${namespace}-${name}`, {
    name,
    namespace,
    component: 'fortio-server',
    cell: props.cell,
    pod: {
      containers: [
        container(
          'fortio',
          fortioServerArgs(network),
          [
            { name: 'http', containerPort: FORTIO_HTTP_PORT, protocol: 'TCP' },
            { name: 'grpc', containerPort: FORTIO_GRPC_PORT, protocol: 'TCP' },
          ],
          curlsOnly,
        ),
        // E4's L4 arm alone reaches it: a light request, no limit.
        container(
          'fortio-l4',
          fortioL4ServerArgs(network),
          [{ name: 'http-l4', containerPort: FORTIO_L4_PORT, protocol: 'TCP' }],
          true,
        ),
      ],
    },
  });
  new k8s.KubeService(scope, `${namespace}-${name}-service`, {
    metadata: { name, namespace, labels },
    spec: {
      type: 'ClusterIP',
      selector,
      ports: [
        { name: HTTP_PORT_NAME, port: FORTIO_HTTP_PORT, targetPort: port(FORTIO_HTTP_PORT), protocol: 'TCP' },
        { name: GRPC_PORT_NAME, port: FORTIO_GRPC_PORT, targetPort: port(FORTIO_GRPC_PORT), protocol: 'TCP' },
        // E4's L4 arm: Istio relays `tcp-` ports without parsing HTTP; its own target port.
        { name: TCP_PORT_NAME, port: FORTIO_L4_PORT, targetPort: port(FORTIO_L4_PORT), protocol: 'TCP' },
      ],
    },
  });
}
