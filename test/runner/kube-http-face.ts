import { KubeApiError, type KubeResponse, type KubeTransport } from '../../lib/runner/kube-cluster.ts';
import type { Cluster, JobObject, NetworkCluster, ServiceObject } from '../../lib/runner/ports.ts';
import {
  type RbacPolicy,
  type RequestAttributes,
  requestAttributes,
  type Subject,
} from '../kube/fake-rbac-policy.ts';

/**
 * The rehearsals' fake clusters (fakes.ts, network/fake-cell.ts) behind the Kubernetes API's HTTP
 * paths: a KubeTransport that answers what the runner's real clients (KubeCluster,
 * KubeNetworkCluster of lib/runner/kube-cluster.ts) send, by calling the fake's port method and
 * writing its answer as the API server's JSON. With `authorizing` in front, every request is first
 * judged by the charts' RBAC for the runner's ServiceAccount, as a real API server judges it: so a
 * rehearsal through this face derives what the runner does on the API, and a rule missing from
 * the charts fails it with a 403.
 */

const json = (status: number, body: unknown): KubeResponse => ({ status, body: JSON.stringify(body) });
const notFound = (what: string) =>
  json(404, {
    kind: 'Status',
    apiVersion: 'v1',
    status: 'Failure',
    reason: 'NotFound',
    message: `${what} not found`,
    code: 404,
  });
const ok = () => json(200, { kind: 'Status', apiVersion: 'v1', status: 'Success', code: 200 });
const list = (items: unknown[]) => json(200, { kind: 'List', apiVersion: 'v1', metadata: {}, items });

/** A fake's KubeApiError becomes the same status on the wire; any other throw is a dropped connection. */
async function answered(handle: () => Promise<KubeResponse>): Promise<KubeResponse> {
  try {
    return await handle();
  } catch (error) {
    if (error instanceof KubeApiError) {
      return json(error.status, {
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        message: error.message,
        code: error.status,
      });
    }
    throw error;
  }
}

function unrouted(method: string, path: string): never {
  throw new Error(`kube-http-face: no route for ${method} ${path}`);
}

/** A request for a resource, as a face's routes read it. */
interface ResourceRequest {
  /** `<METHOD> <group>/<resource>[/name][/<subresource>]`, e.g. `GET batch/jobs/name`, `GET /pods/name/log`. */
  readonly route: string;
  readonly request: Extract<RequestAttributes, { resource: string }>;
  readonly query: URLSearchParams;
  /** The `labelSelector` query parameter, "" without one. */
  readonly selector: string;
  readonly body: string | undefined;
  /** The path as sent, with its query. */
  readonly path: string;
}

/**
 * A fake behind the API's paths: `/version` answers `serverVersion`, every resource request goes to
 * `routes` (undefined: no route, which the test sees as an error, never as an answer).
 */
function face(
  serverVersion: () => Promise<string>,
  routes: (r: ResourceRequest) => Promise<KubeResponse | undefined>,
): KubeTransport {
  return (method, path, body) =>
    answered(async () => {
      const request = requestAttributes(method, path);
      if ('path' in request) {
        if (request.path === '/version') return json(200, { gitVersion: await serverVersion() });
        return unrouted(method, path);
      }
      const { resource, name, subresource } = request;
      const route = `${method} ${request.group}/${resource}${name ? '/name' : ''}${subresource ? `/${subresource}` : ''}`;
      const query = new URL(path, 'http://api').searchParams;
      const selector = query.get('labelSelector') ?? '';
      return (await routes({ route, request, query, selector, body, path })) ?? unrouted(method, path);
    });
}

