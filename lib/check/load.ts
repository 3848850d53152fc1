import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { isKubeObject, type KubeObject, list, rememberFile } from './manifest.ts';

/** Why a folder cannot be checked at all: a missing folder, or a file that does not parse. */
export class ManifestLoadError extends Error {
  constructor(
    message: string,
    readonly file?: string,
  ) {
    super(message);
    this.name = 'ManifestLoadError';
  }
}

/** A document that is not a Kubernetes object (e.g. a list of prerequisite URLs beside the manifests). */
export interface SkippedDocument {
  readonly file: string;
  readonly reason: string;
}

export interface ManifestFolder {
  readonly objects: KubeObject[];
  readonly files: string[];
  readonly skipped: SkippedDocument[];
}

const MANIFEST_FILE = /\.(ya?ml|json)$/i;

/** Every Kubernetes object under `dir` (recursively), each remembering its file. */
export async function loadManifests(dir: string): Promise<KubeObject[]> {
  return (await loadManifestFolder(dir)).objects;
}

/**
 * Reads every *.yaml, *.yml and *.json file under `dir`, in a stable order. Multi-document YAML
 * and `kind: List` files give one object per item. File paths in the result start with `dir` as
 * given, so messages point where the user looked.
 */
export async function loadManifestFolder(dir: string): Promise<ManifestFolder> {
  const info = await stat(dir).catch(() => undefined);
  if (!info) throw new ManifestLoadError(`${dir}: no such folder`);
  if (!info.isDirectory()) throw new ManifestLoadError(`${dir}: not a folder`);
  const files = await manifestFiles(dir);
  const objects: KubeObject[] = [];
  const skipped: SkippedDocument[] = [];
  for (const file of files) {
    const documents = parseManifestText(await readFile(file, 'utf8'), file);
    documents.forEach((document, index) => {
      const where = documents.length > 1 ? `${file} (document ${index + 1})` : file;
      if (!isKubeObject(document)) {
        skipped.push({ file: where, reason: 'not a Kubernetes object (no apiVersion and kind)' });
        return;
      }
      for (const object of listItems(document)) objects.push(rememberFile(object, file));
    });
  }
  return { objects, files, skipped };
}

/** Parses one file's text into its documents; a syntax error names the file and the line. */
export function parseManifestText(source: string, file: string): unknown[] {
  if (/\.json$/i.test(file)) {
    try {
      return [JSON.parse(source)];
    } catch (error) {
      throw new ManifestLoadError(`${file}: not valid JSON: ${(error as Error).message}`, file);
    }
  }
  const documents = parseAllDocuments(source, { prettyErrors: true });
  const all = Array.isArray(documents) ? documents : [documents];
  const result: unknown[] = [];
  for (const document of all) {
    const [error] = document.errors;
    if (error) throw new ManifestLoadError(`${file}: not valid YAML: ${error.message}`, file);
    const value: unknown = document.toJS();
    // `---` at the end of a file leaves an empty document; that is not an object to check.
    if (value !== null && value !== undefined) result.push(value);
  }
  return result;
}

async function manifestFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  entries.sort((a, b) => a.name.localeCompare(b.name));
  const files: string[] = [];
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...(await manifestFiles(path)));
    else if (entry.isFile() && MANIFEST_FILE.test(entry.name)) files.push(path);
  }
  return files;
}

/** `kubectl get -o yaml` writes `kind: List`; its items are the objects. */
function listItems(object: KubeObject): KubeObject[] {
  if (!object.kind.endsWith('List') || !Array.isArray(object.items)) return [object];
  return list(object.items).filter(isKubeObject);
}
