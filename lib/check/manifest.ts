/**
 * The plain shape of a Kubernetes object as `lab check` reads it from a folder, and small typed
 * accessors for walking untrusted JSON. Nothing here knows about the lab's own chart names.
 */

export type Json = Record<string, unknown>;

/** Any Kubernetes object: only apiVersion and kind are known to exist. */
export interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata?: Json;
  readonly [field: string]: unknown;
}

// Where each loaded object came from; kept beside the object so the object stays plain JSON
// (schema validation must not see an extra field).
const sourceFiles = new WeakMap<object, string>();

/** Records the file an object was read from, for messages. */
export function rememberFile<T extends object>(object: T, file: string): T {
  sourceFiles.set(object, file);
  return object;
}

/** The file an object was read from, if it was loaded from one. */
export function fileOf(object: object): string | undefined {
  return sourceFiles.get(object);
}

export function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function record(value: unknown): Json {
  return isRecord(value) ? value : {};
}

export function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

export function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

export function strings(value: unknown): string[] {
  return list(value).filter((item): item is string => typeof item === 'string');
}

/** String-valued entries of a map such as labels or a selector. */
export function stringMap(value: unknown): Record<string, string> {
  return Object.fromEntries(
    Object.entries(record(value)).filter((entry): entry is [string, string] => typeof entry[1] === 'string'),
  );
}

export function isKubeObject(value: unknown): value is KubeObject {
  return isRecord(value) && typeof value.apiVersion === 'string' && typeof value.kind === 'string';
}

export function nameOf(object: KubeObject): string {
  return text(record(object.metadata).name) ?? '(unnamed)';
}

export function namespaceOf(object: KubeObject): string | undefined {
  return text(record(object.metadata).namespace);
}

export function labelsOf(object: KubeObject): Record<string, string> {
  return stringMap(record(object.metadata).labels);
}

/** How messages name an object: `Deployment vllm/qwen3-epp`, or `ClusterRole epp-auth`. */
export function objectRef(object: KubeObject): string {
  const namespace = namespaceOf(object);
  return `${object.kind} ${namespace ? `${namespace}/` : ''}${nameOf(object)}`;
}

/**
 * Whether two objects can see each other by name. A manifest without a namespace is applied
 * with `kubectl -n`, so it matches any namespace.
 */
export function sameNamespace(a: string | undefined, b: string | undefined): boolean {
  return a === undefined || b === undefined || a === b;
}

/** A non-empty selector that every one of the labels satisfies. */
export function selects(selector: Record<string, string>, labels: Record<string, string>): boolean {
  const entries = Object.entries(selector);
  return entries.length > 0 && entries.every(([key, value]) => labels[key] === value);
}

/** `spec.containers[0].args` from path segments; numbers become indexes. */
export function fieldPath(segments: readonly (string | number)[]): string {
  let path = '';
  for (const segment of segments) {
    if (typeof segment === 'number') path += `[${segment}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(segment)) path += path ? `.${segment}` : segment;
    else path += `[${JSON.stringify(segment)}]`;
  }
  return path;
}
