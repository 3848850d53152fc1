import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { serviceTemplateManifest } from '../../../charts/network/study-runner.ts';
import {
  hasNativeSidecar,
  KubeApiError,
  KubeNetworkCluster,
  type KubeResponse,
  type KubeTransport,
} from '../../../lib/runner/kube-cluster.ts';
import { HttpSidecarMetrics } from '../../../lib/runner/network/http-sidecar.ts';

interface Call {
  method: string;
  path: string;
  body?: string;
}

function recording(answer: (call: Call) => KubeResponse): { cluster: KubeNetworkCluster; calls: Call[] } {
  const calls: Call[] = [];
  const transport: KubeTransport = async (method, path, body) => {
    const call = { method, path, ...(body !== undefined ? { body } : {}) };
    calls.push(call);
    return answer(call);
  };
  return { cluster: new KubeNetworkCluster(transport), calls };
}

const ok = (body: unknown = {}): KubeResponse => ({ status: 200, body: JSON.stringify(body) });
const notFound: KubeResponse = {
  status: 404,
  body: JSON.stringify({ kind: 'Status', message: 'not found' }),
};

describe('KubeNetworkCluster', () => {
  it('addresses Jobs in the namespace of their manifest and deletes them in the foreground', async () => {
    const { cluster, calls } = recording(() => ok({ status: { succeeded: 1 } }));
    const job = {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'net-c-r1', namespace: 'mesh', labels: {} },
      spec: {},
    } as const;
    await cluster.createJob(job);
    expect(await cluster.getJob('mesh', 'net-c-r1')).toEqual({ succeeded: 1, failed: 0, active: 0 });
    await cluster.deleteJob('mesh', 'net-c-r1');
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual([
      'POST /apis/batch/v1/namespaces/mesh/jobs',
      'GET /apis/batch/v1/namespaces/mesh/jobs/net-c-r1',
      'DELETE /apis/batch/v1/namespaces/mesh/jobs/net-c-r1',
    ]);
    expect(JSON.parse(calls[2].body ?? '{}').propagationPolicy).toBe('Foreground');
  });

  it('treats not-found as absence on reads and success on deletes, and throws other statuses', async () => {
    const { cluster } = recording(() => notFound);
    expect(await cluster.getJob('plain', 'x')).toBeUndefined();
    expect(await cluster.namespaceLabels('mesh')).toBeUndefined();
    await expect(cluster.deleteService('plain', 'scale-00001')).resolves.toBeUndefined();
    const failing = recording(() => ({ status: 500, body: 'etcd timeout' }));
    await expect(failing.cluster.listServices('plain', 'a=b')).rejects.toBeInstanceOf(KubeApiError);
  });

  it('reads pods with their node, IP, creation time and native sidecar', async () => {
    const pod = (name: string, initContainers: unknown[]) => ({
      metadata: { name, namespace: 'mesh', uid: `u-${name}`, creationTimestamp: '2026-01-01T00:00:00Z' },
      spec: { nodeName: 'ip-10-0-1-23', initContainers },
      status: { phase: 'Running', podIP: '10.42.0.9', conditions: [{ type: 'Ready', status: 'True' }] },
    });
    const { cluster, calls } = recording(() =>
      ok({
        items: [
          pod('native', [{ name: 'istio-proxy', restartPolicy: 'Always' }]),
          // An old-style sidecar (a regular init container) is not Istio's native sidecar.
          pod('init-only', [{ name: 'istio-proxy' }]),
        ],
      }),
    );
    const pods = await cluster.listPods('mesh', '!job-name');
    expect(calls[0].path).toBe('/api/v1/namespaces/mesh/pods?labelSelector=!job-name');
    expect(pods[0]).toMatchObject({
      name: 'native',
      node: 'ip-10-0-1-23',
      podIp: '10.42.0.9',
      ready: true,
      hasSidecar: true,
    });
    expect(pods[1].hasSidecar).toBe(false);
    expect(hasNativeSidecar({ spec: {} })).toBe(false);
  });

  it('creates Services and counts those whose EndpointSlices hold a ready endpoint', async () => {
    const { cluster, calls } = recording((call) =>
      call.path.includes('endpointslices')
        ? ok({
            items: [
              {
                metadata: { labels: { 'kubernetes.io/service-name': 'scale-00000' } },
                endpoints: [{ conditions: { ready: true } }],
              },
              {
                metadata: { labels: { 'kubernetes.io/service-name': 'scale-00001' } },
                endpoints: [{ conditions: { ready: false } }],
              },
              { metadata: { labels: { 'kubernetes.io/service-name': 'scale-00002' } }, endpoints: null },
            ],
          })
        : ok({
            items: [
              {
                metadata: { name: 'scale-00000', creationTimestamp: 't' },
                spec: { clusterIP: '10.43.0.10' },
              },
            ],
          }),
    );
    await cluster.createService(serviceTemplateManifest());
    expect(calls[0]).toMatchObject({ method: 'POST', path: '/api/v1/namespaces/plain/services' });
    expect(JSON.parse(calls[0].body ?? '{}').spec.type).toBe('ClusterIP');
    expect(await cluster.servicesWithReadyEndpoints('plain', 'network-lab/service-scale=true')).toEqual(
      new Set(['scale-00000']),
    );
    expect(calls[1].path).toBe(
      '/apis/discovery.k8s.io/v1/namespaces/plain/endpointslices?labelSelector=network-lab%2Fservice-scale%3Dtrue',
    );
    expect(await cluster.listServices('plain', 'x=y')).toEqual([
      { name: 'scale-00000', clusterIp: '10.43.0.10', createdAt: 't' },
    ]);
  });

  it('reads a namespace label set and a container log', async () => {
    const { cluster, calls } = recording((call) =>
      call.path.endsWith('/log?container=cilium-agent')
        ? { status: 200, body: 'level=info msg="ok"\n' }
        : ok({ metadata: { labels: { 'istio-injection': 'enabled' } } }),
    );
    expect(await cluster.namespaceLabels('mesh')).toEqual({ 'istio-injection': 'enabled' });
    expect(await cluster.podLog('kube-system', 'cilium-abc', 'cilium-agent')).toBe('level=info msg="ok"\n');
    expect(calls.map((c) => c.path)).toEqual([
      '/api/v1/namespaces/mesh',
      '/api/v1/namespaces/kube-system/pods/cilium-abc/log?container=cilium-agent',
    ]);
  });
});

describe('HttpSidecarMetrics', () => {
  it('reads :15020/stats/prometheus and names the status when it is not 200', async () => {
    let status = 200;
    let path = '';
    const server = createServer((req, res) => {
      path = req.url ?? '';
      res.writeHead(status).end('istio_requests_total{reporter="destination"} 3\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      const metrics = new HttpSidecarMetrics(2_000, port);
      expect(await metrics.scrape('127.0.0.1')).toContain('istio_requests_total');
      expect(path).toBe('/stats/prometheus');
      status = 503;
      await expect(metrics.scrape('127.0.0.1')).rejects.toThrow(/answered HTTP 503/);
      // A pod without a sidecar refuses the connection: the code stays on the error for the retry.
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const closedPort = (closed.address() as AddressInfo).port;
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      await expect(new HttpSidecarMetrics(2_000, closedPort).scrape('127.0.0.1')).rejects.toMatchObject({
        code: 'ECONNREFUSED',
      });
    } finally {
      server.close();
    }
  });
});
