import { createHash } from 'node:crypto';
import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import { Construct } from 'constructs';
import { stringify } from 'yaml';
import { labPlacement, type NodePool } from '../lib/config/placement.ts';
import type { LabConfig } from '../lib/config/schema.ts';
import { pairSuffix } from '../lib/study/pairs.ts';
import { REQUESTS } from '../lib/study/resources.ts';
import { ENVOY_LISTENER_PORT, EPP_GRPC_PORT, eppName, frontEnd } from '../lib/study/topology.ts';
import { COMPONENT_LABEL, containerResources, podPlacement, port } from './common.ts';
import { endpointPickerPlacements } from './endpoint-picker.ts';
import { standaloneEnvoyBootstrap } from './envoy/bootstrap.ts';

export const ENVOY_ADMIN_PORT = 19000;
const CONFIG_DIR = '/etc/envoy';
const CONFIG_FILE = 'envoy.yaml';

export type EnvoyLogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'critical' | 'off';

export interface StandaloneEnvoyProps {
  /** Deployment, Service and ConfigMap name (`envoy-<arm>`). */
  readonly name: string;
  /** Pinned Envoy image. */
  readonly image: string;
  /** Worker threads; without it Envoy starts one per host core and oversubscribes its cgroup. */
  readonly concurrency: number;
  /** Trace logging eats CPU under load; the lab runs warn. */
  readonly logLevel: EnvoyLogLevel;
  /** DNS name of the arm's EPP Service. */
  readonly eppHost: string;
  /**
   * Port clients call.
   * @default ENVOY_LISTENER_PORT (8081)
   */
  readonly listenerPort?: number;
  /**
   * Nodes the pod may run on (nodeSelector and tolerations).
   * @default - any node
   */
  readonly nodePool?: NodePool;
}

/** Envoy's command line; the config path is where the ConfigMap is mounted. */
export function envoyArgs(props: Pick<StandaloneEnvoyProps, 'concurrency' | 'logLevel'>): string[] {
  if (!Number.isInteger(props.concurrency) || props.concurrency < 1) {
    throw new Error(`StandaloneEnvoy: concurrency must be a positive integer, got ${props.concurrency}`);
  }
  return [
    '-c',
    `${CONFIG_DIR}/${CONFIG_FILE}`,
    '--log-level',
    props.logLevel,
    '--concurrency',
    String(props.concurrency),
  ];
}

/**
 * llm-d-style Envoy in front of one EPP (docs/facts.md §3.5): ext_proc asks the EPP for every request
 * and an ORIGINAL_DST cluster sends it to the replica the EPP named.
 */
export class StandaloneEnvoy extends Construct {
  public readonly name: string;

  constructor(scope: Construct, id: string, props: StandaloneEnvoyProps) {
    super(scope, id);
    this.name = props.name;
    const listenerPort = props.listenerPort ?? ENVOY_LISTENER_PORT;
    const labels = { [COMPONENT_LABEL]: 'envoy' };
    const selector = { app: props.name };
    const bootstrap = stringify(
      standaloneEnvoyBootstrap({
        listenerPort,
        adminPort: ENVOY_ADMIN_PORT,
        eppHost: props.eppHost,
        eppPort: EPP_GRPC_PORT,
      }),
    );

    new k8s.KubeConfigMap(this, 'config', {
      metadata: { name: `${props.name}-config`, labels },
      data: { [CONFIG_FILE]: bootstrap },
    });

    new k8s.KubeDeployment(this, 'deployment', {
      metadata: { name: props.name, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: selector },
        template: {
          metadata: {
            labels: { ...selector, ...labels },
            annotations: { 'lab/config-sha256': createHash('sha256').update(bootstrap).digest('hex') },
          },
          spec: {
            ...(props.nodePool ? podPlacement(props.nodePool) : {}),
            containers: [
              {
                name: 'envoy',
                image: props.image,
                args: envoyArgs(props),
                ports: [
                  { name: 'http', containerPort: listenerPort },
                  { name: 'admin', containerPort: ENVOY_ADMIN_PORT },
                ],
                resources: containerResources(REQUESTS.envoy),
                // The image's entrypoint starts as root and drops to the envoy user (su-exec), which
                // needs the default capabilities: only privilege escalation is turned off.
                securityContext: { allowPrivilegeEscalation: false },
                readinessProbe: {
                  httpGet: { path: '/ready', port: port(ENVOY_ADMIN_PORT) },
                  periodSeconds: 5,
                  failureThreshold: 3,
                },
                volumeMounts: [{ name: 'config', mountPath: CONFIG_DIR, readOnly: true }],
              },
            ],
            volumes: [{ name: 'config', configMap: { name: `${props.name}-config` } }],
          },
        },
      },
    });

    // Admin stays off the Service: reach it with `kubectl port-forward` when debugging.
    new k8s.KubeService(this, 'service', {
      metadata: { name: props.name, labels },
      spec: { selector, ports: [{ name: 'http', port: listenerPort, targetPort: port(listenerPort) }] },
    });
  }
}

export interface StandaloneEnvoysChartProps extends ChartProps {
  readonly config: LabConfig;
}

/** One StandaloneEnvoy per EPP-style arm and replica pair, each in front of that arm's EPP on the pair. */
export class StandaloneEnvoysChart extends Chart {
  constructor(scope: Construct, id: string, props: StandaloneEnvoysChartProps) {
    super(scope, id, props);
    const { config } = props;
    for (const [arm, pair] of endpointPickerPlacements(config)) {
      const fe = frontEnd(config, arm, pair);
      new StandaloneEnvoy(this, `${arm.id}${pairSuffix(pair)}`, {
        name: fe.service,
        image: config.envoy.image,
        concurrency: config.envoy.concurrency,
        logLevel: config.envoy.logLevel,
        eppHost: `${eppName(config, arm.frontEndId, pair)}.${config.namespace}.svc.cluster.local`,
        listenerPort: fe.port,
        nodePool: labPlacement(config).frontEnds,
      });
    }
  }
}
