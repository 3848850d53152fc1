import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { parse } from 'yaml';
import type { KubeObject } from '../../lib/kube/cluster-api.ts';
import type { FakeClock } from '../runner/fake-servers.ts';
import {
  deepMerge,
  gpuRequest,
  keyOf,
  type PodSpec,
  parseSelector,
  podSpecOf,
  readBody,
  send,
  status,
} from './fake-api-util.ts';
import { type FollowedLogs, serveFollowedLog } from './fake-log-follow.ts';
import { type FakeWorkloads, jobStatus, podsOf, verbOf } from './fake-pods.ts';

/**
 * A Kubernetes API server on loopback for `lab install` and `lab uninstall`, spoken to by the real
 * @kubernetes/client-node. It keeps objects and plays the controllers on the fake clock, so an
 * installer that does not wait is caught: a CRD's kinds are served only once it is established, a
 * Deployment is available some seconds after each rollout, replicas load their model for minutes
 * and need a GPU each, GPUs are advertised only once a device plugin runs on the node, and deleted
 * objects take time to go (a namespace only after its contents).
 */

export interface FakeNode {
  readonly name: string;
  readonly labels: Record<string, string>;
  /** GPUs the node has; advertised as nvidia.com/gpu once a device plugin runs there. */
  readonly gpus: number;
  readonly taints?: readonly { key: string; value?: string; effect: string }[];
  /** A device plugin (or the GPU operator) already runs here: GPUs advertised from the start. */
  readonly pluginRunning?: boolean;
}

export interface FakeApiOptions {
  readonly clock: FakeClock;
  readonly nodes: readonly FakeNode[];
  readonly runtimeClasses?: readonly string[];
  /**
   * What RBAC refuses, for access reviews and requests alike: `patch clusterroles.rbac.authorization.k8s.io`,
   * `get pods/proxy`, `patch jobs.batch`.
   */
  readonly denied?: readonly string[];
  /** StorageClasses; a claim binds only to one that exists. */
  readonly storageClasses?: readonly {
    readonly name: string;
    readonly default?: boolean;
    readonly waitForFirstConsumer?: boolean;
    /** false: its provisioner never makes a volume (not installed, no room). */
    readonly provisions?: boolean;
  }[];
  /** How long a provisioner takes to bind a claim. */
  readonly claimBindMs?: number;
  /** What Jobs run, what pods' proxies and logs answer. */
  readonly workloads?: FakeWorkloads & FollowedLogs;
  readonly token?: string;
  /** Physics, on the fake clock. */
  readonly crdEstablishMs?: number;
  readonly deploymentReadyMs?: number;
  readonly modelLoadMs?: number;
  readonly pluginRegisterMs?: number;
  readonly deleteMs?: number;
}

interface Stored {
  object: Record<string, unknown> & { metadata: Record<string, unknown> };
  /** Fake-clock time of the last spec change (a rollout starts). */
  changedAt: number;
  deletedAt?: number;
}

interface Resource {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly plural: string;
  readonly namespaced: boolean;
}

const BUILTIN: readonly Resource[] = [
  ['', 'v1', 'Namespace', 'namespaces', false],
  ['', 'v1', 'Node', 'nodes', false],
  ['', 'v1', 'Service', 'services', true],
  ['', 'v1', 'ConfigMap', 'configmaps', true],
  ['', 'v1', 'Secret', 'secrets', true],
  ['', 'v1', 'ServiceAccount', 'serviceaccounts', true],
  ['', 'v1', 'Pod', 'pods', true],
  ['', 'v1', 'PersistentVolumeClaim', 'persistentvolumeclaims', true],
  ['apps', 'v1', 'Deployment', 'deployments', true],
  ['apps', 'v1', 'StatefulSet', 'statefulsets', true],
  ['apps', 'v1', 'DaemonSet', 'daemonsets', true],
  ['batch', 'v1', 'Job', 'jobs', true],
  ['rbac.authorization.k8s.io', 'v1', 'Role', 'roles', true],
  ['rbac.authorization.k8s.io', 'v1', 'RoleBinding', 'rolebindings', true],
  ['rbac.authorization.k8s.io', 'v1', 'ClusterRole', 'clusterroles', false],
  ['rbac.authorization.k8s.io', 'v1', 'ClusterRoleBinding', 'clusterrolebindings', false],
  ['node.k8s.io', 'v1', 'RuntimeClass', 'runtimeclasses', false],
  ['storage.k8s.io', 'v1', 'StorageClass', 'storageclasses', false],
  ['apiextensions.k8s.io', 'v1', 'CustomResourceDefinition', 'customresourcedefinitions', false],
  ['authorization.k8s.io', 'v1', 'SelfSubjectAccessReview', 'selfsubjectaccessreviews', false],
].map(([group, version, kind, plural, namespaced]) => ({
  group: group as string,
  version: version as string,
  kind: kind as string,
  plural: plural as string,
  namespaced: namespaced as boolean,
}));

