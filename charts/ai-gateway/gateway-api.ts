import { ApiObject, type ApiObjectMetadata } from 'cdk8s';
import type { Construct } from 'constructs';

/**
 * Typed wrappers for the Gateway API kinds the AI Gateway arm creates (`gateway.networking.k8s.io/v1`,
 * the bundle Envoy Gateway v1.8.1 installs is Gateway API v1.5.1), written from the API instead of
 * `cdk8s import` of vendored CRDs. Only the fields the lab sets.
 */

export const GATEWAY_API_GROUP = 'gateway.networking.k8s.io';
export const GATEWAY_API_VERSION = `${GATEWAY_API_GROUP}/v1`;

type Named = ApiObjectMetadata & { readonly name: string };

/** A reference from a GatewayClass to its implementation-specific parameters (an EnvoyProxy). */
export interface ParametersReference {
  readonly group: string;
  readonly kind: string;
  readonly name: string;
  /** Required for namespaced parameter kinds such as EnvoyProxy. */
  readonly namespace?: string;
}

export interface GatewayClassSpec {
  /** Domain-prefixed path of the controller that manages Gateways of this class. */
  readonly controllerName: string;
  readonly parametersRef?: ParametersReference;
}

export interface GatewayListener {
  readonly name: string;
  readonly protocol: 'HTTP';
  readonly port: number;
}

export interface GatewaySpec {
  readonly gatewayClassName: string;
  readonly listeners: readonly GatewayListener[];
}

export interface ParentReference {
  readonly group?: string;
  readonly kind?: string;
  readonly name: string;
  readonly namespace?: string;
  readonly sectionName?: string;
}

/** A backendRef; for a Service the port is required, for other kinds it depends on the implementation. */
export interface HttpBackendReference {
  readonly group?: string;
  readonly kind?: string;
  readonly name: string;
  readonly namespace?: string;
  readonly port?: number;
  readonly weight?: number;
}

export interface HttpRouteMatch {
  readonly path: { readonly type: 'Exact' | 'PathPrefix' | 'RegularExpression'; readonly value: string };
}

/** Durations as Gateway API writes them (`300s`, `1m30s`). */
export type GatewayDuration = `${number}${'h' | 'm' | 's' | 'ms'}`;

export interface HttpRouteRule {
  readonly matches?: readonly HttpRouteMatch[];
  readonly backendRefs: readonly HttpBackendReference[];
  readonly timeouts?: { readonly request?: GatewayDuration; readonly backendRequest?: GatewayDuration };
}

export interface HttpRouteSpec {
  readonly parentRefs: readonly ParentReference[];
  readonly rules: readonly HttpRouteRule[];
}

export class GatewayClass extends ApiObject {
  constructor(scope: Construct, id: string, props: { metadata: Named; spec: GatewayClassSpec }) {
    super(scope, id, { apiVersion: GATEWAY_API_VERSION, kind: 'GatewayClass', ...props });
  }
}

export class Gateway extends ApiObject {
  constructor(scope: Construct, id: string, props: { metadata: Named; spec: GatewaySpec }) {
    if (props.spec.listeners.length === 0) {
      throw new Error(`Gateway ${props.metadata.name}: at least one listener is required`);
    }
    super(scope, id, { apiVersion: GATEWAY_API_VERSION, kind: 'Gateway', ...props });
  }
}

export class HttpRoute extends ApiObject {
  constructor(scope: Construct, id: string, props: { metadata: Named; spec: HttpRouteSpec }) {
    for (const rule of props.spec.rules) {
      for (const ref of rule.backendRefs) {
        const isService = (ref.group ?? '') === '' && (ref.kind ?? 'Service') === 'Service';
        if (isService && ref.port === undefined) {
          throw new Error(`HTTPRoute ${props.metadata.name}: backendRef to Service ${ref.name} needs a port`);
        }
      }
    }
    super(scope, id, { apiVersion: GATEWAY_API_VERSION, kind: 'HTTPRoute', ...props });
  }
}
