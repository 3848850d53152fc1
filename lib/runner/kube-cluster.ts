import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import type { JobCounts } from '../study/validity.ts';
import type {
  Cluster,
  DeploymentState,
  JobObject,
  NetworkCluster,
  NetworkPodState,
  PodState,
  ResourceRef,
  ServiceObject,
  ServiceState,
} from './ports.ts';

/**
 * The Kubernetes API for the runner, with Node's https and the pod's ServiceAccount: no client
 * library, so the runner bundles small. Every call is scoped to the lab namespace, which the
 * runner's Role covers.
 */

export interface KubeResponse {
  readonly status: number;
  readonly body: string;
}

/** One HTTP exchange with the API server; the path starts with `/api` or `/apis`. */
export type KubeTransport = (
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  path: string,
  body?: string,
  contentType?: string,
) => Promise<KubeResponse>;

/** Where Kubernetes mounts a pod's ServiceAccount token, CA and namespace. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface InClusterOptions {
  /** @default SERVICE_ACCOUNT_DIR */
  readonly serviceAccountDir?: string;
  /** @default process.env.KUBERNETES_SERVICE_HOST */
  readonly host?: string;
  /** @default process.env.KUBERNETES_SERVICE_PORT, else 443 */
  readonly port?: number;
  /** @default 60 seconds */
  readonly timeoutMs?: number;
}

/**
 * Transport to the API server from inside a pod: the CA bundle and bearer token of the pod's
 * ServiceAccount. The token is re-read for every call, because the kubelet rotates it.
 */
export function inClusterTransport(options: InClusterOptions = {}): KubeTransport {
  const dir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const host = options.host ?? process.env.KUBERNETES_SERVICE_HOST;
  const port = options.port ?? Number(process.env.KUBERNETES_SERVICE_PORT ?? 443);
  if (!host) {
    throw new Error('KUBERNETES_SERVICE_HOST is not set: the runner must run in a pod of the cluster');
  }
  const ca = readFileSync(join(dir, 'ca.crt'));
  const timeoutMs = options.timeoutMs ?? 60_000;
  return (method, path, body, contentType) =>
    new Promise((resolve, reject) => {
      const token = readFileSync(join(dir, 'token'), 'utf8').trim();
      const headers: Record<string, string> = {
        Authorization: `Bearer ${token}`,
        Accept: 'application/json',
      };
      if (body !== undefined) {
        headers['Content-Type'] = contentType ?? 'application/json';
        headers['Content-Length'] = String(Buffer.byteLength(body));
      }
      const req = request({ host, port, path, method, ca, headers, timeout: timeoutMs }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      if (body !== undefined) req.write(body);
      req.end();
    });
}

/** An API answer that is not a success; `status` is the HTTP status. */
export class KubeApiError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    body: string,
  ) {
    super(`${method} ${path}: HTTP ${status}${statusMessage(body)}`);
    this.name = 'KubeApiError';
  }
}

function statusMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { kind?: string; message?: string };
    if (parsed.kind === 'Status' && parsed.message) return `: ${parsed.message}`;
  } catch {
    // not JSON: fall through to the raw text
  }
  return body ? `: ${body.slice(0, 200)}` : '';
}

interface JobJson {
  status?: { succeeded?: number; failed?: number; active?: number };
}

interface PodJson {
  metadata: { name: string; uid: string };
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

interface DeploymentJson {
  metadata: { generation?: number };
  spec: { replicas?: number };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    availableReplicas?: number;
  };
}

/** RFC 3339 in whole seconds, as the pod log's `sinceTime` takes it (`2025-10-14T09:00:00Z`). */
export function rfc3339Seconds(at: Date): string {
  return `${at.toISOString().slice(0, 19)}Z`;
}

/** Encodes one path segment or query value. */
const q = encodeURIComponent;

export class KubeCluster implements Cluster {
  constructor(
    private readonly transport: KubeTransport,
    private readonly namespace: string,
  ) {}

