import { Chart, type ChartProps } from 'cdk8s';
import type { Construct } from 'constructs';
import {
  allowedPrincipal,
  FORTIO_AUTHZ_SERVER,
  FORTIO_HTTP_PORT,
  FORTIO_PERMISSIVE_SERVER,
  FORTIO_SERVER,
  MESH_NAMESPACE,
  MTLS_ARM_LABEL,
  MTLS_ARMS,
  type MtlsArm,
} from '../../lib/network/topology.ts';
import { AuthorizationPolicy, DestinationRule, PeerAuthentication } from './istio.ts';

/**
 * The Istio policies of the mTLS experiments (docs/facts.md §N2, E2, E3, E8), in `mesh`:
 * - PeerAuthentication `default`: STRICT for the namespace;
 * - PeerAuthentication `port-exception`: on `fortio-permissive` only, port 8080 PERMISSIVE (a
 *   port-level setting needs a selector, and its key is the container port);
 * - AuthorizationPolicy `allow-good`: `fortio-authz` accepts only cluster.local/ns/mesh/sa/good;
 * - DestinationRules per encryption arm: ISTIO_MUTUAL to `fortio` (mTLS on); DISABLE to
 *   `fortio-permissive` on port 8080 only (mTLS off: plaintext between sidecars, which its port
 *   exception accepts; its other ports stay STRICT, where plaintext would be dropped).
 * Nothing here goes to `mesh-default`: E2's no-policy row measures the mesh default there, and
 * `lab check` (network 2) refuses a PeerAuthentication in it.
 */
export class MeshPoliciesChart extends Chart {
  constructor(scope: Construct, id: string, props: ChartProps) {
    super(scope, id, { ...props, namespace: MESH_NAMESPACE });
    new PeerAuthentication(this, 'strict', {
      metadata: { name: 'default', namespace: MESH_NAMESPACE },
      spec: { mtls: { mode: 'STRICT' } },
    });
    new PeerAuthentication(this, 'port-exception', {
      metadata: { name: 'port-exception', namespace: MESH_NAMESPACE },
      spec: {
        selector: { matchLabels: { app: FORTIO_PERMISSIVE_SERVER } },
        mtls: { mode: 'STRICT' },
        portLevelMtls: { [String(FORTIO_HTTP_PORT)]: { mode: 'PERMISSIVE' } },
      },
    });
    new AuthorizationPolicy(this, 'allow-good', {
      metadata: { name: 'allow-good', namespace: MESH_NAMESPACE },
      spec: {
        selector: { matchLabels: { app: FORTIO_AUTHZ_SERVER } },
        action: 'ALLOW',
        rules: [{ from: [{ source: { principals: [allowedPrincipal()] } }] }],
      },
    });
    destinationRule(this, FORTIO_SERVER, 'on');
    destinationRule(this, FORTIO_PERMISSIVE_SERVER, 'off', FORTIO_HTTP_PORT);
  }
}

/** The DestinationRule of an encryption arm: for the whole Service, or only for one Service port. */
function destinationRule(
  scope: Construct,
  service: string,
  arm: MtlsArm,
  onlyPort?: number,
): DestinationRule {
  const tls = { mode: MTLS_ARMS[arm] };
  return new DestinationRule(scope, `${service}-mtls-${arm}`, {
    metadata: {
      name: `${service}-mtls-${arm}`,
      namespace: MESH_NAMESPACE,
      labels: { [MTLS_ARM_LABEL]: arm },
    },
    spec: {
      host: `${service}.${MESH_NAMESPACE}.svc.cluster.local`,
      trafficPolicy:
        onlyPort === undefined ? { tls } : { portLevelSettings: [{ port: { number: onlyPort }, tls }] },
    },
  });
}
