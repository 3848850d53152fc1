import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { parse } from 'yaml';
import type { FakeApiOptions, FakeClusterState, Stored } from './fake-api-types.ts';
import { deepMerge, keyOf, parseSelector, readBody, send, status } from './fake-api-util.ts';
import { livePods, nodeObjects, withStatus } from './fake-controllers.ts';
import { type Resource, resourceList, servedResources } from './fake-discovery.ts';
import { answerPodSubresource, type FakePod, verbOf } from './fake-pods.ts';
import {
  type AccessReview,
  answerReview,
  answerSubjectReview,
  forbidden,
  type SubjectReview,
} from './fake-rbac.ts';
import { storageClassObjects, withDefaultClass } from './fake-storage.ts';

export type { FakeApiOptions, FakeNode, FakeStorageClass } from './fake-api-types.ts';

/**
 * A Kubernetes API server on loopback for `lab install` and `lab uninstall`, spoken to by the real
 * @kubernetes/client-node. It keeps objects and plays the controllers on the fake clock, so an
 * installer that does not wait is caught: a CRD's kinds are served only once it is established, a
 * Deployment is available some seconds after each rollout, replicas load their model for minutes
 * and need a GPU each, GPUs are advertised only once a device plugin runs on the node, and deleted
 * objects take time to go (a namespace only after its contents).
 *
 * This file is the HTTP routing and the object store; the rest is by concern: the kinds served
 * (fake-discovery.ts), RBAC (fake-rbac.ts), the controllers' status (fake-controllers.ts),
 * claims and StorageClasses (fake-storage.ts), pods and their log and proxy (fake-pods.ts).
 */
export class FakeApiServer implements FakeClusterState {
  readonly objects = new Map<string, Stored>();
  /** Every apply: field manager, force, the object. */
  readonly applies: { fieldManager: string | null; force: string | null; kind: string; name: string }[] = [];
  readonly requests: string[] = [];
  private server?: Server;
  private readonly token: string;