  async createJob(job: JobObject): Promise<void> {
    if (job.metadata.namespace !== this.namespace) {
      throw new Error(
        `job/${job.metadata.name} is for namespace ${job.metadata.namespace}, not ${this.namespace}`,
      );
    }
    await this.call('POST', this.jobs(), JSON.stringify(job));
  }

  async getJob(name: string): Promise<JobCounts | undefined> {
    const job = await this.getOptional<JobJson>(`${this.jobs()}/${encodeURIComponent(name)}`);
    if (!job) return undefined;
    const { succeeded, failed, active } = job.status ?? {};
    return { succeeded: succeeded ?? 0, failed: failed ?? 0, active: active ?? 0 };
  }

  async deleteJob(name: string): Promise<void> {
    // Foreground: the Job disappears only after its pods, so a re-created Job never overlaps them.
    await this.deleteOptional(`${this.jobs()}/${encodeURIComponent(name)}`, FOREGROUND_DELETE);
  }

  async listPods(labelSelector: string): Promise<PodState[]> {
    const list = JSON.parse(
      await this.call('GET', `${this.pods()}?labelSelector=${encodeURIComponent(labelSelector)}`),
    ) as { items: PodJson[] };
    return list.items.map((pod) => ({
      name: pod.metadata.name,
      uid: pod.metadata.uid,
      ready: (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
      ...unschedulableOf(pod),
    }));
  }

  async listJobNames(labelSelector: string): Promise<string[]> {
    const list = JSON.parse(await this.call('GET', `${this.jobs()}?labelSelector=${q(labelSelector)}`)) as {
      items: { metadata: { name: string } }[];
    };
    return list.items.map((j) => j.metadata.name);
  }

  async deletePod(name: string, uid?: string): Promise<void> {
    const path = `${this.pods()}/${encodeURIComponent(name)}`;
    if (uid === undefined) {
      await this.deleteOptional(path);
      return;
    }
    // DeleteOptions.preconditions.uid (k8s.io/apimachinery meta/v1 types.go, `Preconditions`): the
    // API server refuses to delete a pod of that name with another uid. Which status the refusal
    // has is not relied on: a pod that now has another uid is a replacement, and then nothing is to do.
    try {
      await this.deleteOptional(path, JSON.stringify({ preconditions: { uid } }));
    } catch (error) {
      if (!(error instanceof KubeApiError) || (error.status !== 409 && error.status !== 412)) throw error;
      const now = await this.getOptional<PodJson>(path);
      if (now && now.metadata.uid === uid) throw error;
    }
  }

  async podLog(name: string, container?: string, since?: Date): Promise<string> {
    const params = new URLSearchParams();
    if (container) params.set('container', container);
    if (since) params.set('sinceTime', rfc3339Seconds(since));
    const query = params.size > 0 ? `?${params.toString()}` : '';
    return this.call('GET', `${this.pods()}/${encodeURIComponent(name)}/log${query}`);
  }

  async resourceStatus(ref: ResourceRef): Promise<Readonly<Record<string, unknown>> | undefined> {
    const path = `/apis/${ref.group}/${ref.version}/namespaces/${encodeURIComponent(ref.namespace)}/${ref.plural}/${encodeURIComponent(ref.name)}`;
    const object = await this.getOptional<{ status?: Record<string, unknown> }>(path);
    return object ? (object.status ?? {}) : undefined;
  }

  async restartDeployment(name: string, at: Date): Promise<void> {
    const patch = {
      spec: {
        template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': at.toISOString() } } },
      },
    };
    await this.call(
      'PATCH',
      `${this.deployments()}/${encodeURIComponent(name)}`,
      JSON.stringify(patch),
      'application/strategic-merge-patch+json',
    );
  }

  async getDeployment(name: string): Promise<DeploymentState | undefined> {
    const d = await this.getOptional<DeploymentJson>(`${this.deployments()}/${encodeURIComponent(name)}`);
    if (!d) return undefined;
    return {
      generation: d.metadata.generation ?? 0,
      observedGeneration: d.status?.observedGeneration ?? 0,
      desired: d.spec.replicas ?? 1,
      total: d.status?.replicas ?? 0,
      updated: d.status?.updatedReplicas ?? 0,
      available: d.status?.availableReplicas ?? 0,
    };
  }

  async serverVersion(): Promise<string> {
    const version = JSON.parse(await this.call('GET', '/version')) as { gitVersion?: string };
    if (!version.gitVersion) throw new Error('GET /version has no gitVersion');
    return version.gitVersion;
  }

  async getServiceSpec(name: string): Promise<Readonly<Record<string, unknown>> | undefined> {
    const service = await this.getOptional<{ spec?: Record<string, unknown> }>(
      `${this.services()}/${q(name)}`,
    );
    return service ? (service.spec ?? {}) : undefined;
  }

  async createService(service: ServiceObject): Promise<void> {
    if (service.metadata.namespace !== this.namespace) {
      throw new Error(
        `service/${service.metadata.name} is for namespace ${service.metadata.namespace}, not ${this.namespace}`,
      );
    }
    await this.call('POST', this.services(), JSON.stringify(service));
  }

  async setServiceSelector(name: string, selector: Readonly<Record<string, string>>): Promise<void> {
    // A JSON patch (RFC 6902): `add` on a member that exists replaces its value (section 4.1), so
    // the selector becomes exactly `selector`, and on a gate without one it creates it; a merge
    // patch would merge the two maps and keep keys of the old one. The API server applies it with
    // evanphx/json-patch v4 (k8s.io/apiserver pkg/endpoints/handlers/patch.go, JSONPatchType),
    // whose partialDoc.add sets the key whether or not it exists (v4.12.0 patch.go).
    const patch = [{ op: 'add', path: '/spec/selector', value: selector }];
    await this.call(
      'PATCH',
      `${this.services()}/${q(name)}`,
      JSON.stringify(patch),
      'application/json-patch+json',
    );
  }

  async deleteService(name: string): Promise<void> {
    await this.deleteOptional(`${this.services()}/${q(name)}`);
  }

  async listServiceNames(labelSelector: string): Promise<string[]> {
    const list = JSON.parse(
      await this.call('GET', `${this.services()}?labelSelector=${q(labelSelector)}`),
    ) as { items: { metadata: { name: string } }[] };
    return list.items.map((s) => s.metadata.name);
  }

  private jobs(): string {
    return `/apis/batch/v1/namespaces/${this.namespace}/jobs`;
  }

  private pods(): string {
    return `/api/v1/namespaces/${this.namespace}/pods`;
  }

  private deployments(): string {
    return `/apis/apps/v1/namespaces/${this.namespace}/deployments`;
  }

  private services(): string {
    return `/api/v1/namespaces/${this.namespace}/services`;
  }

  private call(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    path: string,
    body?: string,
    contentType?: string,
  ): Promise<string> {
    return kubeCall(this.transport, method, path, body, contentType);
  }

  private getOptional<T>(path: string): Promise<T | undefined> {
    return kubeGetOptional<T>(this.transport, path);
  }

  private deleteOptional(path: string, body?: string): Promise<void> {
    return kubeDeleteOptional(this.transport, path, body);
  }
}

/** One API call; a status outside 2xx is a KubeApiError. */
async function kubeCall(
  transport: KubeTransport,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  path: string,
  body?: string,
  contentType?: string,
): Promise<string> {
  const response = await transport(method, path, body, contentType);
  if (response.status < 200 || response.status >= 300) {
    throw new KubeApiError(method, path, response.status, response.body);
  }
  return response.body;
}

/** GET of one object; undefined when it does not exist (404). */
async function kubeGetOptional<T>(transport: KubeTransport, path: string): Promise<T | undefined> {
  try {
    return JSON.parse(await kubeCall(transport, 'GET', path)) as T;
  } catch (error) {
    if (error instanceof KubeApiError && error.status === 404) return undefined;
    throw error;
  }
}

/** DELETE of one object; not-found is success. */
async function kubeDeleteOptional(transport: KubeTransport, path: string, body?: string): Promise<void> {
  try {
    await kubeCall(transport, 'DELETE', path, body);
  } catch (error) {
    if (error instanceof KubeApiError && error.status === 404) return;
    throw error;
  }
}

/** Foreground propagation: a Job disappears only after its pods. */
const FOREGROUND_DELETE = JSON.stringify({
  kind: 'DeleteOptions',
  apiVersion: 'v1',
  propagationPolicy: 'Foreground',
});

interface NetworkPodJson {
  metadata: {
    name: string;
    namespace?: string;
    uid: string;
    creationTimestamp?: string;
    annotations?: Record<string, string>;
  };
  spec?: {
    nodeName?: string;
    initContainers?: { name: string; restartPolicy?: string }[];
  };
  status?: { phase?: string; podIP?: string; conditions?: { type: string; status: string }[] };
}

/** Istio's sidecar container name (the injection template's `istio-proxy`). */
export const ISTIO_PROXY_CONTAINER = 'istio-proxy';

/**
 * Whether a pod carries Istio's native sidecar: `istio-proxy` among its init containers with
 * `restartPolicy: Always` (Kubernetes sidecar containers; Istio injects them so since 1.27).
 */
export function hasNativeSidecar(pod: Pick<NetworkPodJson, 'spec'>): boolean {
  return (pod.spec?.initContainers ?? []).some(
    (c) => c.name === ISTIO_PROXY_CONTAINER && c.restartPolicy === 'Always',
  );
}

/**
 * The API of a network-lab cell (ports.ts `NetworkCluster`): the same transport and error
 * handling as `KubeCluster`, with the namespace named by every call.
 */
export class KubeNetworkCluster implements NetworkCluster {
  constructor(private readonly transport: KubeTransport) {}

