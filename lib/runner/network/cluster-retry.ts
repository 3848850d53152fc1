import { type RetryContext, withRetry } from '../call-policy.ts';
import { KubeApiError } from '../kube-cluster.ts';
import type { NetworkCluster } from '../ports.ts';

/**
 * Every call of the cell's API under the runners' one error policy (call-policy.ts): transient
 * faults are retried, an outage is ridden out up to `runner.retry.outageMinutes`. As for the
 * first lab (retry.ts), a 409 on a retried create is the call meeting its own earlier try (the
 * object exists: what was asked); a 409 on the first try is an answer, somebody else's object.
 */
export function retryingNetworkCluster(cluster: NetworkCluster, ctx: RetryContext): NetworkCluster {
  const r = <T>(what: string, call: (tryNumber: number) => Promise<T>) => withRetry(what, call, ctx);
  const createOnce = async (tryNumber: number, call: () => Promise<void>, exists: () => Promise<boolean>) => {
    try {
      await call();
    } catch (error) {
      if (tryNumber > 1 && error instanceof KubeApiError && error.status === 409 && (await exists())) return;
      throw error;
    }
  };
  return {
    createJob: (job) =>
      r(`create job/${job.metadata.name}`, (tryNumber) =>
        createOnce(
          tryNumber,
          () => cluster.createJob(job),
          async () => (await cluster.getJob(job.metadata.namespace, job.metadata.name)) !== undefined,
        ),
      ),
    getJob: (ns, name) => r(`get job/${name}`, () => cluster.getJob(ns, name)),
    deleteJob: (ns, name) => r(`delete job/${name}`, () => cluster.deleteJob(ns, name)),
    listJobNames: (ns, selector) =>
      r(`list jobs ${ns} ${selector}`, () => cluster.listJobNames(ns, selector)),
    listPods: (ns, selector) =>
      r(`list pods ${ns} ${selector ?? ''}`.trim(), () => cluster.listPods(ns, selector)),
    deletePod: (ns, name) => r(`delete pod/${name}`, () => cluster.deletePod(ns, name)),
    podLog: (ns, name, container) => r(`log of pod/${name}`, () => cluster.podLog(ns, name, container)),
    namespaceLabels: (name) => r(`get namespace/${name}`, () => cluster.namespaceLabels(name)),
    createService: (service) =>
      r(`create service/${service.metadata.name}`, (tryNumber) =>
        createOnce(
          tryNumber,
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