/** The first lab's fake cluster (its port `Cluster`) as the API of the lab's namespace. */
export function clusterFace(cluster: Cluster): KubeTransport {
  return face(
    () => cluster.serverVersion(),
    async ({ route, request, query, selector, body, path }) => {
      const { resource, name } = request;
      switch (route) {
        case 'POST batch/jobs':
          await cluster.createJob(JSON.parse(body ?? '{}') as JobObject);
          return json(201, JSON.parse(body ?? '{}'));
        case 'GET batch/jobs/name': {
          const counts = await cluster.getJob(name as string);
          return counts ? json(200, { status: counts }) : notFound(`jobs.batch "${name}"`);
        }
        case 'DELETE batch/jobs/name':
          await cluster.deleteJob(name as string);
          return ok();
        case 'GET batch/jobs':
          return list((await cluster.listJobNames(selector)).map((n) => ({ metadata: { name: n } })));
        case 'GET /pods':
          return list((await cluster.listPods(selector)).map(podJson));
        case 'GET /pods/name': {
          const pod = await podByName(cluster, name as string);
          return pod ? json(200, podJson(pod)) : notFound(`pods "${name}"`);
        }
        case 'DELETE /pods/name': {
          const uid = (JSON.parse(body ?? '{}') as { preconditions?: { uid?: string } }).preconditions?.uid;
          const pod = await podByName(cluster, name as string);
          if (uid !== undefined && pod && pod.uid !== uid) {
            // The delete precondition failed: the pod of that name is another one (a Conflict).
            return json(409, {
              kind: 'Status',
              status: 'Failure',
              reason: 'Conflict',
              message: `Precondition failed: UID in precondition: ${uid}, UID in object meta: ${pod.uid}`,
              code: 409,
            });
          }
          await cluster.deletePod(name as string, uid);
          return ok();
        }
        case 'GET /pods/name/log': {
          const since = query.get('sinceTime');
          const text = await cluster.podLog(
            name as string,
            query.get('container') ?? undefined,
            since ? new Date(since) : undefined,
          );
          return { status: 200, body: text };
        }
        case 'PATCH apps/deployments/name': {
          const patch = JSON.parse(body ?? '{}') as {
            spec: { template: { metadata: { annotations: Record<string, string> } } };
          };
          const at = patch.spec.template.metadata.annotations['kubectl.kubernetes.io/restartedAt'];
          await cluster.restartDeployment(name as string, new Date(at));
          return json(200, {});
        }
        case 'GET apps/deployments/name': {
          const d = await cluster.getDeployment(name as string);
          if (!d) return notFound(`deployments.apps "${name}"`);
          return json(200, {
            metadata: { generation: d.generation },
            spec: { replicas: d.desired },
            status: {
              observedGeneration: d.observedGeneration,
              replicas: d.total,
              updatedReplicas: d.updated,
              availableReplicas: d.available,
            },
          });
        }
        case 'GET /services/name': {
          const spec = await cluster.getServiceSpec(name as string);
          return spec ? json(200, { spec }) : notFound(`services "${name}"`);
        }
        case 'POST /services':
          await cluster.createService(JSON.parse(body ?? '{}') as ServiceObject);
          return json(201, JSON.parse(body ?? '{}'));
        case 'PATCH /services/name': {
          const [op] = JSON.parse(body ?? '[]') as { value: Record<string, string> }[];
          await cluster.setServiceSelector(name as string, op.value);
          return json(200, {});
        }
        case 'DELETE /services/name':
          await cluster.deleteService(name as string);
          return ok();
        case 'GET /services':
          return list((await cluster.listServiceNames(selector)).map((n) => ({ metadata: { name: n } })));
      }
      if (route.startsWith('GET ') && name && request.namespace) {
        const [, , , version] = new URL(path, 'http://api').pathname.split('/');
        const status = await cluster.resourceStatus({
          group: request.group,
          version,
          plural: resource,
          namespace: request.namespace,
          name,
        });
        return status ? json(200, { status }) : notFound(`${resource}.${request.group} "${name}"`);
      }
      return undefined;
    },
  );
}

/** A pod of a replica set by name (`qwen3-1` is in `app=qwen3`): the fake lists pods by label only. */
async function podByName(cluster: Cluster, name: string) {
  const app = name.replace(/-\d+$/, '');
  return (await cluster.listPods(`app=${app}`)).find((p) => p.name === name);
}

