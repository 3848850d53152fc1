import { createRequire } from 'node:module';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { AI_GATEWAY_RESOURCE_SCHEMAS, envoyGatewayConfigSchema } from '../../charts/ai-gateway/schemas.ts';
import { fieldPath, isRecord, type KubeObject, record, text } from './manifest.ts';
import { unknownFieldViolations } from './unknown-fields.ts';
import { type Note, note, SCHEMA, type Violation, violation } from './violation.ts';

/**
 * Schema validation. Built-in kinds are validated with the `kubernetes-models` validators (the
 * Kubernetes OpenAPI schemas); the GAIE kinds the lab creates have their own schemas here, since
 * the product vendors no CRDs. Other kinds are reported as notes: not validated, not wrong.
 */

interface ModelClass {
  readonly apiVersion: string;
  readonly kind: string;
  new (data: unknown): { validate(): void };
}

interface SchemaError {
  readonly instancePath?: string;
  readonly message?: string;
  readonly params?: { allowedValues?: unknown[] };
}

const requireModel = createRequire(import.meta.url);

/** `kubernetes-models` classes loaded so far by `apiVersion/kind`; undefined: no such built-in kind. */
const builtInModels = new Map<string, ModelClass | undefined>();

/**
 * The `kubernetes-models` class of a kind, loaded on first use. The package has one module per
 * kind, under its group and version (`kubernetes-models/apps/v1/Deployment`, the core group's
 * `kubernetes-models/v1/Pod`: its package.json exports); its index loads every kind's module and
 * schema, about 2.5 s of CPU per process, where a folder of manifests uses a dozen kinds.
 */
function builtInModel(apiVersion: string, kind: string): ModelClass | undefined {
  const key = `${apiVersion}/${kind}`;
  if (!builtInModels.has(key)) builtInModels.set(key, loadBuiltInModel(apiVersion, kind));
  return builtInModels.get(key);
}

function loadBuiltInModel(apiVersion: string, kind: string): ModelClass | undefined {
  // Only names a Kubernetes group, version and kind can have: nothing else becomes a module path.
  if (!/^([a-z0-9][a-z0-9.-]*\/)?v[0-9][a-z0-9]*$/.test(apiVersion) || !/^[A-Z][A-Za-z0-9]*$/.test(kind)) {
    return undefined;
  }
  let exported: Record<string, unknown>;
  try {
    exported = requireModel(`kubernetes-models/${apiVersion}/${kind}`);
  } catch (error) {
    // A group or version the package does not export, or a kind it has no module for (and not a
    // module missing underneath a kind's: that is a broken install, and says so).
    const { code, message } = error as { code?: unknown; message?: unknown };
    if (code === 'ERR_PACKAGE_PATH_NOT_EXPORTED') return undefined;
    if (code === 'MODULE_NOT_FOUND' && String(message).includes(`/${apiVersion}/${kind}.js'`))
      return undefined;
    throw error;
  }
  const model = exported[kind];
  if (typeof model !== 'function') return undefined;
  const { apiVersion: modelApiVersion, kind: modelKind } = model as unknown as Partial<ModelClass>;
  return modelApiVersion === apiVersion && modelKind === kind ? (model as unknown as ModelClass) : undefined;
}

/** Whether `kubernetes-models` knows this kind. */
export function isBuiltInKind(object: KubeObject): boolean {
  return builtInModel(object.apiVersion, object.kind) !== undefined;
}

/** `/spec/template/spec/containers/0/image` -> `spec.template.spec.containers[0].image`. */
export function pointerToField(pointer: string): string {
  const segments = pointer
    .split('/')
    .slice(1)
    .map((segment) => segment.replaceAll('~1', '/').replaceAll('~0', '~'))
    .map((segment) => (/^\d+$/.test(segment) ? Number(segment) : segment));
  return fieldPath(segments);
}

function builtInViolations(object: KubeObject, model: ModelClass): Violation[] {
  try {
    new model(object).validate();
    return [];
  } catch (error) {
    const errors = (error as { errors?: SchemaError[] }).errors;
    if (!Array.isArray(errors)) throw error;
    return errors.map((e) => {
      const allowed = e.params?.allowedValues ? `: ${e.params.allowedValues.join(', ')}` : '';
      return violation(
        object,
        pointerToField(e.instancePath ?? '') || '(object)',
        SCHEMA,
        `${e.message ?? 'invalid'}${allowed} (Kubernetes ${object.apiVersion} ${object.kind} schema; the API server would reject it)`,
      );
    });
  }
}

const port = z.number().int('must be an integer port').min(1).max(65535);