export class FakeApiServer {
  readonly objects = new Map<string, Stored>();
  /** Every apply: field manager, force, the object. */
  readonly applies: { fieldManager: string | null; force: string | null; kind: string; name: string }[] = [];
  readonly requests: string[] = [];
  private server?: Server;
  private readonly token: string;

  constructor(private readonly options: FakeApiOptions) {
    this.token = options.token ?? 'lab-test-token';
    for (const name of ['default', 'kube-system', 'kube-public']) {
      this.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    }
    for (const sc of options.storageClasses ?? []) {
      this.put({
        apiVersion: 'storage.k8s.io/v1',
        kind: 'StorageClass',
        metadata: {
          name: sc.name,
          ...(sc.default ? { annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } } : {}),
        },
        provisioner: 'ebs.csi.aws.com',
        volumeBindingMode: sc.waitForFirstConsumer ? 'WaitForFirstConsumer' : 'Immediate',
      });
    }
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

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
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

  private resources(): Resource[] {
    const crds = [...this.objects.values()].filter(
      (s) => s.object.kind === 'CustomResourceDefinition' && s.deletedAt === undefined && this.established(s),
    );
    const served = crds.flatMap((s) => {
      const spec = s.object.spec as {
        group: string;
        scope: string;
        names: { kind: string; plural: string };
        versions: { name: string; served?: boolean }[];
      };
      return spec.versions
        .filter((v) => v.served !== false)
        .map((v) => ({
          group: spec.group,
          version: v.name,
          kind: spec.names.kind,
          plural: spec.names.plural,
          namespaced: spec.scope === 'Namespaced',
        }));
    });
    return [...BUILTIN, ...served];
  }

