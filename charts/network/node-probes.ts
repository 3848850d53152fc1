import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import type { LabConfig } from '../../lib/config/schema.ts';
import { PROBES_MOUNT, type ProbeName, probeBundles, probeCommand } from '../../lib/network/probes/bundle.ts';
import { NETWORK_REQUESTS } from '../../lib/network/resources.ts';
import {
  FORTIO_HTTP_PORT,
  FORTIO_SERVER,
  GOOD_SERVICE_ACCOUNT,
  MESH_NAMESPACE,
  PLAIN_NAMESPACE,
  SSE_PORT,
  SSE_SERVER,
} from '../../lib/network/topology.ts';
import type { ContainerRequests } from '../../lib/study/resources.ts';
import { COMPONENT_LABEL, containerResources, port } from '../common.ts';
import { cellDeployment, cellNodeSelector, unprivilegedContainer } from './common.ts';

/** ConfigMap with the probes' bundles, one per namespace that runs them. */
export const PROBES_CONFIG_MAP = 'network-probes';

export interface NodeProbesProps extends ChartProps {
  readonly cell: string;
  readonly withMesh: boolean;
  readonly config: LabConfig;
}

const namespacesOf = (props: NodeProbesProps) =>
  props.withMesh ? [PLAIN_NAMESPACE, MESH_NAMESPACE] : [PLAIN_NAMESPACE];

const probesVolume = (): k8s.Volume => ({ name: 'probes', configMap: { name: PROBES_CONFIG_MAP } });
const probesMount = (): k8s.VolumeMount => ({ name: 'probes', mountPath: PROBES_MOUNT, readOnly: true });

/** A container running one of the lab's Node probes from the mounted ConfigMap (image `runner.image`). */
function probeContainer(
  config: LabConfig,
  name: ProbeName,
  flags: string[],
  requests: ContainerRequests,
  ports: k8s.ContainerPort[] = [],
): k8s.Container {
  return {
    name,
    image: config.runner.image,
    imagePullPolicy: 'IfNotPresent',
    command: [...probeCommand(name), ...flags],
    ...(ports.length > 0 ? { ports } : {}),
    volumeMounts: [probesMount()],
    resources: containerResources(requests),
    securityContext: unprivilegedContainer(),
  };
}

/**
 * The lab's own Node probes on the cluster (lib/network/probes): their bundles as a ConfigMap in
 * `plain` (and `mesh`), and the E7 SSE server with its Service in each.
 */
export class NodeProbesChart extends Chart {
  constructor(scope: Construct, id: string, props: NodeProbesProps) {
    super(scope, id, props);
    const { config } = props;
    const { sse } = config.network.experiments;
    const bundles = probeBundles();
    for (const namespace of namespacesOf(props)) {
      new k8s.KubeConfigMap(this, `${namespace}-bundles`, {
        metadata: { name: PROBES_CONFIG_MAP, namespace },
        data: bundles,
      });
      cellDeployment(this, `${namespace}-sse-server`, {
        name: SSE_SERVER,
        namespace,
        component: 'sse-server',
        cell: props.cell,
        pod: {
          containers: [
            probeContainer(
              config,
              'sse-server',
              [
                '--port',
                String(SSE_PORT),
                '--events',
                String(sse.events),
                '--interval-ms',
                String(sse.intervalMs),
              ],
              NETWORK_REQUESTS.nodeProbe,
              [{ name: 'http', containerPort: SSE_PORT, protocol: 'TCP' }],
            ),
          ],
          volumes: [probesVolume()],
        },
      });
      new k8s.KubeService(this, `${namespace}-sse-service`, {
        metadata: {
          name: SSE_SERVER,
          namespace,
          labels: { app: SSE_SERVER, [COMPONENT_LABEL]: 'sse-server' },
        },
        spec: {
          type: 'ClusterIP',
          selector: { app: SSE_SERVER },
          ports: [{ name: 'http-sse', port: SSE_PORT, targetPort: port(SSE_PORT), protocol: 'TCP' }],
        },
      });
    }
  }
}

/**
 * The probes' Jobs the runner copies per arm and step (outside the apply order): the E7 SSE client
 * in each namespace, a service-prober calibration against `fortio` in `plain` (E9's prober gets
 * the new Service's address and creation time from the runner), and the E10 conntrack driver in
 * the host's network namespace, where the probe pod reads and sets the conntrack limit.
 */
export class NodeProbeJobsChart extends Chart {
  constructor(scope: Construct, id: string, props: NodeProbesProps) {
    super(scope, id, props);
    const { config } = props;
    const { experiments } = config.network;
    for (const namespace of namespacesOf(props)) {
      job(this, `sse-client-${namespace}`, namespace, props, {
        serviceAccountName: namespace === MESH_NAMESPACE ? GOOD_SERVICE_ACCOUNT : undefined,
        containers: [
          probeContainer(
            config,
            'sse-client',
            [
              '--url',
              `http://${SSE_SERVER}.${namespace}.svc.cluster.local:${SSE_PORT}/events`,
              '--expect-events',
              String(experiments.sse.events),
            ],
            NETWORK_REQUESTS.nodeProbe,
          ),
        ],
      });
    }
    job(this, 'service-prober-calibration', PLAIN_NAMESPACE, props, {
      containers: [
        probeContainer(
          config,
          'service-prober',
          [
            '--target',
            `${FORTIO_SERVER}.${PLAIN_NAMESPACE}.svc.cluster.local:${FORTIO_HTTP_PORT}`,
            '--samples',
            String(experiments.serviceScale.samples),
            '--attempt-timeout-ms',
            String(experiments.serviceScale.proberAttemptTimeoutMs),
          ],
          NETWORK_REQUESTS.nodeProbe,
        ),
      ],
    });
    job(this, 'conntrack-driver', PLAIN_NAMESPACE, props, {
      hostNetwork: true,
      dnsPolicy: 'ClusterFirstWithHostNet',
      containers: [
        probeContainer(
          config,
          'conntrack-driver',
          [
            '--host',
            '127.0.0.1',
            '--connections',
            String(experiments.conntrack.connections),
            '--connect-timeout-ms',
            String(experiments.conntrack.connectTimeoutSeconds * 1000),
          ],
          NETWORK_REQUESTS.conntrackDriver,
        ),
      ],
    });
  }
}

function job(
  scope: Construct,
  name: string,
  namespace: string,
  props: NodeProbesProps,
  pod: Omit<k8s.PodSpec, 'nodeSelector' | 'restartPolicy' | 'volumes'>,
): k8s.KubeJob {
  const labels = { app: name, [COMPONENT_LABEL]: 'node-probe' };
  const { serviceAccountName, ...rest } = pod;
  return new k8s.KubeJob(scope, name, {
    metadata: { name, namespace, labels },
    spec: {
      backoffLimit: 0,
      template: {
        metadata: { labels },
        spec: {
          ...rest,
          ...(serviceAccountName ? { serviceAccountName } : {}),
          restartPolicy: 'Never',
          nodeSelector: cellNodeSelector(props.cell),
          volumes: [probesVolume()],
        },
      },
    },
  });
}