/** InferencePool `inference.networking.k8s.io/v1` as the GAIE v1.0 CRD accepts it (docs/facts.md §3.4). */
export const InferencePoolSpecSchema = z
  .strictObject({
    selector: z.strictObject({
      matchLabels: z
        .record(z.string(), z.string())
        .refine((labels) => Object.keys(labels).length > 0, 'must name at least one label'),
    }),
    targetPorts: z
      .array(z.strictObject({ number: port }))
      .length(1, 'must list exactly one port, the vLLM port of the replicas'),
    endpointPickerRef: z.strictObject({
      group: z.string().optional(),
      kind: z.string().optional(),
      name: z.string().min(1),
      port: z.strictObject({ number: port }).optional(),
      failureMode: z.enum(['FailOpen', 'FailClose']).optional(),
    }),
  })
  .superRefine((spec, ctx) => {
    const ref = spec.endpointPickerRef;
    if ((ref.kind ?? 'Service') === 'Service' && !ref.port) {
      ctx.addIssue({
        code: 'custom',
        path: ['endpointPickerRef', 'port'],
        message: 'is required when the endpoint picker is a Service',
      });
    }
  });

/** The EPP's `EndpointPickerConfig`; the EPP decodes it strictly and exits on any unknown key. */
export const EndpointPickerConfigSchema = z
  .strictObject({
    apiVersion: z.literal('inference.networking.x-k8s.io/v1alpha1'),
    kind: z.literal('EndpointPickerConfig'),
    plugins: z.array(
      z.strictObject({
        type: z.string().min(1),
        name: z.string().min(1).optional(),
        parameters: z.unknown().optional(),
      }),
    ),
    schedulingProfiles: z
      .array(
        z.strictObject({
          name: z.string().min(1),
          plugins: z.array(
            z.strictObject({
              pluginRef: z.string().min(1),
              weight: z
                .number()
                .int('must be an integer (the v1.0 EPP decodes weights as integers)')
                .optional(),
            }),
          ),
        }),
      )
      // Optional: without profiles GAIE v1.0.1 creates one named `default` with every filter,
      // scorer and picker of the plugins (pkg/epp/config/loader/defaults.go setDefaultsPhaseTwo).
      .optional(),
  })
  .superRefine((config, ctx) => {
    // A profile can only use plugins the config instantiates (by name, or by type when unnamed).
    const defined = new Set(config.plugins.map((plugin) => plugin.name ?? plugin.type));
    (config.schedulingProfiles ?? []).forEach((profile, p) => {
      profile.plugins.forEach((plugin, i) => {
        if (!defined.has(plugin.pluginRef)) {
          ctx.addIssue({
            code: 'custom',
            path: ['schedulingProfiles', p, 'plugins', i, 'pluginRef'],
            message: `"${plugin.pluginRef}" is not among the plugins (${[...defined].join(', ') || 'none'})`,
          });
        }
      });
    });
  });

/** Zod issues as schema violations under a field prefix (`spec`, `data["x.yaml"]`). */
export function issueViolations(
  object: KubeObject,
  prefix: (string | number)[],
  issues: readonly z.core.$ZodIssue[],
  why: string,
): Violation[] {
  return issues.flatMap((issue) => {
    const path = [...prefix, ...issue.path.map((segment) => (typeof segment === 'symbol' ? '?' : segment))];
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) =>
        violation(object, fieldPath([...path, key]), SCHEMA, `unknown key "${key}" (${why})`),
      );
    }
    return [violation(object, fieldPath(path), SCHEMA, `${issue.message} (${why})`)];
  });
}

function inferencePoolViolations(object: KubeObject): Violation[] {
  const result = InferencePoolSpecSchema.safeParse(object.spec);
  return result.success
    ? []
    : issueViolations(object, ['spec'], result.error.issues, 'InferencePool inference.networking.k8s.io/v1');
}

/**
 * Validates an EndpointPickerConfig document found in a ConfigMap key (or in `--config-text`).
 * `prefix` is where the document lives, for messages.
 */
export function endpointPickerConfigViolations(
  object: KubeObject,
  prefix: (string | number)[],
  source: string,
): Violation[] {
  const parsed = embeddedYaml(object, prefix, source, 'EndpointPickerConfig');
  if ('violations' in parsed) return parsed.violations;
  const result = EndpointPickerConfigSchema.safeParse(parsed.document);
  return result.success
    ? []
    : issueViolations(object, prefix, result.error.issues, 'the EPP decodes its config strictly and exits');
}

/** A YAML document held in a ConfigMap value, or the schema violation saying it does not parse. */
function embeddedYaml(
  object: KubeObject,
  prefix: (string | number)[],
  source: string,
  what: string,
): { readonly document: unknown } | { readonly violations: Violation[] } {
  try {
    return { document: parseYaml(source) };
  } catch (error) {
    return {
      violations: [
        violation(
          object,
          fieldPath(prefix),
          SCHEMA,
          `${what} is not valid YAML: ${(error as Error).message}`,
        ),
      ],
    };
  }
}