  async createJob(job: JobObject): Promise<void> {
    await kubeCall(this.transport, 'POST', jobsPath(job.metadata.namespace), JSON.stringify(job));
  }

  async getJob(namespace: string, name: string): Promise<JobCounts | undefined> {
    const job = await kubeGetOptional<JobJson>(this.transport, `${jobsPath(namespace)}/${q(name)}`);
    if (!job) return undefined;
    const { succeeded, failed, active } = job.status ?? {};
    return { succeeded: succeeded ?? 0, failed: failed ?? 0, active: active ?? 0 };
  }

  async deleteJob(namespace: string, name: string): Promise<void> {
    await kubeDeleteOptional(this.transport, `${jobsPath(namespace)}/${q(name)}`, FOREGROUND_DELETE);
  }

  async listJobNames(namespace: string, labelSelector: string): Promise<string[]> {
    const list = JSON.parse(
      await kubeCall(this.transport, 'GET', `${jobsPath(namespace)}?labelSelector=${q(labelSelector)}`),
    ) as { items: { metadata: { name: string } }[] };
    return list.items.map((j) => j.metadata.name);
  }

  async listPods(namespace: string, labelSelector?: string): Promise<NetworkPodState[]> {
    const query = labelSelector ? `?labelSelector=${q(labelSelector)}` : '';
    const list = JSON.parse(await kubeCall(this.transport, 'GET', `${podsPath(namespace)}${query}`)) as {
      items: NetworkPodJson[];
    };
    return list.items.map((pod) => ({
      name: pod.metadata.name,
      namespace: pod.metadata.namespace ?? namespace,
      uid: pod.metadata.uid,
      ready: (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
      node: pod.spec?.nodeName ?? '',
      createdAt: pod.metadata.creationTimestamp ?? '',
      podIp: pod.status?.podIP ?? '',
      hasSidecar: hasNativeSidecar(pod),
      annotations: pod.metadata.annotations ?? {},
      phase: pod.status?.phase ?? '',
    }));
  }

  async deletePod(namespace: string, name: string): Promise<void> {
    await kubeDeleteOptional(this.transport, `${podsPath(namespace)}/${q(name)}`);
  }

  async podLog(namespace: string, name: string, container?: string): Promise<string> {
    const query = container ? `?container=${q(container)}` : '';
    return kubeCall(this.transport, 'GET', `${podsPath(namespace)}/${q(name)}/log${query}`);
  }

  async namespaceLabels(name: string): Promise<Readonly<Record<string, string>> | undefined> {
    const ns = await kubeGetOptional<{ metadata: { labels?: Record<string, string> } }>(
      this.transport,
      `/api/v1/namespaces/${q(name)}`,
    );
    return ns ? (ns.metadata.labels ?? {}) : undefined;
  }

  async createService(service: ServiceObject): Promise<void> {
    await kubeCall(
      this.transport,
      'POST',
      `/api/v1/namespaces/${q(service.metadata.namespace)}/services`,
      JSON.stringify(service),
    );
  }

  async listServices(namespace: string, labelSelector: string): Promise<ServiceState[]> {
    const list = JSON.parse(
      await kubeCall(
        this.transport,
        'GET',
        `/api/v1/namespaces/${q(namespace)}/services?labelSelector=${q(labelSelector)}`,
      ),
    ) as {
      items: { metadata: { name: string; creationTimestamp?: string }; spec?: { clusterIP?: string } }[];
    };
    return list.items.map((s) => ({
      name: s.metadata.name,
      clusterIp: s.spec?.clusterIP ?? '',
      createdAt: s.metadata.creationTimestamp ?? '',
    }));
  }

  async deleteService(namespace: string, name: string): Promise<void> {
    await kubeDeleteOptional(this.transport, `/api/v1/namespaces/${q(namespace)}/services/${q(name)}`);
  }

  async servicesWithReadyEndpoints(namespace: string, labelSelector: string): Promise<Set<string>> {
    // The EndpointSlice controller copies the Service's labels onto its slices and adds
    // kubernetes.io/service-name (kubernetes staging/src/k8s.io/endpointslice/utils.go, setEndpointSliceLabels).
    const list = JSON.parse(
      await kubeCall(
        this.transport,
        'GET',
        `/apis/discovery.k8s.io/v1/namespaces/${q(namespace)}/endpointslices?labelSelector=${q(labelSelector)}`,
      ),
    ) as {
      items: {
        metadata: { labels?: Record<string, string> };
        endpoints?: { conditions?: { ready?: boolean } }[] | null;
      }[];
    };
    const ready = new Set<string>();
    for (const slice of list.items) {
      const service = slice.metadata.labels?.[SERVICE_NAME_LABEL];
      if (service && (slice.endpoints ?? []).some((e) => e.conditions?.ready === true)) ready.add(service);
    }
    return ready;
  }

  async serverVersion(): Promise<string> {
    const version = JSON.parse(await kubeCall(this.transport, 'GET', '/version')) as { gitVersion?: string };
    if (!version.gitVersion) throw new Error('GET /version has no gitVersion');
    return version.gitVersion;
  }
}

/**
 * The scheduler's verdict on a pod no node can take: its `PodScheduled` condition False with
 * reason `Unschedulable` (the scheduler's `handleSchedulingFailure` sets it, with a message such
 * as `0/2 nodes are available: 2 Insufficient memory.`).
 */
function unschedulableOf(pod: PodJson): { unschedulable?: string } {
  const condition = (pod.status?.conditions ?? []).find(
    (c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable',
  );
  return condition ? { unschedulable: condition.message || 'Unschedulable' } : {};
}

/** The label EndpointSlices carry naming their Service (discovery.k8s.io/v1). */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

function jobsPath(namespace: string): string {
  return `/apis/batch/v1/namespaces/${q(namespace)}/jobs`;
}

function podsPath(namespace: string): string {
  return `/api/v1/namespaces/${q(namespace)}/pods`;
}
