/**
 * JSON Schemas (draft 7, for ajv) of the Gateway API and Envoy Gateway objects the AI Gateway arm
 * emits, written from the Gateway API v1.5.1 CRDs and the Envoy Gateway v1.8.1 API types that the
 * pinned releases install. They cover the fields the lab sets and reject any other key, so a typo
 * fails a test instead of being dropped: the API server prunes unknown fields of a custom resource,
 * and Envoy Gateway decodes its own configuration without strict field checking.
 */

const dnsLabel = { type: 'string', minLength: 1, maxLength: 63, pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' };
const dnsSubdomain = {
  type: 'string',
  minLength: 1,
  maxLength: 253,
  pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$',
};
const group = {
  type: 'string',
  maxLength: 253,
  pattern: '^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$',
};
const kind = {
  type: 'string',
  minLength: 1,
  maxLength: 63,
  pattern: '^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$',
};
const objectName = { type: 'string', minLength: 1, maxLength: 253 };
const portNumber = { type: 'integer', minimum: 1, maximum: 65535 };
const duration = { type: 'string', pattern: '^([0-9]{1,5}(h|m|s|ms)){1,4}$' };
const quantity = { type: 'string', pattern: '^[0-9]+(\\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$' };
const logLevel = { enum: ['trace', 'debug', 'info', 'warn', 'error'] };

function metadata(namespaced: boolean) {
  return {
    type: 'object',
    required: ['name'],
    additionalProperties: false,
    properties: {
      name: dnsSubdomain,
      ...(namespaced ? { namespace: dnsLabel } : {}),
      labels: { type: 'object', additionalProperties: { type: 'string' } },
      annotations: { type: 'object', additionalProperties: { type: 'string' } },
    },
  };
}

function resource(apiVersion: string, kindName: string, namespaced: boolean, spec: object) {
  return {
    type: 'object',
    required: ['apiVersion', 'kind', 'metadata', 'spec'],
    additionalProperties: false,
    properties: {
      apiVersion: { const: apiVersion },
      kind: { const: kindName },
      metadata: metadata(namespaced),
      spec,
    },
  };
}

/** GatewayClass `gateway.networking.k8s.io/v1` (cluster-scoped). */
export const gatewayClassSchema = resource('gateway.networking.k8s.io/v1', 'GatewayClass', false, {
  type: 'object',
  required: ['controllerName'],
  additionalProperties: false,
  properties: {
    controllerName: {
      type: 'string',
      minLength: 1,
      maxLength: 253,
      pattern:
        "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\\/[A-Za-z0-9\\/\\-._~%!$&'()*+,;=:]+$",
    },
    parametersRef: {
      type: 'object',
      required: ['group', 'kind', 'name'],
      additionalProperties: false,
      properties: { group, kind, name: objectName, namespace: dnsLabel },
    },
  },
});

/** Gateway `gateway.networking.k8s.io/v1`: 1 to 64 listeners, each with a name, port and protocol. */
export const gatewaySchema = resource('gateway.networking.k8s.io/v1', 'Gateway', true, {
  type: 'object',
  required: ['gatewayClassName', 'listeners'],
  additionalProperties: false,
  properties: {
    gatewayClassName: objectName,
    listeners: {
      type: 'array',
      minItems: 1,
      maxItems: 64,
      items: {
        type: 'object',
        required: ['name', 'port', 'protocol'],
        additionalProperties: false,
        properties: {
          name: dnsSubdomain,
          port: portNumber,
          protocol: { type: 'string', minLength: 1, maxLength: 255 },
        },
      },
    },
  },
});

const backendRef = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: {
    group,
    kind,
    name: objectName,
    namespace: dnsLabel,
    port: portNumber,
    weight: { type: 'integer', minimum: 0, maximum: 1000000 },
  },
  // The CRD's rule "Must have port for Service reference" (group '' and kind Service are the defaults).
  if: { type: 'object', properties: { group: { const: '' }, kind: { const: 'Service' } } },
  // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then keyword
  then: { type: 'object', properties: { port: portNumber }, required: ['port'] },
};

/** HTTPRoute `gateway.networking.k8s.io/v1`: parent Gateways, and 1 to 16 rules of matches and backends. */
export const httpRouteSchema = resource('gateway.networking.k8s.io/v1', 'HTTPRoute', true, {
  type: 'object',
  required: ['parentRefs', 'rules'],
  additionalProperties: false,
  properties: {
    parentRefs: {
      type: 'array',
      minItems: 1,
      maxItems: 32,
      items: {
        type: 'object',
        required: ['name'],
        additionalProperties: false,
        properties: { group, kind, name: objectName, namespace: dnsLabel, sectionName: dnsSubdomain },
      },
    },
    rules: {
      type: 'array',
      minItems: 1,
      maxItems: 16,
      items: {
        type: 'object',
        additionalProperties: false,
        properties: {
          matches: {
            type: 'array',
            maxItems: 64,
            items: {
              type: 'object',
              additionalProperties: false,
              properties: {
                path: {
                  type: 'object',
                  additionalProperties: false,
                  properties: {
                    type: { enum: ['Exact', 'PathPrefix', 'RegularExpression'] },
                    value: { type: 'string', maxLength: 1024 },
                  },
                },
              },
            },
          },
          backendRefs: { type: 'array', maxItems: 16, items: backendRef },
          timeouts: {
            type: 'object',
            additionalProperties: false,
            properties: { request: duration, backendRequest: duration },
          },
        },
      },
    },
  },
});

const resourceList = {
  type: 'object',
  additionalProperties: false,
  properties: { cpu: quantity, memory: quantity },
};