/** Whether a ConfigMap value is an EndpointPickerConfig, judged by its content. */
export function looksLikeEndpointPickerConfig(source: string): boolean {
  return /^kind:\s*["']?EndpointPickerConfig\b/m.test(source);
}

let ajvValidators: Map<string, ValidateFunction> | undefined;

/**
 * The AI Gateway arm's kinds (Gateway API v1.5.1, Envoy Gateway v1.8.1), by `apiVersion/kind`,
 * and the EnvoyGateway document under `EnvoyGateway`; compiled once.
 */
function ajvValidator(key: string): ValidateFunction | undefined {
  if (!ajvValidators) {
    const ajv = new Ajv({ allErrors: true, strict: true });
    ajvValidators = new Map(
      Object.entries({ ...AI_GATEWAY_RESOURCE_SCHEMAS, EnvoyGateway: envoyGatewayConfigSchema }).map(
        ([name, schema]) => [name, ajv.compile(schema)],
      ),
    );
  }
  return ajvValidators.get(key);
}

function ajvViolations(
  object: KubeObject,
  prefix: (string | number)[],
  errors: readonly ErrorObject[],
  why: string,
): Violation[] {
  return errors.map((error) => {
    const extra = (error.params as { additionalProperty?: string }).additionalProperty;
    const field = [prefix.length > 0 ? fieldPath(prefix) : '', pointerToField(error.instancePath)]
      .filter(Boolean)
      .join('.');
    const path = extra ? [field, extra].filter(Boolean).join('.') : field;
    const message = extra ? `unknown key "${extra}"` : (error.message ?? 'invalid');
    return violation(object, path || '(object)', SCHEMA, `${message} (${why})`);
  });
}

/** An EnvoyGateway document in a ConfigMap value, judged by its content. */
export function looksLikeEnvoyGatewayConfig(source: string): boolean {
  return /^kind:\s*["']?EnvoyGateway["']?\s*$/m.test(source);
}

function envoyGatewayConfigViolations(
  object: KubeObject,
  prefix: (string | number)[],
  source: string,
): Violation[] {
  const parsed = embeddedYaml(object, prefix, source, 'EnvoyGateway configuration');
  if ('violations' in parsed) return parsed.violations;
  const validate = ajvValidator('EnvoyGateway');
  if (!validate || validate(parsed.document)) return [];
  return ajvViolations(object, prefix, validate.errors ?? [], 'Envoy Gateway v1.8.1 configuration');
}

function configMapViolations(object: KubeObject): Violation[] {
  return Object.entries(record(object.data)).flatMap(([key, value]) => {
    const source = text(value);
    if (!source) return [];
    if (looksLikeEndpointPickerConfig(source))
      return endpointPickerConfigViolations(object, ['data', key], source);
    if (looksLikeEnvoyGatewayConfig(source))
      return envoyGatewayConfigViolations(object, ['data', key], source);
    return [];
  });
}

/** An object without a name cannot be applied; the OpenAPI schema does not say so. */
function metadataViolations(object: KubeObject): Violation[] {
  const metadata = object.metadata;
  if (isRecord(metadata) && (text(metadata.name) || text(metadata.generateName))) return [];
  return [
    violation(
      object,
      'metadata.name',
      SCHEMA,
      'is required (the API server rejects an object without a name)',
    ),
  ];
}

export interface SchemaResult {
  readonly violations: Violation[];
  readonly notes: Note[];
}

/** Validates one object against the schema for its kind, or notes that none is known. */
export function validateSchema(object: KubeObject): SchemaResult {
  const violations = metadataViolations(object);
  const model = builtInModel(object.apiVersion, object.kind);
  if (model) {
    violations.push(...builtInViolations(object, model), ...unknownFieldViolations(object));
    if (object.kind === 'ConfigMap' && object.apiVersion === 'v1')
      violations.push(...configMapViolations(object));
    return { violations, notes: [] };
  }
  if (object.apiVersion === 'inference.networking.k8s.io/v1' && object.kind === 'InferencePool') {
    return { violations: [...violations, ...inferencePoolViolations(object)], notes: [] };
  }
  const validate = ajvValidator(`${object.apiVersion}/${object.kind}`);
  if (validate) {
    const valid = validate(object);
    const why = `${object.apiVersion} ${object.kind} schema of the pinned release`;
    return {
      violations: valid
        ? violations
        : [...violations, ...ajvViolations(object, [], validate.errors ?? [], why)],
      notes: [],
    };
  }
  return {
    violations,
    notes: [
      note(object, `not validated: no schema for ${object.apiVersion} ${object.kind} (custom resource?)`),
    ],
  };
}
