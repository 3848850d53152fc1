import { Ajv, type ValidateFunction } from 'ajv';
import { DaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { AI_GATEWAY_RESOURCE_SCHEMAS, envoyGatewayConfigSchema } from '../../charts/ai-gateway/schemas.ts';

/**
 * Schema validation for the tests: Kubernetes kinds through the kubernetes-models validators
 * (schemas of Kubernetes v1.33), GAIE kinds through our own JSON schemas of the v1.0.1 API, the
 * Gateway API and Envoy Gateway kinds of the AI Gateway arm through charts/ai-gateway/schemas.ts.
 */

// biome-ignore lint/suspicious/noExplicitAny: the models take any manifest-shaped object
type Model = new (data: any) => { validate(): void };

const MODELS: Record<string, Model> = {
  'v1/Namespace': Namespace,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/DaemonSet': DaemonSet,
  'apps/v1/StatefulSet': StatefulSet,
  'apps/v1/Deployment': Deployment,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
  'batch/v1/Job': Job,
};

const ajv = new Ajv({ allErrors: true, strict: true });

const dnsName = { type: 'string', pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 };
const portNumber = { type: 'integer', minimum: 1, maximum: 65535 };

/** InferencePool `inference.networking.k8s.io/v1`, the fields of the v1.0.1 CRD the lab may set. */
export const inferencePoolSchema = {
  type: 'object',
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  additionalProperties: false,
  properties: {
    apiVersion: { const: 'inference.networking.k8s.io/v1' },
    kind: { const: 'InferencePool' },
    metadata: {
      type: 'object',
      required: ['name'],
      properties: { name: dnsName, namespace: dnsName, labels: { type: 'object' } },
    },
    spec: {
      type: 'object',
      required: ['selector', 'targetPorts', 'endpointPickerRef'],
      additionalProperties: false,
      properties: {
        selector: {
          type: 'object',
          required: ['matchLabels'],
          additionalProperties: false,
          properties: {
            matchLabels: { type: 'object', minProperties: 1, additionalProperties: { type: 'string' } },
          },
        },
        targetPorts: {
          type: 'array',
          minItems: 1,
          maxItems: 1,
          items: {
            type: 'object',
            required: ['number'],
            additionalProperties: false,
            properties: { number: portNumber },
          },
        },
        endpointPickerRef: {
          type: 'object',
          required: ['name', 'port'],
          additionalProperties: false,
          properties: {
            group: { type: 'string' },
            kind: { type: 'string' },
            name: dnsName,
            port: {
              type: 'object',
              required: ['number'],
              additionalProperties: false,
              properties: { number: portNumber },
            },
            failureMode: { enum: ['FailOpen', 'FailClose'] },
          },
        },
      },
    },
  },
} as const;

/** EndpointPickerConfig: decoded strictly by the EPP, with integer weights. */
export const endpointPickerConfigSchema = {
  type: 'object',
  required: ['apiVersion', 'kind', 'plugins', 'schedulingProfiles'],
  additionalProperties: false,
  properties: {
    apiVersion: { const: 'inference.networking.x-k8s.io/v1alpha1' },
    kind: { const: 'EndpointPickerConfig' },
    plugins: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['type'],
        additionalProperties: false,
        properties: {
          type: { type: 'string', minLength: 1 },
          name: { type: 'string', minLength: 1 },
          parameters: { type: 'object' },
        },
      },
    },
    schedulingProfiles: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['name', 'plugins'],
        additionalProperties: false,
        properties: {
          name: { type: 'string', minLength: 1 },
          plugins: {
            type: 'array',
            minItems: 1,
            items: {
              type: 'object',
              required: ['pluginRef'],
              additionalProperties: false,
              properties: {
                pluginRef: { type: 'string', minLength: 1 },
                weight: { type: 'integer', minimum: 0 },
              },
            },
          },
        },
      },
    },
  },
} as const;

const validateInferencePool = ajv.compile(inferencePoolSchema);
const customResourceValidators: Record<string, ValidateFunction> = Object.fromEntries(
  Object.entries(AI_GATEWAY_RESOURCE_SCHEMAS).map(([key, schema]) => [key, ajv.compile(schema)]),
);
const validateEnvoyGatewayConfigSchema = ajv.compile(envoyGatewayConfigSchema);

/** Throws with the schema errors when an EnvoyGateway configuration document is invalid. */
export function validateEnvoyGatewayConfig(config: unknown): void {
  if (!validateEnvoyGatewayConfigSchema(config)) {
    throw new Error(`EnvoyGateway: ${ajv.errorsText(validateEnvoyGatewayConfigSchema.errors)}`);
  }
}
const validateEndpointPickerConfigSchema = ajv.compile(endpointPickerConfigSchema);

/** Throws with the schema errors when an EndpointPickerConfig is invalid. */
export function validateEndpointPickerConfig(config: unknown): void {
  if (!validateEndpointPickerConfigSchema(config)) {
    throw new Error(`EndpointPickerConfig: ${ajv.errorsText(validateEndpointPickerConfigSchema.errors)}`);
  }
  // Every profile plugin must name a declared plugin (name defaults to type).
  const { plugins, schedulingProfiles } = config as {
    plugins: { type: string; name?: string }[];
    schedulingProfiles: { plugins: { pluginRef: string }[] }[];
  };
  const declared = new Set(plugins.map((p) => p.name ?? p.type));
  for (const profile of schedulingProfiles) {
    for (const ref of profile.plugins) {
      if (!declared.has(ref.pluginRef))
        throw new Error(`EndpointPickerConfig: undeclared plugin ${ref.pluginRef}`);
    }
  }
}

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary manifest fields
  [key: string]: any;
}

/** Validates one object against its schema; throws naming the object when it is invalid. */
export function validateManifest(object: Manifest): void {
  const key = `${object.apiVersion}/${object.kind}`;
  const where = `${object.kind} ${object.metadata?.namespace ?? ''}/${object.metadata?.name}`;
  if (key === 'inference.networking.k8s.io/v1/InferencePool') {
    if (!validateInferencePool(object))
      throw new Error(`${where}: ${ajv.errorsText(validateInferencePool.errors)}`);
    return;
  }
  const custom = customResourceValidators[key];
  if (custom) {
    if (!custom(object)) throw new Error(`${where}: ${ajv.errorsText(custom.errors)}`);
    return;
  }
  const model = MODELS[key];
  if (!model) throw new Error(`${where}: no schema for ${key}`);
  try {
    new model(object).validate();
  } catch (error) {
    throw new Error(`${where}: ${(error as Error).message}`);
  }
}
