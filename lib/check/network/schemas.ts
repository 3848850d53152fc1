import { z } from 'zod';
import type { KubeObject } from '../manifest.ts';
import { issueViolations } from '../schemas.ts';
import type { Violation } from '../violation.ts';

/**
 * Schemas of the network lab's Istio kinds and of its Cilium values, for `lab check`. The Istio
 * ones follow the v1 CRDs of istio/api release-1.31 (kubernetes/customresourcedefinitions.gen.yaml):
 * the spec keys each CRD knows (unknown keys are pruned by the API server, so a typo silently does
 * nothing) and the enums of the fields the lab sets. The lab vendors no CRD.
 */

const mtlsMode = z.enum(['UNSET', 'DISABLE', 'PERMISSIVE', 'STRICT']);
const matchLabels = z.record(z.string().min(1, 'key must not be empty'), z.string());
const selector = z.strictObject({ matchLabels: matchLabels.optional() });

const PeerAuthenticationSpec = z.strictObject({
  selector: selector.optional(),
  mtls: z.strictObject({ mode: mtlsMode.optional() }).optional(),
  portLevelMtls: z
    .record(z.string().regex(/^\d+$/, 'must be a port number'), z.strictObject({ mode: mtlsMode.optional() }))
    .optional(),
});

const source = z.strictObject({
  principals: z.array(z.string()).optional(),
  notPrincipals: z.array(z.string()).optional(),
  requestPrincipals: z.array(z.string()).optional(),
  notRequestPrincipals: z.array(z.string()).optional(),
  namespaces: z.array(z.string()).optional(),
  notNamespaces: z.array(z.string()).optional(),
  serviceAccounts: z.array(z.string()).max(16).optional(),
  notServiceAccounts: z.array(z.string()).max(16).optional(),
  trustDomains: z.array(z.string()).optional(),
  notTrustDomains: z.array(z.string()).optional(),
  ipBlocks: z.array(z.string()).optional(),
  notIpBlocks: z.array(z.string()).optional(),
  remoteIpBlocks: z.array(z.string()).optional(),
  notRemoteIpBlocks: z.array(z.string()).optional(),
});

const AuthorizationPolicySpec = z.strictObject({
  action: z.enum(['ALLOW', 'DENY', 'AUDIT', 'CUSTOM']).optional(),
  provider: z.unknown().optional(),
  selector: selector.optional(),
  targetRef: z.unknown().optional(),
  targetRefs: z.array(z.unknown()).max(16).optional(),
  rules: z
    .array(
      z.strictObject({
        from: z.array(z.strictObject({ source: source.optional() })).optional(),
        to: z.array(z.unknown()).optional(),
        when: z.array(z.unknown()).optional(),
      }),
    )
    .max(512)
    .optional(),
});

const clientTls = z.strictObject({
  mode: z.enum(['DISABLE', 'SIMPLE', 'MUTUAL', 'ISTIO_MUTUAL']).optional(),
  caCertificates: z.string().optional(),
  caCrl: z.string().optional(),
  clientCertificate: z.string().optional(),
  credentialName: z.string().optional(),
  insecureSkipVerify: z.boolean().optional(),
  privateKey: z.string().optional(),
  sni: z.string().optional(),
  subjectAltNames: z.array(z.string()).optional(),
});

const trafficPolicy = z.strictObject({
  connectionPool: z.unknown().optional(),
  loadBalancer: z.unknown().optional(),
  outlierDetection: z.unknown().optional(),
  portLevelSettings: z
    .array(
      z.strictObject({
        port: z.strictObject({ number: z.number().int().min(1).max(65535) }).optional(),
        connectionPool: z.unknown().optional(),
        loadBalancer: z.unknown().optional(),
        outlierDetection: z.unknown().optional(),
        tls: clientTls.optional(),
      }),
    )
    .max(4096)
    .optional(),
  proxyProtocol: z.unknown().optional(),
  retryBudget: z.unknown().optional(),
  tls: clientTls.optional(),
  tunnel: z.unknown().optional(),
});

const DestinationRuleSpec = z.strictObject({
  host: z.string().min(1),
  trafficPolicy: trafficPolicy.optional(),
  subsets: z.array(z.unknown()).optional(),
  exportTo: z.array(z.string()).optional(),
  workloadSelector: selector.optional(),
});

/** Spec schemas by `apiVersion/kind`. */
export const ISTIO_SPEC_SCHEMAS: Readonly<Record<string, z.ZodType>> = {
  'security.istio.io/v1/PeerAuthentication': PeerAuthenticationSpec,
  'security.istio.io/v1/AuthorizationPolicy': AuthorizationPolicySpec,
  'networking.istio.io/v1/DestinationRule': DestinationRuleSpec,
};

/**
 * The Cilium values the lab sets, with the types of the Cilium chart's values.schema.json (chart
 * 1.20.0; the chart's schema lets other keys through, so only these are typed).
 */
export const CiliumValuesSchema = z.looseObject({
  kubeProxyReplacement: z.union([z.boolean(), z.string()]).optional(),
  k8sServiceHost: z.string().optional(),
  k8sServicePort: z.union([z.string(), z.number().int()]).optional(),
  ipam: z
    .looseObject({
      mode: z.string().optional(),
      operator: z
        .looseObject({ clusterPoolIPv4PodCIDRList: z.union([z.array(z.string()), z.string()]).optional() })
        .optional(),
    })
    .optional(),
  routingMode: z.enum(['', 'native', 'tunnel']).optional(),
  tunnelProtocol: z.enum(['', 'vxlan', 'geneve']).optional(),
  bpf: z.looseObject({ lbMapMax: z.number().int().nullable().optional() }).optional(),
  operator: z.looseObject({ replicas: z.number().int().optional() }).optional(),
  socketLB: z
    .looseObject({ enabled: z.boolean().optional(), hostNamespaceOnly: z.boolean().optional() })
    .optional(),
  cni: z.looseObject({ exclusive: z.boolean().optional() }).optional(),
});
export type ParsedCiliumValues = z.infer<typeof CiliumValuesSchema>;

/** Whether this is one of the Istio kinds the network lab knows. */
export function isIstioKind(object: KubeObject): boolean {
  return `${object.apiVersion}/${object.kind}` in ISTIO_SPEC_SCHEMAS;
}

/** Schema violations of an Istio object; undefined when it is not one of the lab's Istio kinds. */
export function istioSchemaViolations(object: KubeObject): Violation[] | undefined {
  const schema = ISTIO_SPEC_SCHEMAS[`${object.apiVersion}/${object.kind}`];
  if (!schema) return undefined;
  const result = schema.safeParse(object.spec);
  if (result.success) return [];
  return issueViolations(
    object,
    ['spec'],
    result.error.issues,
    `Istio 1.31 ${object.apiVersion} ${object.kind} CRD`,
  );
}
