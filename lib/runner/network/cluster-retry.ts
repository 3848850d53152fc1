import type { NetworkCluster } from '../ports.ts';
import { withRetry } from '../retry.ts';

/** Every call of the cell's API, retried on transient faults (retry.ts); a retried create that meets itself (409) succeeded. */
export function retryingNetworkCluster(
  cluster: NetworkCluster,
  ctx: Parameters<typeof withRetry>[2],
): NetworkCluster {
  const r = <T>(what: string, call: () => Promise<T>) => withRetry(what, call, ctx);
  const conflictIsDone = async (call: () => Promise<void>, exists: () => Promise<boolean>) => {
    try {
      await call();
    } catch (error) {
      if ((error as { status?: number }).status === 409 && (await exists())) return;
      throw error;
    }
  };
  return {
    createJob: (job) =>
      r(`create job/${job.metadata.name}`, () =>
        conflictIsDone(
          () => cluster.createJob(job),
          async () => (await cluster.getJob(job.metadata.namespace, job.metadata.name)) !== undefined,
        ),
      ),
    getJob: (ns, name) => r(`get job/${name}`, () => cluster.getJob(ns, name)),
    deleteJob: (ns, name) => r(`delete job/${name}`, () => cluster.deleteJob(ns, name)),
    listPods: (ns, selector) =>
      r(`list pods ${ns} ${selector ?? ''}`.trim(), () => cluster.listPods(ns, selector)),
    deletePod: (ns, name) => r(`delete pod/${name}`, () => cluster.deletePod(ns, name)),
    podLog: (ns, name, container) => r(`log of pod/${name}`, () => cluster.podLog(ns, name, container)),
    namespaceLabels: (name) => r(`get namespace/${name}`, () => cluster.namespaceLabels(name)),
    createService: (service) =>
      r(`create service/${service.metadata.name}`, () =>
        conflictIsDone(
          () => cluster.createService(service),
          async () =>
            (
              await cluster.listServices(
                service.metadata.namespace,
                Object.entries(service.metadata.labels)
                  .map(([k, v]) => `${k}=${v}`)
                  .join(','),
              )
            ).some((s) => s.name === service.metadata.name),
        ),
      ),
    listServices: (ns, selector) =>
      r(`list services ${ns} ${selector}`, () => cluster.listServices(ns, selector)),
    deleteService: (ns, name) => r(`delete service/${name}`, () => cluster.deleteService(ns, name)),
    servicesWithReadyEndpoints: (ns, selector) =>
      r(`list endpointslices ${ns} ${selector}`, () => cluster.servicesWithReadyEndpoints(ns, selector)),
    serverVersion: () => r('GET /version', () => cluster.serverVersion()),
  };
}
