import { ApiObject, type ApiObjectMetadata } from 'cdk8s';
import type { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';

/**
 * Envoy Gateway's own kinds (`gateway.envoyproxy.io/v1alpha1`) as the AI Gateway arm uses them,
 * written from the v1.8.1 API types: the EnvoyProxy resource that shapes the data plane, and the
 * EnvoyGateway document the controller reads from its ConfigMap at start. Only the lab's fields.
 */

export const ENVOY_GATEWAY_GROUP = 'gateway.envoyproxy.io';
export const ENVOY_GATEWAY_API_VERSION = `${ENVOY_GATEWAY_GROUP}/v1alpha1`;
/** The controller name Envoy Gateway claims GatewayClasses with (its default). */
export const ENVOY_GATEWAY_CONTROLLER_NAME = `${ENVOY_GATEWAY_GROUP}/gatewayclass-controller`;
/** The controller's namespace in the release install; the data-plane Services land here too. */
export const ENVOY_GATEWAY_NAMESPACE = 'envoy-gateway-system';
/** Deployment and ServiceAccount of the controller in the release install. */
export const ENVOY_GATEWAY_DEPLOYMENT = 'envoy-gateway';
/** The ConfigMap (and its key) the controller reads its EnvoyGateway configuration from. */
export const ENVOY_GATEWAY_CONFIG_MAP = 'envoy-gateway-config';
export const ENVOY_GATEWAY_CONFIG_KEY = 'envoy-gateway.yaml';

/** Log levels Envoy Gateway accepts, for itself and for the proxies it manages. */
export type ProxyLogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

export interface ResourceList {
  readonly cpu?: string;
  readonly memory?: string;
}

export interface EnvoyProxySpec {
  readonly provider: {
    readonly type: 'Kubernetes';
    readonly kubernetes: {
      readonly envoyDeployment?: {
        readonly replicas?: number;
        readonly container?: {
          readonly resources?: { readonly requests?: ResourceList; readonly limits?: ResourceList };
        };
        /**
         * The proxy pods' scheduling (KubernetesPodSpec in envoyproxy/gateway
         * api/v1alpha1/shared_types.go: `nodeSelector`, `tolerations`).
         */
        readonly pod?: {
          readonly nodeSelector?: Readonly<Record<string, string>>;
          readonly tolerations?: readonly k8s.Toleration[];
        };
      };
      readonly envoyService?: {
        /** The Service's name; without it Envoy Gateway generates one with a hash suffix. */
        readonly name?: string;
        /** Defaults to LoadBalancer, which on K3s binds the port on the node (ServiceLB). */
        readonly type?: 'ClusterIP' | 'LoadBalancer' | 'NodePort';
      };
    };
  };
  readonly logging?: { readonly level: { readonly default: ProxyLogLevel } };
  /** Envoy worker threads; unset, Envoy starts one per CPU of the host. */
  readonly concurrency?: number;
}

export class EnvoyProxy extends ApiObject {
  constructor(
    scope: Construct,
    id: string,
    props: { metadata: ApiObjectMetadata & { readonly name: string }; spec: EnvoyProxySpec },
  ) {
    const { concurrency } = props.spec;
    if (concurrency !== undefined && (!Number.isInteger(concurrency) || concurrency < 1)) {
      throw new Error(
        `EnvoyProxy ${props.metadata.name}: concurrency must be a positive integer, got ${concurrency}`,
      );
    }
    super(scope, id, { apiVersion: ENVOY_GATEWAY_API_VERSION, kind: 'EnvoyProxy', ...props });
  }
}

/** A kind an extension handles, by group, version and kind (all three required). */
export interface GroupVersionKind {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
}

export type XdsTranslatorHook =
  | 'VirtualHost'
  | 'Route'
  | 'HTTPListener'
  | 'Translation'
  | 'Cluster'
  | 'Endpoints';

export interface EnvoyGatewayConfig {
  readonly apiVersion: typeof ENVOY_GATEWAY_API_VERSION;
  readonly kind: 'EnvoyGateway';
  readonly gateway: { readonly controllerName: string };
  readonly provider: {
    readonly type: 'Kubernetes';
    readonly kubernetes?: { readonly shutdownManager?: { readonly image: string } };
  };
  readonly logging?: { readonly level: { readonly default: ProxyLogLevel } };
  readonly extensionApis: { readonly enableEnvoyPatchPolicy: boolean; readonly enableBackend: boolean };
  readonly extensionManager: {
    /** Kinds whose backendRefs Envoy Gateway hands to the extension instead of rejecting them. */
    readonly backendResources: readonly GroupVersionKind[];
    readonly hooks: {
      readonly xdsTranslator: {
        readonly translation: {
          readonly listener: { readonly includeAll: boolean };
          readonly route: { readonly includeAll: boolean };
          readonly cluster: { readonly includeAll: boolean };
          readonly secret: { readonly includeAll: boolean };
        };
        readonly post: readonly XdsTranslatorHook[];
      };
    };
    readonly service: { readonly fqdn: { readonly hostname: string; readonly port: number } };
  };
}

/** The AI Gateway controller's extension server (its Helm release `aieg` in envoy-ai-gateway-system). */
export const AI_GATEWAY_EXTENSION_SERVICE = {
  hostname: 'ai-gateway-controller.envoy-ai-gateway-system.svc.cluster.local',
  port: 1063,
} as const;

export interface AiGatewayEnvoyGatewayOptions {
  /** Envoy Gateway release, e.g. `v1.8.1`; pins the shutdown manager image. */
  readonly envoyGatewayVersion: string;
  /** InferencePool's group and served version (GAIE v1.0: `inference.networking.k8s.io`, `v1`). */
  readonly inferencePool: GroupVersionKind;
}

/**
 * Envoy Gateway's configuration for the AI Gateway with InferencePool backends (docs/facts.md §3.6).
 * `backendResources` is what lets an HTTPRoute name an InferencePool (otherwise ResolvedRefs=False,
 * InvalidKind); an extension manager also needs its hooks and service, or the config is rejected.
 */
export function aiGatewayEnvoyGatewayConfig(options: AiGatewayEnvoyGatewayOptions): EnvoyGatewayConfig {
  return {
    apiVersion: ENVOY_GATEWAY_API_VERSION,
    kind: 'EnvoyGateway',
    gateway: { controllerName: ENVOY_GATEWAY_CONTROLLER_NAME },
    provider: {
      type: 'Kubernetes',
      // This document replaces the one the release install wrote, which pins the shutdown manager to
      // the release's own image; without it the controller falls back to an unpinned dev image.
      kubernetes: {
        shutdownManager: { image: `docker.io/envoyproxy/gateway:${options.envoyGatewayVersion}` },
      },
    },
    logging: { level: { default: 'info' } },
    extensionApis: { enableEnvoyPatchPolicy: true, enableBackend: true },
    extensionManager: {
      backendResources: [options.inferencePool],
      hooks: {
        xdsTranslator: {
          translation: {
            listener: { includeAll: true },
            route: { includeAll: true },
            cluster: { includeAll: true },
            secret: { includeAll: true },
          },
          post: ['Translation', 'Cluster', 'Route'],
        },
      },
      service: { fqdn: { ...AI_GATEWAY_EXTENSION_SERVICE } },
    },
  };
}