  constructor(readonly options: FakeApiOptions) {
    this.token = options.token ?? 'lab-test-token';
    for (const name of ['default', 'kube-system', 'kube-public']) {
      this.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    }
    for (const sc of storageClassObjects(options.storageClasses ?? [])) this.put(sc);
    for (const name of options.runtimeClasses ?? []) {
      this.put({ apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name }, handler: name });
    }
  }

  get now(): number {
    return this.options.clock.ms;
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((error) => send(res, 500, status(500, String(error))));
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Between start() and stop(). */
  get listening(): boolean {
    return this.server?.listening ?? false;
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server?.listening) return;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** A kubeconfig for this server, written into `dir`. */
  async kubeconfig(dir: string, context = 'fake'): Promise<string> {
    const server = await this.start();
    const file = join(dir, 'kubeconfig');
    writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        `current-context: ${context}`,
        `clusters: [{ name: fake, cluster: { server: "${server}", insecure-skip-tls-verify: true } }]`,
        `users: [{ name: tester, user: { token: ${this.token} } }]`,
        `contexts: [{ name: ${context}, context: { cluster: fake, user: tester } }]`,
      ].join('\n'),
    );
    return file;
  }

  /** Puts an object as if someone else created it (not through apply). */
  put(object: Record<string, unknown>): void {
    const metadata = object.metadata as Record<string, unknown>;
    this.objects.set(
      keyOf(
        object.apiVersion as string,
        object.kind as string,
        metadata.namespace as string,
        metadata.name as string,
      ),
      {
        object: {
          ...object,
          metadata: {
            uid: randomUUID(),
            creationTimestamp: new Date(this.now).toISOString(),
            generation: 1,
            ...metadata,
          },
        } as Stored['object'],
        changedAt: this.now,
      },
    );
  }

  /** Live objects (deleted ones that have gone are dropped). */
  live(kind?: string): Record<string, unknown>[] {
    this.collect();
    return [...this.objects.values()].filter((s) => !kind || s.object.kind === kind).map((s) => s.object);
  }

  /** The pods of the live Deployments (once available) and Jobs. */
  pods(): FakePod[] {
    this.collect();
    return livePods(this);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    this.requests.push(`${req.method} ${url.pathname}`);
    if (req.headers.authorization !== `Bearer ${this.token}`) {
      send(res, 401, status(401, 'Unauthorized'));
      return;
    }
    const body = await readBody(req);
    if (url.pathname === '/version') {
      send(res, 200, { major: '1', minor: '36', gitVersion: 'v1.36.0+fake' });
      return;
    }
    const parts = url.pathname.split('/').filter(Boolean);
    const core = parts[0] === 'api';
    const group = core ? '' : parts[1];
    const version = core ? parts[1] : parts[2];
    const rest = parts.slice(core ? 2 : 3);
    const served = servedResources(this).filter((r) => r.group === group && r.version === version);
    if (rest.length === 0) {
      if (served.length === 0)
        send(res, 404, status(404, 'the server could not find the requested resource'));
      else send(res, 200, resourceList(group, version, served));
      return;
    }
    const namespaced = rest[0] === 'namespaces' && rest.length >= 3;
    const namespace = namespaced ? rest[1] : undefined;
    const [plural, name, subresource, ...subpath] = namespaced ? rest.slice(2) : rest;
    const resource = served.find((r) => r.plural === plural);
    if (!resource) {
      send(res, 404, status(404, `the server could not find the requested resource (${plural})`));
      return;
    }
    const verb = verbOf(req.method ?? 'GET', name !== undefined);
    const refused =
      resource.kind === 'SelfSubjectAccessReview'
        ? undefined
        : forbidden(this.options.denied ?? [], {
            verb,
            group: resource.group,
            resource: plural,
            ...(subresource ? { subresource } : {}),
            ...(name ? { name } : {}),
            ...(namespace ? { namespace } : {}),
          });
    if (refused) {
      send(res, 403, refused);
      return;
    }
    if (resource.kind === 'Pod' && subresource) {
      const request = { name, subresource, path: subpath.join('/'), ...(namespace ? { namespace } : {}) };
      answerPodSubresource(this.pods(), this.options.workloads, request, req, res);
      return;
    }
    const apiVersion = core ? version : `${group}/${version}`;
    switch (req.method) {
      case 'GET':
        if (name) this.get(res, apiVersion, resource, namespace, name);
        else this.list(res, resource, namespace, url.searchParams.get('labelSelector'));
        return;
      case 'PATCH':
        this.apply(res, req, url, apiVersion, resource, namespace, name, body);
        return;
      case 'POST':
        if (resource.kind === 'SelfSubjectAccessReview') {
          send(res, 201, answerReview(this.options.denied ?? [], JSON.parse(body) as AccessReview));
          return;
        }
        if (resource.kind === 'SubjectAccessReview') {
          const review = JSON.parse(body) as SubjectReview;
          send(res, 201, answerSubjectReview(this.live(), this.options.othersDeny ?? [], review));
          return;
        }
        send(res, 405, status(405, 'the fake serves create only for access reviews'));
        return;
      case 'DELETE':
        this.remove(res, apiVersion, resource, namespace, name);
        return;
      default:
        send(res, 405, status(405, `${req.method} not supported`));
    }
  }

  private get(
    res: ServerResponse,
    apiVersion: string,
    resource: Resource,
    namespace: string | undefined,
    name: string,
  ): void {
    this.collect();
    if (resource.kind === 'Pod') {
      const pod = this.pods().find((p) => p.metadata.name === name && p.metadata.namespace === namespace);
      if (pod) send(res, 200, pod);
      else send(res, 404, status(404, `pods "${name}" not found`));
      return;
    }
    if (resource.kind === 'Node') {
      const node = nodeObjects(this).find((n) => n.metadata.name === name);
      if (node) send(res, 200, node);
      else send(res, 404, status(404, `nodes "${name}" not found`));
      return;
    }
    const stored = this.objects.get(keyOf(apiVersion, resource.kind, namespace, name));
    if (!stored) {
      send(res, 404, status(404, `${resource.plural} "${name}" not found`));
      return;
    }
    send(res, 200, withStatus(this, stored));
  }

  private list(
    res: ServerResponse,
    resource: Resource,
    namespace: string | undefined,
    selector: string | null,
  ): void {
    this.collect();
    const wanted = parseSelector(selector);
    const all =
      resource.kind === 'Node'
        ? nodeObjects(this)
        : resource.kind === 'Pod'
          ? this.pods().filter((pod) => !namespace || pod.metadata.namespace === namespace)
          : [...this.objects.values()]
              .filter(
                (s) =>
                  s.object.kind === resource.kind &&
                  (!namespace || s.object.metadata.namespace === namespace),
              )
              .map((s) => withStatus(this, s));
    const items = all.filter((object) => {
      const labels = (object.metadata as { labels?: Record<string, string> }).labels ?? {};
      return Object.entries(wanted).every(([k, v]) => labels[k] === v);
    });
    send(res, 200, { apiVersion: 'v1', kind: `${resource.kind}List`, metadata: {}, items });
  }

  private apply(
    res: ServerResponse,
    req: IncomingMessage,
    url: URL,
    apiVersion: string,
    resource: Resource,
    namespace: string | undefined,
    name: string,
    body: string,
  ): void {
    if (req.headers['content-type'] !== 'application/apply-patch+yaml') {
      send(
        res,
        415,
        status(415, `the fake takes only server-side apply, not ${req.headers['content-type']}`),
      );
      return;
    }
    const fieldManager = url.searchParams.get('fieldManager');
    if (!fieldManager) {
      // The API server requires a field manager on apply.
      send(res, 400, status(400, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value'));
      return;
    }
    this.applies.push({ fieldManager, force: url.searchParams.get('force'), kind: resource.kind, name });
    if (namespace && !this.objects.has(keyOf('v1', 'Namespace', undefined, namespace))) {
      send(res, 404, status(404, `namespaces "${namespace}" not found`));
      return;
    }
    const incoming = parse(body) as Stored['object'];
    const key = keyOf(apiVersion, resource.kind, namespace, name);
    const existing = this.objects.get(key);
    if (existing?.deletedAt !== undefined) {
      send(res, 409, status(409, `${resource.plural} "${name}" is being deleted`));
      return;
    }
    if (!existing) {
      if (resource.kind === 'PersistentVolumeClaim') withDefaultClass(this, incoming);
      this.put({ ...incoming, metadata: { ...incoming.metadata, ...(namespace ? { namespace } : {}) } });
      if (resource.kind === 'Job')
        this.options.workloads?.jobCreated?.(this.objects.get(key)?.object ?? incoming);
    } else {
      const merged = deepMerge(existing.object, incoming) as Stored['object'];
      const specChanged = JSON.stringify(merged.spec) !== JSON.stringify(existing.object.spec);
      if (specChanged) {
        merged.metadata.generation = ((existing.object.metadata.generation as number) ?? 1) + 1;
        existing.changedAt = this.now;
      }
      existing.object = merged;
    }
    const stored = this.objects.get(key) as Stored;
    send(res, existing ? 200 : 201, withStatus(this, stored));
  }

  private remove(
    res: ServerResponse,
    apiVersion: string,
    resource: Resource,
    namespace: string | undefined,
    name: string,
  ): void {
    const stored = this.objects.get(keyOf(apiVersion, resource.kind, namespace, name));
    if (!stored) {
      send(res, 404, status(404, `${resource.plural} "${name}" not found`));
      return;
    }
    stored.deletedAt ??= this.now;
    stored.object.metadata.deletionTimestamp = new Date(this.now).toISOString();
    send(res, 200, status(200, 'Success'));
  }

  /** Deleted objects go after deleteMs; a namespace only once nothing is left in it. */
  private collect(): void {
    const delay = this.options.deleteMs ?? 5_000;
    for (const stored of [...this.objects.values()]) {
      if (stored.object.kind !== 'Namespace' || stored.deletedAt === undefined) continue;
      for (const inside of this.objects.values()) {
        if (inside.object.metadata.namespace === stored.object.metadata.name)
          inside.deletedAt ??= stored.deletedAt;
      }
    }
    for (const [key, stored] of [...this.objects.entries()]) {
      if (stored.deletedAt === undefined || this.now - stored.deletedAt < delay) continue;
      if (stored.object.kind === 'Namespace') {
        const name = stored.object.metadata.name;
        const left = [...this.objects.values()].some((s) => s.object.metadata.namespace === name);
        if (left) continue;
      }
      this.objects.delete(key);
    }
  }
}