  private established(stored: Stored): boolean {
    return this.now - stored.changedAt >= (this.options.crdEstablishMs ?? 2_000);
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
    const served = this.resources().filter((r) => r.group === group && r.version === version);
    if (rest.length === 0) {
      if (served.length === 0) {
        send(res, 404, status(404, 'the server could not find the requested resource'));
        return;
      }
      send(res, 200, {
        kind: 'APIResourceList',
        groupVersion: core ? version : `${group}/${version}`,
        resources: served.map((r) => ({
          name: r.plural,
          kind: r.kind,
          namespaced: r.namespaced,
          singularName: '',
          verbs: [],
        })),
      });
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
    const asked = `${verb} ${plural}${subresource ? `/${subresource}` : ''}${resource.group ? `.${resource.group}` : ''}`;
    if (resource.kind !== 'SelfSubjectAccessReview' && (this.options.denied ?? []).includes(asked)) {
      // The apiserver's Forbidden message (RBAC's authorizer reason left out).
      const what = `${plural}${subresource ? `/${subresource}` : ''}`;
      send(
        res,
        403,
        status(
          403,
          `${what}${resource.group ? `.${resource.group}` : ''} "${name ?? ''}" is forbidden: User "tester" cannot ${verb} resource "${what}" in API group "${resource.group}"${namespace ? ` in the namespace "${namespace}"` : ' at the cluster scope'}`,
        ),
      );
      return;
    }
    if (resource.kind === 'Pod' && subresource) {
      this.podSubresource(req, res, namespace, name, subresource, subpath.join('/'));
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
          this.review(res, JSON.parse(body));
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
      const node = this.nodeObjects().find((n) => n.metadata.name === name);
      if (node) send(res, 200, node);
      else send(res, 404, status(404, `nodes "${name}" not found`));
      return;
    }
    const stored = this.objects.get(keyOf(apiVersion, resource.kind, namespace, name));
    if (!stored) {
      send(res, 404, status(404, `${resource.plural} "${name}" not found`));
      return;
    }
    send(res, 200, this.withStatus(stored));
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
        ? this.nodeObjects()
        : resource.kind === 'Pod'
          ? this.pods().filter((pod) => !namespace || pod.metadata.namespace === namespace)
          : [...this.objects.values()]
              .filter(
                (s) =>
                  s.object.kind === resource.kind &&
                  (!namespace || s.object.metadata.namespace === namespace),
              )
              .map((s) => this.withStatus(s));
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
      if (resource.kind === 'PersistentVolumeClaim') this.defaultClass(incoming);
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
    send(res, existing ? 200 : 201, this.withStatus(stored));
  }

  private review(
    res: ServerResponse,
    review: { spec: { resourceAttributes: Record<string, string> } },
  ): void {
    const a = review.spec.resourceAttributes;
    const asked = `${a.verb} ${a.resource}${a.group ? `.${a.group}` : ''}`;
    const allowed = !(this.options.denied ?? []).includes(asked);
    send(res, 201, { ...review, status: { allowed } });
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

  /** Where a running device plugin has registered, the node advertises its GPUs. */
  private nodeObjects(): KubeObject[] {
    const plugins = [...this.objects.values()].filter(
      (s) =>
        s.object.kind === 'DaemonSet' &&
        s.deletedAt === undefined &&
        /device-plugin/.test(String(s.object.metadata.name)),
    );
    const registerMs = this.options.pluginRegisterMs ?? 15_000;
    return this.options.nodes.map((node) => {
      const plugin = plugins.find((p) => this.selects(podSpecOf(p.object), node));
      const advertised =
        node.pluginRunning || (plugin !== undefined && this.now - plugin.changedAt >= registerMs);
      return {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name: node.name, labels: node.labels },
        spec: { taints: node.taints ?? [] },
        status: {
          allocatable: {
            cpu: '48',
            memory: '192Gi',
            ...(advertised ? { 'nvidia.com/gpu': String(node.gpus) } : {}),
          },
          conditions: [{ type: 'Ready', status: 'True' }],
        },
      };
    });
  }

  private selects(pod: PodSpec, node: FakeNode): boolean {
    const selector = pod.nodeSelector ?? {};
    if (!Object.entries(selector).every(([k, v]) => node.labels[k] === v)) return false;
    return (node.taints ?? []).every(
      (taint) =>
        taint.effect === 'PreferNoSchedule' ||
        (pod.tolerations ?? []).some(
          (t) =>
            (t.operator === 'Exists' && (!t.key || t.key === taint.key)) ||
            (t.key === taint.key && t.value === taint.value),
        ),
    );
  }

  /** The DefaultStorageClass admission: a claim that names no class gets the default one. */
  private defaultClass(claim: Stored['object']): void {
    const spec = (claim.spec ?? {}) as { storageClassName?: string };
    const fallback = (this.options.storageClasses ?? []).find((sc) => sc.default);
    if (spec.storageClassName === undefined && fallback) {
      claim.spec = { ...spec, storageClassName: fallback.name };
    }
  }

  /** Bound once its class exists, after claimBindMs; with WaitForFirstConsumer only once a live workload mounts it. */
  private claimBound(stored: Stored): boolean {
    const spec = (stored.object.spec ?? {}) as { storageClassName?: string };
    const sc = (this.options.storageClasses ?? []).find((c) => c.name === spec.storageClassName);
    if (!sc || sc.provisions === false) return false;
    const name = stored.object.metadata.name;
    const consumer = [...this.objects.values()].some(
      (s) =>
        s.deletedAt === undefined &&
        ['Deployment', 'Job', 'StatefulSet'].includes(String(s.object.kind)) &&
        claimsOf(s.object).includes(String(name)),
    );
    if (sc.waitForFirstConsumer && !consumer) return false;
    return this.now - stored.changedAt >= (this.options.claimBindMs ?? 5_000);
  }

  private claimsReady(object: Record<string, unknown>, namespace: unknown): boolean {
    return claimsOf(object).every((claim) => {
      const stored = this.objects.get(keyOf('v1', 'PersistentVolumeClaim', namespace as string, claim));
      return stored !== undefined && this.claimBound(stored);
    });
  }

  /** The pods of the live Deployments (once available) and Jobs. */
  pods() {
    this.collect();
    const workloads = this.options.workloads;
    return podsOf(
      [...this.objects.values()],
      (owner) => {
        const object = this.withStatus(owner as Stored) as { status?: { availableReplicas?: number } };
        return (object.status?.availableReplicas ?? 0) > 0;
      },
      (name) => workloads?.jobState?.(name) ?? 'active',
    );
  }

  private podSubresource(
    req: IncomingMessage,
    res: ServerResponse,
    namespace: string | undefined,
    name: string,
    subresource: string,
    path: string,
  ): void {
    const pod = this.pods().find((p) => p.metadata.name === name && p.metadata.namespace === namespace);
    if (!pod) {
      send(res, 404, status(404, `pods "${name}" not found`));
      return;
    }
    if (subresource === 'log') {
      if (serveFollowedLog(req, res, pod, this.options.workloads)) return;
      const log = this.options.workloads?.log?.(pod);
      if (log === undefined) send(res, 400, status(400, `container in pod "${name}" has no log yet`));
      else {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(log);
      }
      return;
    }
    if (subresource === 'proxy' && req.method === 'GET') {
      // The apiserver decodes the path before it proxies it.
      const proxied = `/${decodeURIComponent(path)}`;
      req.url = proxied;
      if (this.options.workloads?.proxy?.(pod, proxied, req, res)) return;
      send(res, 503, status(503, `no endpoints available for pod "${name}"`));
      return;
    }
    send(res, 405, status(405, `${req.method} pods/${subresource} not served by the fake`));
  }

  /** The controllers: status as it would be at the fake clock's now. */
  private withStatus(stored: Stored): Record<string, unknown> {
    const object = stored.object;
    const generation = (object.metadata.generation as number) ?? 1;
    const since = this.now - stored.changedAt;
    const replicas = ((object.spec as { replicas?: number } | undefined)?.replicas ?? 1) as number;
    const nodes = this.nodeObjects();
    const pod = podSpecOf(object);
    const fits = this.options.nodes.filter((n) => this.selects(pod, n));
    switch (object.kind) {
      case 'CustomResourceDefinition':
        return {
          ...object,
          status: {
            conditions: [{ type: 'Established', status: this.established(stored) ? 'True' : 'False' }],
          },
        };
      case 'PersistentVolumeClaim':
        return { ...object, status: { phase: this.claimBound(stored) ? 'Bound' : 'Pending' } };
      case 'Job':
        return {
          ...object,
          status: jobStatus(this.options.workloads?.jobState?.(String(object.metadata.name)) ?? 'active'),
        };
      case 'Deployment': {
        const available =
          fits.length > 0 &&
          since >= (this.options.deploymentReadyMs ?? 20_000) &&
          this.claimsReady(object, object.metadata.namespace)
            ? replicas
            : 0;
        return {
          ...object,
          status: {
            observedGeneration: generation,
            replicas,
            updatedReplicas: replicas,
            availableReplicas: available,
          },
        };
      }
      case 'StatefulSet': {
        const gpusEach = gpuRequest(pod);
        const gpus = nodes
          .filter((n) => fits.some((f) => f.name === n.metadata.name))
          .reduce(
            (sum, n) =>
              sum +
              Number(
                (n.status as { allocatable: Record<string, string> }).allocatable['nvidia.com/gpu'] ?? 0,
              ),
            0,
          );
        const schedulable = gpusEach === 0 ? replicas : Math.min(replicas, Math.floor(gpus / gpusEach));
        const ready = since >= (this.options.modelLoadMs ?? 6 * 60_000) ? schedulable : 0;
        return {
          ...object,
          status: {
            observedGeneration: generation,
            replicas,
            updatedReplicas: replicas,
            readyReplicas: ready,
          },
        };
      }
      case 'DaemonSet': {
        const desired = fits.length;
        const available = since >= 10_000 ? desired : 0;
        return {
          ...object,
          status: {
            observedGeneration: generation,
            desiredNumberScheduled: desired,
            updatedNumberScheduled: desired,
            numberAvailable: available,
          },
        };
      }
      default:
        return object;
    }
  }
}

/** The claims a workload's pod template mounts. */
function claimsOf(object: Record<string, unknown>): string[] {
  const volumes =
    (podSpecOf(object) as { volumes?: { persistentVolumeClaim?: { claimName: string } }[] }).volumes ?? [];
  return volumes.flatMap((v) => (v.persistentVolumeClaim ? [v.persistentVolumeClaim.claimName] : []));
}
