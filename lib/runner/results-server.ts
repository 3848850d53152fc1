import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join, relative, resolve, sep } from 'node:path';

/**
 * The results server (charts/results-store.ts): a read-only view of the results claim that
 * `lab status` and `lab results` reach through the API server's pods/proxy subresource, so a
 * cluster the user brings needs no node folder, no exec and no kubectl. It answers three GETs:
 *
 * - `/healthz`: `ok` (the readiness probe);
 * - `/list`: `{"files":[{"path","size","mtimeMs"}],"unreadable":[...]}`, every regular file under
 *   the folder and the folders it could not read;
 * - `/file-<base64url of the relative path>`: the file's bytes, base64-encoded.
 *
 * Every body is `text/plain`: client-node 1.4.0's connectGetNamespacedPodProxyWithPath parses a
 * body by its Content-Type (JSON is parsed, other non-text types throw) and URL-encodes the path
 * as one component (docs/facts.md §6.1), so the path is one base64url segment and the content
 * base64, which survives any bytes.
 */

export const RESULTS_SERVER_NAME = 'lab-results';
export const RESULTS_SERVER_PORT = 8080;
export const RESULTS_SERVER_DIR = '/opt/lab-results';
export const RESULTS_SERVER_BUNDLE = 'results-server.mjs';

/** One file of the results folder, as `/list` names it. */
export interface ResultsFile {
  /** Relative to the results folder, with `/`. */
  readonly path: string;
  readonly size: number;
  readonly mtimeMs: number;
}

/** The proxied path that serves one file. */
export function filePath(path: string): string {
  return `file-${Buffer.from(path, 'utf8').toString('base64url')}`;
}

/** The relative path inside the folder, or undefined when it is not one (absolute, `..`). */
export function fileOfPath(proxied: string, root: string): string | undefined {
  const match = /^\/?file-([A-Za-z0-9_-]+)$/.exec(proxied);
  if (!match) return undefined;
  const path = Buffer.from(match[1], 'base64url').toString('utf8');
  const full = resolve(root, path);
  const inside = relative(resolve(root), full);
  if (inside === '' || inside.startsWith('..') || inside.startsWith(sep)) return undefined;
  return full;
}

/** Every regular file under `root` (symbolic links are not followed), and folders it could not read. */
export function listResults(root: string): { files: ResultsFile[]; unreadable: string[] } {
  const files: ResultsFile[] = [];
  const unreadable: string[] = [];
  const walk = (dir: string) => {
    let names: string[];
    try {
      names = readdirSync(dir).sort();
    } catch {
      unreadable.push(relative(root, dir).split(sep).join('/') || '.');
      return;
    }
    for (const name of names) {
      const full = join(dir, name);
      const stat = lstatSync(full, { throwIfNoEntry: false });
      if (!stat) continue;
      if (stat.isDirectory()) walk(full);
      else if (stat.isFile()) {
        files.push({
          path: relative(root, full).split(sep).join('/'),
          size: stat.size,
          mtimeMs: stat.mtimeMs,
        });
      }
    }
  };
  walk(root);
  return { files, unreadable };
}

/** The server's request handler over `root`; the fake API server proxies to the same one. */
export function resultsHandler(root: string): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const path = new URL(req.url ?? '/', 'http://results').pathname;
    const text = (code: number, body: string) => {
      res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(body);
    };
    if (req.method !== 'GET') return text(405, 'the results server is read-only');
    if (path === '/healthz') return text(200, 'ok');
    if (path === '/list') return text(200, JSON.stringify(listResults(root)));
    const file = fileOfPath(path, root);
    if (!file) return text(404, `no such path: ${path}`);
    const stat = lstatSync(file, { throwIfNoEntry: false });
    if (!stat?.isFile()) return text(404, `no such file: ${relative(root, file)}`);
    // The folder's files are JSON and logs of at most a few MB: read whole.
    return text(200, readFileSync(file).toString('base64'));
  };
}
