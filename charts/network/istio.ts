import { ApiObject, type ApiObjectMetadata } from 'cdk8s';
import type { Construct } from 'constructs';

/**
 * Typed wrappers for the Istio kinds the network lab creates, written from Istio's API
 * (istio/api release-1.31, kubernetes/customresourcedefinitions.gen.yaml, version v1) instead of a
 * vendored CRD; only the fields the lab uses. lib/check/network/istio-schemas.ts validates them.
 */

export const ISTIO_SECURITY_API = 'security.istio.io/v1';
export const ISTIO_NETWORKING_API = 'networking.istio.io/v1';

export type MutualTlsMode = 'UNSET' | 'DISABLE' | 'PERMISSIVE' | 'STRICT';
export type ClientTlsMode = 'DISABLE' | 'SIMPLE' | 'MUTUAL' | 'ISTIO_MUTUAL';

interface Named {
  readonly metadata: ApiObjectMetadata & { readonly name: string };
}

export interface WorkloadSelector {
  readonly matchLabels: Readonly<Record<string, string>>;
}

export interface PeerAuthenticationProps extends Named {
  readonly spec: {
    readonly selector?: WorkloadSelector;
    readonly mtls?: { readonly mode: MutualTlsMode };
    /**
     * Keyed by the workload's container port, not the Service port; the CRD accepts it only with a
     * selector ("portLevelMtls requires selector").
     */
    readonly portLevelMtls?: Readonly<Record<string, { readonly mode: MutualTlsMode }>>;
  };
}

export class PeerAuthentication extends ApiObject {
  constructor(scope: Construct, id: string, props: PeerAuthenticationProps) {
    const { spec } = props;
    if (spec.portLevelMtls && Object.keys(spec.selector?.matchLabels ?? {}).length === 0) {
      throw new Error(
        `PeerAuthentication ${props.metadata.name}: portLevelMtls needs a workload selector (Istio ignores port-level settings without one)`,
      );
    }
    super(scope, id, { apiVersion: ISTIO_SECURITY_API, kind: 'PeerAuthentication', ...props });
  }
}

export interface AuthorizationPolicyProps extends Named {
  readonly spec: {
    readonly selector?: WorkloadSelector;
    readonly action: 'ALLOW' | 'DENY';
    readonly rules: readonly {
      readonly from: readonly { readonly source: { readonly principals: string[] } }[];
    }[];
  };
}

export class AuthorizationPolicy extends ApiObject {
  constructor(scope: Construct, id: string, props: AuthorizationPolicyProps) {
    super(scope, id, { apiVersion: ISTIO_SECURITY_API, kind: 'AuthorizationPolicy', ...props });
  }
}

export interface DestinationRuleProps extends Named {
  readonly spec: {
    /** The Service's FQDN. */
    readonly host: string;
    readonly trafficPolicy: {
      readonly tls?: { readonly mode: ClientTlsMode };
      /** Per Service port (not container port), overriding `tls` there. */
      readonly portLevelSettings?: readonly {
        readonly port: { readonly number: number };
        readonly tls: { readonly mode: ClientTlsMode };
      }[];
    };
  };
}

export class DestinationRule extends ApiObject {
  constructor(scope: Construct, id: string, props: DestinationRuleProps) {
    super(scope, id, { apiVersion: ISTIO_NETWORKING_API, kind: 'DestinationRule', ...props });
  }
}