function podJson(pod: { name: string; uid: string; ready: boolean; unschedulable?: string }) {
  return {
    metadata: { name: pod.name, uid: pod.uid },
    status: {
      conditions: [
        { type: 'Ready', status: pod.ready ? 'True' : 'False' },
        ...(pod.unschedulable
          ? [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: pod.unschedulable }]
          : []),
      ],
    },
  };
}

/** A network cell's fake (its port `NetworkCluster`) as the API of the cell's namespaces. */
export function networkFace(cluster: NetworkCluster): KubeTransport {
  return face(
    () => cluster.serverVersion(),
    async ({ route, request, query, selector, body }) => {
      const { name } = request;
      const ns = request.namespace as string;
      switch (route) {
        case 'POST batch/jobs':
          await cluster.createJob(JSON.parse(body ?? '{}') as JobObject);
          return json(201, JSON.parse(body ?? '{}'));
        case 'GET batch/jobs/name': {
          const counts = await cluster.getJob(ns, name as string);
          return counts ? json(200, { status: counts }) : notFound(`jobs.batch "${name}"`);
        }
        case 'DELETE batch/jobs/name':
          await cluster.deleteJob(ns, name as string);
          return ok();
        case 'GET batch/jobs':
          return list((await cluster.listJobNames(ns, selector)).map((n) => ({ metadata: { name: n } })));
        case 'GET /pods':
          return list(
            (await cluster.listPods(ns, selector || undefined)).map((pod) => ({
              metadata: {
                name: pod.name,
                namespace: pod.namespace,
                uid: pod.uid,
                creationTimestamp: pod.createdAt,
                annotations: pod.annotations,
              },
              spec: {
                nodeName: pod.node,
                initContainers: pod.hasSidecar ? [{ name: 'istio-proxy', restartPolicy: 'Always' }] : [],
              },
              status: {
                phase: pod.phase,
                podIP: pod.podIp,
                conditions: [{ type: 'Ready', status: pod.ready ? 'True' : 'False' }],
              },
            })),
          );
        case 'DELETE /pods/name':
          await cluster.deletePod(ns, name as string);
          return ok();
        case 'GET /pods/name/log':
          return {
            status: 200,
            body: await cluster.podLog(ns, name as string, query.get('container') ?? undefined),
          };
        case 'GET /namespaces/name': {
          const labels = await cluster.namespaceLabels(name as string);
          return labels ? json(200, { metadata: { name, labels } }) : notFound(`namespaces "${name}"`);
        }
        case 'POST /services':
          await cluster.createService(JSON.parse(body ?? '{}') as ServiceObject);
          return json(201, JSON.parse(body ?? '{}'));
        case 'GET /services':
          return list(
            (await cluster.listServices(ns, selector)).map((s) => ({
              metadata: { name: s.name, creationTimestamp: s.createdAt },
              spec: { clusterIP: s.clusterIp },
            })),
          );
        case 'DELETE /services/name':
          await cluster.deleteService(ns, name as string);
          return ok();
        case 'GET discovery.k8s.io/endpointslices': {
          // One ready slice per Service with a ready endpoint: what the client reads of them.
          const ready = await cluster.servicesWithReadyEndpoints(ns, selector);
          return list(
            [...ready].map((service) => ({
              metadata: { labels: { 'kubernetes.io/service-name': service } },
              endpoints: [{ conditions: { ready: true } }],
            })),
          );
        }
      }
      return undefined;
    },
  );
}

/** Every request the runner made, as the authorizer saw it, and the refused ones. */
export interface AccessLog {
  readonly requests: RequestAttributes[];
  readonly refused: RequestAttributes[];
}

/**
 * The API server's authorization in front of a face: a request the policy refuses for `subject`
 * gets the 403 Forbidden Status and never reaches the fake.
 */
export function authorizing(
  inner: KubeTransport,
  policy: RbacPolicy,
  subject: Subject,
  log: AccessLog,
): KubeTransport {
  return async (method, path, body, contentType) => {
    const request = requestAttributes(method, path);
    log.requests.push(request);
    const refusal = policy.forbidden(subject, request);
    if (refusal) {
      log.refused.push(request);
      return json(403, refusal);
    }
    return inner(method, path, body, contentType);
  };
}
