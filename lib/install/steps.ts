import { parseAllDocuments } from 'yaml';
import type { KubeObject } from '../kube/cluster-api.ts';
import type { AfterApplyStep, HelmPrerequisite, ManifestPrerequisite } from '../prereqs/prerequisites.ts';

/**
 * What `lab install` does, in order, as data: the prerequisites, then the lab's charts with the
 * steps between them. Pure; install.ts runs it.
 */

export type InstallStep =
  /** A release asset: downloaded, split into objects, applied, its CRDs waited for. */
  | { readonly kind: 'manifest'; readonly prerequisite: ManifestPrerequisite }
  /** A Helm chart: the lab does not run Helm; it checks the release is there. */
  | { readonly kind: 'helm'; readonly prerequisite: HelmPrerequisite }
  /** One of the lab's charts (dist/<chart>.yaml). */
  | { readonly kind: 'chart'; readonly chart: string; readonly objects: readonly KubeObject[] }
  | { readonly kind: 'after-apply'; readonly step: AfterApplyStep };

/** How long each kind may take to become ready, as docs/cluster.md's kubectl waits allowed. */
export const WAIT_LIMITS_MS: Readonly<Record<string, number>> = {
  CustomResourceDefinition: 2 * 60_000,
  // A claim binds once its provisioner made a volume (at once, or once its first pod is scheduled).
  PersistentVolumeClaim: 5 * 60_000,
  DaemonSet: 5 * 60_000,
  Deployment: 15 * 60_000,
  // Model load: weights from the cache (or the Hub on first start) and CUDA graph capture.
  StatefulSet: 30 * 60_000,
};

/** The objects of a multi-document YAML release asset; empty documents and Lists are handled. */
export function objectsOfYaml(text: string, source: string): KubeObject[] {
  const objects: KubeObject[] = [];
  for (const [index, document] of parseAllDocuments(text).entries()) {
    if (document.errors.length > 0) {
      throw new Error(`${source}: document ${index + 1} is not valid YAML: ${document.errors[0].message}`);
    }
    const value = document.toJS() as KubeObject | null;
    if (value === null || value === undefined) continue;
    if (value.kind === 'List' && Array.isArray(value.items)) {
      objects.push(...(value.items as KubeObject[]));
      continue;
    }
    if (typeof value.kind !== 'string' || typeof value.apiVersion !== 'string' || !value.metadata?.name) {
      throw new Error(
        `${source}: document ${index + 1} is not a Kubernetes object (no apiVersion, kind or name)`,
      );
    }
    objects.push(value);
  }
  return objects;
}

/**
 * The resource name of a kind, as Kubernetes guesses it when no discovery is at hand (apimachinery
 * pkg/api/meta/restmapper.go, UnsafeGuessKindToResource): lower case, then `s`, `es` after s, x,
 * z, ch, sh, `ies` for a consonant and y. Used only to phrase access reviews.
 */
export function resourceOfKind(kind: string): string {
  const lower = kind.toLowerCase();
  if (/(s|x|z|ch|sh)$/.test(lower)) return `${lower}es`;
  if (/[^aeiou]y$/.test(lower)) return `${lower.slice(0, -1)}ies`;
  return `${lower}s`;
}

export function groupOf(apiVersion: string): string {
  return apiVersion.includes('/') ? apiVersion.split('/')[0] : '';
}

/** The secret Helm 3 keeps per release revision (storage driver "secret"): owner=helm, name=<release>. */
export const HELM_RELEASE_SELECTOR = (release: string) => `owner=helm,name=${release}`;
