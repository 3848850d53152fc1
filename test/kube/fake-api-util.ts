import type { IncomingMessage, ServerResponse } from 'node:http';

/** The fake API server's plumbing (test/kube/fake-api-server.ts): JSON replies, selectors, merges. */

export interface PodSpec {
  nodeSelector?: Record<string, string>;
  tolerations?: { key?: string; operator?: string; value?: string; effect?: string }[];
  containers?: { resources?: { limits?: Record<string, string | number> } }[];
}

export function podSpecOf(object: Record<string, unknown>): PodSpec {
  return ((object.spec as { template?: { spec?: PodSpec } } | undefined)?.template?.spec ?? {}) as PodSpec;
}

export function gpuRequest(pod: PodSpec): number {
  return (pod.containers ?? []).reduce(
    (sum, c) => sum + Number(c.resources?.limits?.['nvidia.com/gpu'] ?? 0),
    0,
  );
}

export function keyOf(apiVersion: string, kind: string, namespace: string | undefined, name: string): string {
  return `${apiVersion}|${kind}|${namespace ?? ''}|${name}`;
}

export function parseSelector(selector: string | null): Record<string, string> {
  if (!selector) return {};
  return Object.fromEntries(selector.split(',').map((pair) => pair.split('=') as [string, string]));
}

export function deepMerge(base: unknown, patch: unknown): unknown {
  if (typeof base !== 'object' || base === null || Array.isArray(base)) return patch;
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = { ...(base as Record<string, unknown>) };
  for (const [k, v] of Object.entries(patch)) out[k] = deepMerge(out[k], v);
  return out;
}

export function status(code: number, message: string) {
  return { kind: 'Status', apiVersion: 'v1', status: code < 300 ? 'Success' : 'Failure', message, code };
}

export function send(res: ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
