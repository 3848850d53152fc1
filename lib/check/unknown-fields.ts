import { k8s } from 'cdk8s-plus-34';
import { suggestion } from '../config/problems.ts';
import { fieldPath, isRecord, type KubeObject } from './manifest.ts';
import { SCHEMA, type Violation, violation } from './violation.ts';

/**
 * Fields the Kubernetes schema does not have, such as a misspelled container key. kubectl rejects
 * them with its default `--validate=strict` ("fail the request if invalid", kubectl apply --help;
 * a server's strict field validation names every unknown field); the `kubernetes-models` validators
 * do not, since their schemas allow additional properties.
 *
 * The fields of each kind come from cdk8s-plus-34's `k8s` imports, generated from the Kubernetes
 * 1.34 OpenAPI schema: `Kube<Kind>.manifest(props)` renders an object by reading exactly the fields
 * its schema declares (imports/k8s.ts, the `toJson_*` functions). The object is handed to it behind
 * a proxy that records every field read; a field the renderer never asked for is unknown. A map
 * (labels, a ConfigMap's data) is listed whole, so all its keys are known; a free-form value the
 * renderer copies without looking inside (an embedded RawExtension) is not judged.
 */

interface Reads {
  /** The fields read, present or not: normalized name -> the renderer's spelling. */
  readonly names: Map<string, string>;
  /** Whether the keys were listed (a map: every key is known). */
  listed: boolean;
}

/** cdk8s names `clusterIP` `clusterIp` and `$ref` `ref`: compare names without case or punctuation. */
const normalized = (name: string): string => name.toLowerCase().replace(/[^a-z0-9]/g, '');

type Renderer = (props: unknown) => unknown;

let renderers: Map<string, Renderer> | undefined;

/** `Kube<Kind>.manifest` by `apiVersion/kind`, for every kind of the imports; built once. */
function rendererFor(apiVersion: string, kind: string): Renderer | undefined {
  if (!renderers) {
    renderers = new Map();
    for (const value of Object.values(k8s)) {
      const gvk = (value as { GVK?: { apiVersion?: string; kind?: string } }).GVK;
      const manifest = (value as { manifest?: Renderer }).manifest;
      if (gvk?.apiVersion && gvk.kind && typeof manifest === 'function') {
        renderers.set(`${gvk.apiVersion}/${gvk.kind}`, manifest.bind(value));
      }
    }
  }
  return renderers.get(`${apiVersion}/${kind}`);
}

/** Runs the renderer over a recording view of `object`; returns what it read of each object. */
function recordReads(object: object, render: Renderer): WeakMap<object, Reads> {
  const reads = new WeakMap<object, Reads>();
  const views = new WeakMap<object, object>();
  const view = (value: unknown): unknown => {
    if (typeof value !== 'object' || value === null) return value;
    const known = views.get(value);
    if (known) return known;
    const seen: Reads = { names: new Map(), listed: false };
    reads.set(value, seen);
    const byName = new Map(Object.keys(value).map((key) => [normalized(key), key]));
    const proxy = new Proxy(value, {
      get(target, key, receiver) {
        if (typeof key !== 'string' || Array.isArray(target)) return view(Reflect.get(target, key, receiver));
        seen.names.set(normalized(key), key);
        const own = Object.hasOwn(target, key) ? key : byName.get(normalized(key));
        return own === undefined ? undefined : view((target as Record<string, unknown>)[own]);
      },
      ownKeys(target) {
        seen.listed = true;
        return Reflect.ownKeys(target);
      },
    });
    views.set(value, proxy);
    return proxy;
  };
  render(view(object));
  return reads;
}

/** Every field of `object` its kind's schema does not declare, as schema violations. */
export function unknownFieldViolations(object: KubeObject): Violation[] {
  const render = rendererFor(object.apiVersion, object.kind);
  if (!render) return [];
  // The renderer takes the fields under apiVersion and kind; status is the server's to write.
  const { apiVersion: _v, kind: _k, status: _s, ...props } = object;
  let reads: WeakMap<object, Reads>;
  try {
    reads = recordReads(props, render);
  } catch {
    // The renderer stops at a value of the wrong type (a string where a list belongs), which the
    // schema check reports; the fields it never reached cannot be judged known or unknown.
    return [];
  }
  const found: Violation[] = [];
  const walk = (value: unknown, path: (string | number)[]) => {
    if (Array.isArray(value)) {
      value.forEach((item, i) => {
        walk(item, [...path, i]);
      });
      return;
    }
    if (!isRecord(value)) return;
    const seen = reads.get(value);
    // Never looked into: a free-form value, copied whole.
    if (!seen || (seen.names.size === 0 && !seen.listed)) return;
    for (const [key, child] of Object.entries(value)) {
      if (!seen.listed && !seen.names.has(normalized(key))) {
        const allowed = suggestion(key, [...seen.names.values()]);
        found.push(
          violation(
            object,
            fieldPath([...path, key]),
            SCHEMA,
            `unknown field${allowed}: kubectl rejects it (Kubernetes 1.34 ${object.apiVersion} ${object.kind} schema)`,
          ),
        );
        continue;
      }
      walk(child, [...path, key]);
    }
  };
  walk(props, []);
  return found;
}
