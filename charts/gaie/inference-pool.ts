import { ApiObject, type ApiObjectMetadata } from 'cdk8s';
import type { Construct } from 'constructs';

/**
 * Typed wrapper for GAIE's InferencePool (`inference.networking.k8s.io/v1`), written from the
 * v1.0.1 API instead of `cdk8s import` of the vendored CRD. Only the fields the lab uses.
 */

export const INFERENCE_POOL_API_VERSION = 'inference.networking.k8s.io/v1';
export const INFERENCE_POOL_KIND = 'InferencePool';
/** The API group the EPP is told with `--pool-group`. */
export const INFERENCE_POOL_GROUP = 'inference.networking.k8s.io';

/** What the data plane does when the EPP does not answer. */
export type EndpointPickerFailureMode = 'FailOpen' | 'FailClose';

export interface InferencePoolSpec {
  /** Pods of the pool; InferencePool v1 accepts matchLabels only. */
  readonly selector: { readonly matchLabels: Readonly<Record<string, string>> };
  /** Exactly one port the model servers listen on. */
  readonly targetPorts: readonly [{ readonly number: number }];
  readonly endpointPickerRef: {
    /** Name of the EPP's Service (kind defaults to Service). */
    readonly name: string;
    /** Required when the referent is a Service: the EPP's ext_proc port. */
    readonly port: { readonly number: number };
    readonly failureMode: EndpointPickerFailureMode;
  };
}

export interface InferencePoolProps {
  readonly metadata: ApiObjectMetadata & { readonly name: string };
  readonly spec: InferencePoolSpec;
}

/** The InferencePool manifest as a plain object. */
export function inferencePoolManifest(props: InferencePoolProps) {
  return {
    apiVersion: INFERENCE_POOL_API_VERSION,
    kind: INFERENCE_POOL_KIND,
    metadata: props.metadata,
    spec: props.spec,
  } as const;
}

export class InferencePool extends ApiObject {
  constructor(scope: Construct, id: string, props: InferencePoolProps) {
    if (props.spec.targetPorts.length !== 1) {
      throw new Error(`InferencePool ${props.metadata.name}: targetPorts must have exactly one port`);
    }
    const manifest = inferencePoolManifest(props);
    super(scope, id, {
      apiVersion: manifest.apiVersion,
      kind: manifest.kind,
      metadata: manifest.metadata,
      spec: manifest.spec,
    });
  }
}
