import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import { stringify } from 'yaml';
import { labPlacement } from '../lib/config/placement.ts';
import type { LabConfig } from '../lib/config/schema.ts';
import { envoyGatewayRestartStep } from '../lib/prereqs/prerequisites.ts';
import { REQUESTS } from '../lib/study/resources.ts';
import { armById, frontEnd } from '../lib/study/topology.ts';
import {
  aiGatewayEnvoyGatewayConfig,
  ENVOY_GATEWAY_CONFIG_KEY,
  ENVOY_GATEWAY_CONFIG_MAP,
  ENVOY_GATEWAY_CONTROLLER_NAME,
  ENVOY_GATEWAY_DEPLOYMENT,
  ENVOY_GATEWAY_GROUP,
  ENVOY_GATEWAY_NAMESPACE,
  EnvoyProxy,
  type ProxyLogLevel,
} from './ai-gateway/envoy-gateway.ts';
import { GATEWAY_API_GROUP, Gateway, GatewayClass, HttpRoute } from './ai-gateway/gateway-api.ts';
import { COMPONENT_LABEL, podPlacement } from './common.ts';
import { clusterScoped, EndpointPicker, endpointPickerProps } from './endpoint-picker.ts';
import {
  INFERENCE_POOL_API_VERSION,
  INFERENCE_POOL_GROUP,
  INFERENCE_POOL_KIND,
} from './gaie/inference-pool.ts';

/**
 * The Envoy AI Gateway arm (docs/facts.md §3.6): Envoy Gateway routes an HTTPRoute to an InferencePool,
 * and the AI Gateway controller, Envoy Gateway's extension server, adds the ext_proc call to the
 * pool's EPP. Envoy Gateway and the AI Gateway themselves are prerequisites (release installs).
 */

export const AI_GATEWAY_ARM = 'ai-gateway';
/**
 * Annotation on the lab's `envoy-gateway-config`: what to restart once it is applied, as
 * `kubectl rollout restart` arguments. The same step is listed in prerequisites.json's `afterApply`.
 */
export const RESTART_AFTER_APPLY_ANNOTATION = 'llm-gateway-lab/restart-after-apply';
/** Route timeout of the gateway, as the standalone Envoy's (docs/facts.md §3.5): long generations stream for minutes. */
export const AI_GATEWAY_ROUTE_TIMEOUT = '300s';

export function aiGatewayEnabled(config: LabConfig): boolean {
  return config.study.optionalArms.includes(AI_GATEWAY_ARM);
}

/** Names of the arm's objects; the data-plane Service name comes from the study topology. */
export function aiGatewayNames(config: LabConfig) {
  return {
    /** Cluster-wide, so prefixed with the lab namespace like the EPPs' ClusterRoles. */
    gatewayClass: `${config.namespace}-${AI_GATEWAY_ARM}`,
    // Lives in envoy-gateway-system, shared by every lab on the cluster: prefixed like the GatewayClass.
    envoyProxy: `${config.namespace}-${AI_GATEWAY_ARM}`,
    gateway: AI_GATEWAY_ARM,
    httpRoute: AI_GATEWAY_ARM,
    inferencePoolReader: `${config.namespace}-envoy-gateway-inferencepools`,
  };
}

/** Envoy Gateway accepts trace..error for its proxies; the lab's quieter levels map to error. */
function proxyLogLevel(level: LabConfig['envoy']['logLevel']): ProxyLogLevel {
  return level === 'critical' || level === 'off' ? 'error' : level;
}

export interface AiGatewayChartProps extends ChartProps {
  readonly config: LabConfig;
}

/**
 * Envoy Gateway's side of the arm, in its namespace: its configuration (docs/facts.md §3.6) and
 * read access to InferencePools for its ServiceAccount (point 3). The release install writes the
 * same ConfigMap: apply this after the prerequisites, then restart Envoy Gateway (point 4), as the
 * ConfigMap's annotation and prerequisites.json's `afterApply` say.
 */