/** EnvoyProxy `gateway.envoyproxy.io/v1alpha1`: the Kubernetes provider's Deployment and Service, logging, concurrency. */
export const envoyProxySchema = resource('gateway.envoyproxy.io/v1alpha1', 'EnvoyProxy', true, {
  type: 'object',
  additionalProperties: false,
  properties: {
    provider: {
      type: 'object',
      required: ['type'],
      additionalProperties: false,
      properties: {
        type: { enum: ['Kubernetes', 'Custom'] },
        kubernetes: {
          type: 'object',
          additionalProperties: false,
          properties: {
            envoyDeployment: {
              type: 'object',
              additionalProperties: false,
              properties: {
                replicas: { type: 'integer', minimum: 0 },
                pod: {
                  type: 'object',
                  additionalProperties: false,
                  properties: {
                    nodeSelector: { type: 'object', additionalProperties: { type: 'string' } },
                    tolerations: {
                      type: 'array',
                      items: {
                        type: 'object',
                        additionalProperties: false,
                        properties: {
                          key: { type: 'string' },
                          operator: { enum: ['Exists', 'Equal'] },
                          value: { type: 'string' },
                          effect: { enum: ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] },
                        },
                      },
                    },
                  },
                },
                container: {
                  type: 'object',
                  additionalProperties: false,
                  properties: {
                    resources: {
                      type: 'object',
                      additionalProperties: false,
                      properties: { requests: resourceList, limits: resourceList },
                    },
                  },
                },
              },
            },
            envoyService: {
              type: 'object',
              additionalProperties: false,
              properties: {
                name: dnsLabel,
                type: { enum: ['ClusterIP', 'LoadBalancer', 'NodePort'] },
              },
            },
          },
        },
      },
    },
    logging: {
      type: 'object',
      additionalProperties: false,
      properties: {
        level: { type: 'object', additionalProperties: false, properties: { default: logLevel } },
      },
    },
    concurrency: { type: 'integer', minimum: 1 },
  },
});

const includeAll = {
  type: 'object',
  required: ['includeAll'],
  additionalProperties: false,
  properties: { includeAll: { type: 'boolean' } },
};

/**
 * The EnvoyGateway document of `envoy-gateway-config` (Envoy Gateway v1.8.1). An extension manager
 * needs hooks and a service (Envoy Gateway rejects one without them); a GroupVersionKind needs all three.
 */
export const envoyGatewayConfigSchema = {
  type: 'object',
  required: ['apiVersion', 'kind', 'gateway', 'provider'],
  additionalProperties: false,
  properties: {
    apiVersion: { const: 'gateway.envoyproxy.io/v1alpha1' },
    kind: { const: 'EnvoyGateway' },
    gateway: {
      type: 'object',
      required: ['controllerName'],
      additionalProperties: false,
      properties: { controllerName: { type: 'string', minLength: 1 } },
    },
    provider: {
      type: 'object',
      required: ['type'],
      additionalProperties: false,
      properties: {
        type: { enum: ['Kubernetes', 'Custom'] },
        kubernetes: {
          type: 'object',
          additionalProperties: false,
          properties: {
            shutdownManager: {
              type: 'object',
              additionalProperties: false,
              properties: { image: { type: 'string', pattern: ':[^:/]+$' } },
            },
          },
        },
      },
    },
    logging: {
      type: 'object',
      additionalProperties: false,
      properties: {
        level: { type: 'object', additionalProperties: false, properties: { default: logLevel } },
      },
    },
    extensionApis: {
      type: 'object',
      additionalProperties: false,
      properties: {
        enableEnvoyPatchPolicy: { type: 'boolean' },
        enableBackend: { type: 'boolean' },
      },
    },
    extensionManager: {
      type: 'object',
      required: ['hooks', 'service'],
      additionalProperties: false,
      properties: {
        backendResources: {
          type: 'array',
          items: {
            type: 'object',
            required: ['group', 'version', 'kind'],
            additionalProperties: false,
            properties: {
              group: { type: 'string', minLength: 1 },
              version: { type: 'string', minLength: 1 },
              kind: { type: 'string', minLength: 1 },
            },
          },
        },
        hooks: {
          type: 'object',
          required: ['xdsTranslator'],
          additionalProperties: false,
          properties: {
            xdsTranslator: {
              type: 'object',
              additionalProperties: false,
              properties: {
                translation: {
                  type: 'object',
                  additionalProperties: false,
                  properties: {
                    listener: includeAll,
                    route: includeAll,
                    cluster: includeAll,
                    secret: includeAll,
                  },
                },
                post: {
                  type: 'array',
                  items: {
                    enum: ['VirtualHost', 'Route', 'HTTPListener', 'Translation', 'Cluster', 'Endpoints'],
                  },
                },
              },
            },
          },
        },
        service: {
          type: 'object',
          required: ['fqdn'],
          additionalProperties: false,
          properties: {
            fqdn: {
              type: 'object',
              required: ['hostname', 'port'],
              additionalProperties: false,
              properties: { hostname: dnsSubdomain, port: portNumber },
            },
          },
        },
      },
    },
  },
} as const;

/** Schemas of the custom resources above, by `apiVersion/kind`. */
export const AI_GATEWAY_RESOURCE_SCHEMAS: Readonly<Record<string, object>> = {
  'gateway.networking.k8s.io/v1/GatewayClass': gatewayClassSchema,
  'gateway.networking.k8s.io/v1/Gateway': gatewaySchema,
  'gateway.networking.k8s.io/v1/HTTPRoute': httpRouteSchema,
  'gateway.envoyproxy.io/v1alpha1/EnvoyProxy': envoyProxySchema,
};
