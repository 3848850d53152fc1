/**
 * The narrow Kubernetes API the CLI uses against a cluster the user brings (`lab install`,
 * `lab uninstall`): apply, read, list, delete and an access review. The implementation is
 * @kubernetes/client-node (kubeconfig.ts); tests drive the same code against a fake API server.
 */

/** Any Kubernetes object as the API returns it; the lab reads only what it names. */
export interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly uid?: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
    readonly creationTimestamp?: string;
    readonly deletionTimestamp?: string;
    readonly generation?: number;
  };
  readonly spec?: unknown;
  readonly status?: unknown;
  readonly [field: string]: unknown;
}

/** Which object: enough to address it in the API. */
export interface ObjectRef {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  /** Absent for cluster-scoped kinds. */
  readonly namespace?: string;
}

/** One access question, as `kubectl auth can-i <verb> <resource>` asks it. */
export interface AccessQuestion {
  readonly verb: string;
  /** "" for the core group. */
  readonly group: string;
  readonly resource: string;
  /** `proxy`, `log`: a subresource is its own RBAC permission (`get pods/proxy`). */
  readonly subresource?: string;
  readonly namespace?: string;
  /** One object by name (a rule's `resourceNames`). */
  readonly name?: string;
}

/** A non-resource URL, as `kubectl auth can-i get /version` asks it. */
export interface UrlAccessQuestion {
  readonly verb: string;
  readonly path: string;
}

/** Who a SubjectAccessReview asks about: a user name and its groups. */
export interface AccessSubject {
  readonly user: string;
  readonly groups: readonly string[];
}

/** `get pods/proxy in llm-gateway-lab`, `patch customresourcedefinitions.apiextensions.k8s.io`, `get /version`. */
export function describeAccess(q: AccessQuestion | UrlAccessQuestion): string {
  if ('path' in q) return `${q.verb} ${q.path}`;
  const resource = `${q.resource}${q.subresource ? `/${q.subresource}` : ''}${q.group ? `.${q.group}` : ''}`;
  return `${q.verb} ${resource}${q.name ? ` ${q.name}` : ''}${q.namespace ? ` in ${q.namespace}` : ''}`;
}

export interface ClusterApi {
  /** Where the kubeconfig points: for progress lines and errors. */
  readonly target: { readonly context: string; readonly server: string };
  /** The server's version (`GET /version`): also proves the server is reachable and answers us. */
  version(): Promise<string>;
  /** Server-side apply with the lab's field manager, taking over conflicting fields. */
  apply(object: KubeObject): Promise<KubeObject>;
  /** The object, or undefined when it does not exist. */
  read(ref: ObjectRef): Promise<KubeObject | undefined>;
  /** Objects of one kind (in one namespace, or all when cluster-scoped or `namespace` is absent). */
  list(
    apiVersion: string,
    kind: string,
    options?: { readonly namespace?: string; readonly labelSelector?: string },
  ): Promise<KubeObject[]>;
  /** Deletes in the background; `absent` when it was already gone. */
  remove(ref: ObjectRef): Promise<'deleted' | 'absent'>;
  /** SelfSubjectAccessReview: may the kubeconfig's user do this? */
  canI(question: AccessQuestion): Promise<boolean>;
  /**
   * SubjectAccessReview: may `subject` (another user, a ServiceAccount) do this? The kubeconfig's
   * user needs `create subjectaccessreviews.authorization.k8s.io`; without it a 403 `forbidden`.
   */
  canSubject(subject: AccessSubject, question: AccessQuestion | UrlAccessQuestion): Promise<boolean>;
  /**
   * `GET pods/<pod>/proxy/<path>` (RBAC: get pods/proxy): the pod's first declared port answers.
   * The answer must be text (docs/facts.md §6.1).
   */
  proxyGet(namespace: string, pod: string, path: string): Promise<string>;
  /** `GET pods/<pod>/log` (RBAC: get pods/log). */
  podLog(namespace: string, pod: string, options?: PodLogRequest): Promise<string>;
  /**
   * `GET pods/<pod>/log?follow=true` (RBAC: get pods/log): `write` gets the log as the API streams
   * it. `ended` once the API ends the stream (the container ended), `stopped` once `signal` aborts.
   */
  followPodLog(
    namespace: string,
    pod: string,
    options: PodLogRequest & { readonly container: string },
    write: (text: string) => void,
    signal: AbortSignal,
  ): Promise<'ended' | 'stopped'>;
}

export interface PodLogRequest {
  readonly container?: string;
  readonly previous?: boolean;
  readonly tailLines?: number;
}

/** Every object the lab applies carries this field manager: `kubectl apply --server-side` would name it. */
export const LAB_FIELD_MANAGER = 'llm-gateway-lab';

/** Why a call to the cluster failed, in terms a user can act on. */
export type KubeErrorKind =
  /** No kubeconfig, a bad one, or a context that is not in it. */
  | 'kubeconfig'
  /** Connection refused, DNS, TLS, timeout: nothing answered. */
  | 'unreachable'
  /** 401: the credentials were refused. */
  | 'unauthorized'
  /** 403: RBAC says no. */
  | 'forbidden'
  /** 404 on a kind: its CRD is not installed (or not yet established). */
  | 'unknown-kind'
  /** 422 and 400: the server rejected the object. */
  | 'invalid'
  | 'other';

export class KubeApiError extends Error {
  constructor(
    readonly kind: KubeErrorKind,
    message: string,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'KubeApiError';
  }
}

/** `Deployment vllm/qwen3-epp`, `CustomResourceDefinition inferencepools.inference.networking.k8s.io`. */
export function describeRef(ref: ObjectRef): string {
  return `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}`;
}

export function refOf(object: KubeObject): ObjectRef {
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    name: object.metadata.name,
    ...(object.metadata.namespace ? { namespace: object.metadata.namespace } : {}),
  };
}