export class AiGatewayConfigChart extends Chart {
  constructor(scope: Construct, id: string, props: AiGatewayChartProps) {
    super(scope, id, { ...props, namespace: ENVOY_GATEWAY_NAMESPACE });
    const { config } = props;
    const names = aiGatewayNames(config);
    const labels = { [COMPONENT_LABEL]: AI_GATEWAY_ARM };
    const restart = envoyGatewayRestartStep();
    if (restart.after !== id) {
      throw new Error(`the Envoy Gateway restart step follows ${restart.after}, but this chart is ${id}`);
    }

    const document = aiGatewayEnvoyGatewayConfig({
      envoyGatewayVersion: config.aiGateway.envoyGatewayVersion,
      inferencePool: {
        group: INFERENCE_POOL_GROUP,
        version: INFERENCE_POOL_API_VERSION.split('/')[1],
        kind: INFERENCE_POOL_KIND,
      },
    });
    new k8s.KubeConfigMap(this, 'envoy-gateway-config', {
      metadata: {
        name: ENVOY_GATEWAY_CONFIG_MAP,
        labels,
        annotations: {
          [RESTART_AFTER_APPLY_ANNOTATION]: `deployment/${restart.deployment} -n ${restart.namespace}`,
        },
      },
      data: { [ENVOY_GATEWAY_CONFIG_KEY]: stringify(document) },
    });

    clusterScoped(
      new k8s.KubeClusterRole(this, 'inferencepool-reader', {
        metadata: { name: names.inferencePoolReader, labels },
        rules: [
          {
            apiGroups: [INFERENCE_POOL_GROUP],
            resources: ['inferencepools'],
            verbs: ['get', 'list', 'watch'],
          },
        ],
      }),
    );
    clusterScoped(
      new k8s.KubeClusterRoleBinding(this, 'inferencepool-reader-binding', {
        metadata: { name: names.inferencePoolReader, labels },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'ClusterRole',
          name: names.inferencePoolReader,
        },
        subjects: [
          { kind: 'ServiceAccount', name: ENVOY_GATEWAY_DEPLOYMENT, namespace: ENVOY_GATEWAY_NAMESPACE },
        ],
      }),
    );
  }
}

/**
 * The arm in the lab namespace: its own EPP (TLS) and InferencePool over the standard replicas, the
 * GatewayClass with an EnvoyProxy that pins the data-plane Service's name and keeps it
 * cluster-internal, a Gateway listening on the arm's port, and the HTTPRoute to the pool.
 */
export class AiGatewayChart extends Chart {
  constructor(scope: Construct, id: string, props: AiGatewayChartProps) {
    super(scope, id, props);
    const { config } = props;
    const names = aiGatewayNames(config);
    const labels = { [COMPONENT_LABEL]: AI_GATEWAY_ARM };
    const arm = armById(config, AI_GATEWAY_ARM);
    const fe = frontEnd(config, arm);
    // Envoy Gateway creates data-plane Services in its own namespace unless it runs in
    // gateway-namespace mode, which this configuration does not enable.
    if (fe.namespace !== ENVOY_GATEWAY_NAMESPACE) {
      throw new Error(
        `the study expects the ai-gateway Service in ${fe.namespace}, but Envoy Gateway creates it in ${ENVOY_GATEWAY_NAMESPACE}`,
      );
    }

    const epp = new EndpointPicker(this, 'epp', endpointPickerProps(config, arm));

    // In the controller's namespace, where Envoy Gateway resolves a GatewayClass's parameters and
    // where its own documentation places them.
    new EnvoyProxy(this, 'envoy-proxy', {
      metadata: { name: names.envoyProxy, namespace: ENVOY_GATEWAY_NAMESPACE, labels },
      spec: {
        provider: {
          type: 'Kubernetes',
          kubernetes: {
            // Sized like the standalone Envoy, so the two Envoy arms differ in routing only.
            envoyDeployment: {
              replicas: 1,
              // On the front ends' nodes, like the standalone Envoy.
              pod: podPlacement(labPlacement(config).frontEnds),
              container: {
                resources: {
                  requests: { cpu: REQUESTS.envoy.cpu, memory: REQUESTS.envoy.memory },
                  limits: { memory: REQUESTS.envoy.memoryLimit },
                },
              },
            },
            // ClusterIP: the default LoadBalancer would publish the port on the node (K3s ServiceLB).
            envoyService: { name: fe.service, type: 'ClusterIP' },
          },
        },
        logging: { level: { default: proxyLogLevel(config.envoy.logLevel) } },
        concurrency: config.envoy.concurrency,
      },
    });

    clusterScoped(
      new GatewayClass(this, 'gateway-class', {
        metadata: { name: names.gatewayClass, labels },
        spec: {
          controllerName: ENVOY_GATEWAY_CONTROLLER_NAME,
          parametersRef: {
            group: ENVOY_GATEWAY_GROUP,
            kind: 'EnvoyProxy',
            name: names.envoyProxy,
            namespace: ENVOY_GATEWAY_NAMESPACE,
          },
        },
      }),
    );

    new Gateway(this, 'gateway', {
      metadata: { name: names.gateway, labels },
      spec: {
        gatewayClassName: names.gatewayClass,
        listeners: [{ name: 'http', protocol: 'HTTP', port: fe.port }],
      },
    });

    // The InferencePool backendRef needs no port: Envoy Gateway hands kinds listed in
    // backendResources to the AI Gateway extension without its Service checks.
    new HttpRoute(this, 'http-route', {
      metadata: { name: names.httpRoute, labels },
      spec: {
        parentRefs: [{ group: GATEWAY_API_GROUP, kind: 'Gateway', name: names.gateway }],
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: '/' } }],
            backendRefs: [{ group: INFERENCE_POOL_GROUP, kind: INFERENCE_POOL_KIND, name: epp.poolName }],
            timeouts: { request: AI_GATEWAY_ROUTE_TIMEOUT },
          },
        ],
      },
    });
  }
}
