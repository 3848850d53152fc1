import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { gateService } from '../../charts/gate-service.ts';
import { defaultLabConfig } from '../../lib/config/load.ts';
import {
  inClusterTransport,
  KubeApiError,
  KubeCluster,
  type KubeResponse,
  type KubeTransport,
  rfc3339Seconds,
} from '../../lib/runner/kube-cluster.ts';
import { rolloutComplete } from '../../lib/runner/run-study.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { tempDir } from '../temp.ts';

interface Call {
  method: string;
  path: string;
  body?: string;
  contentType?: string;
}

function recording(answers: (call: Call) => KubeResponse): { transport: KubeTransport; calls: Call[] } {
  const calls: Call[] = [];
  const transport: KubeTransport = async (method, path, body, contentType) => {
    const call = { method, path, body, contentType };
    calls.push(call);
    return answers(call);
  };
  return { transport, calls };
}

const ok = (body: unknown = {}): KubeResponse => ({ status: 200, body: JSON.stringify(body) });
const notFound: KubeResponse = {
  status: 404,
  body: JSON.stringify({ kind: 'Status', message: 'jobs.batch "x" not found', code: 404 }),
};

describe('KubeCluster', () => {
  const config = defaultLabConfig();
  const job = benchmarkJob(config, studyPlan(config).runs[0].benchmarks[0]);

  it('creates a Job in the lab namespace with the manifest as JSON', async () => {
    const { transport, calls } = recording(() => ({ status: 201, body: '{}' }));
    await new KubeCluster(transport, 'vllm').createJob(job);
    expect(calls).toEqual([
      {
        method: 'POST',
        path: '/apis/batch/v1/namespaces/vllm/jobs',
        body: JSON.stringify(job),
        contentType: undefined,
      },
    ]);
    await expect(new KubeCluster(transport, 'other').createJob(job)).rejects.toThrow(
      /namespace vllm, not other/,
    );
  });

  it('reads Job counts, and undefined for a missing Job', async () => {
    const { transport } = recording((call) =>
      call.path.endsWith('/bench-bound-p128')
        ? ok({ status: { failed: 1, conditions: [{ type: 'FailureTarget' }] } })
        : notFound,
    );
    const cluster = new KubeCluster(transport, 'vllm');
    expect(await cluster.getJob('bench-bound-p128')).toEqual({ succeeded: 0, failed: 1, active: 0 });
    expect(await cluster.getJob('bench-gone')).toBeUndefined();
  });

  it('deletes with foreground propagation and treats not-found as done', async () => {
    const { transport, calls } = recording(() => notFound);
    await new KubeCluster(transport, 'vllm').deleteJob('bench-x');
    await new KubeCluster(transport, 'vllm').deletePod('qwen3-1');
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual([
      'DELETE /apis/batch/v1/namespaces/vllm/jobs/bench-x',
      'DELETE /api/v1/namespaces/vllm/pods/qwen3-1',
    ]);
    expect(JSON.parse(calls[0].body ?? '')).toMatchObject({ propagationPolicy: 'Foreground' });
  });

  it('deletes a pod only with the uid it was given: a replacement with another uid stays, and that is done', async () => {
    const conflict: KubeResponse = {
      status: 409,
      body: JSON.stringify({
        kind: 'Status',
        message: 'Precondition failed: UID in precondition: u0, UID in object meta: u9',
      }),
    };
    const { transport, calls } = recording((call) =>
      call.method === 'DELETE' ? conflict : ok({ metadata: { name: 'qwen3-0', uid: 'u9' } }),
    );
    await new KubeCluster(transport, 'vllm').deletePod('qwen3-0', 'u0');
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual([
      'DELETE /api/v1/namespaces/vllm/pods/qwen3-0',
      'GET /api/v1/namespaces/vllm/pods/qwen3-0',
    ]);
    expect(JSON.parse(calls[0].body ?? '')).toEqual({ preconditions: { uid: 'u0' } });
    // The pod of that uid is still there: the refusal is real.
    const same = recording((call) =>
      call.method === 'DELETE' ? conflict : ok({ metadata: { name: 'qwen3-0', uid: 'u0' } }),
    );
    await expect(new KubeCluster(same.transport, 'vllm').deletePod('qwen3-0', 'u0')).rejects.toThrow(
      /HTTP 409/,
    );
  });

  it('lists the Jobs of a label selector by name', async () => {
    const { transport, calls } = recording(() => ok({ items: [{ metadata: { name: 'bench-a' } }] }));
    expect(
      await new KubeCluster(transport, 'vllm').listJobNames('app.kubernetes.io/component=benchmark'),
    ).toEqual(['bench-a']);
    expect(calls[0].path).toBe(
      '/apis/batch/v1/namespaces/vllm/jobs?labelSelector=app.kubernetes.io%2Fcomponent%3Dbenchmark',
    );
  });

  it('lists pods by label selector with their readiness', async () => {
    const { transport, calls } = recording(() =>
      ok({
        items: [
          {
            metadata: { name: 'qwen3-0', uid: 'u0' },
            status: { conditions: [{ type: 'Ready', status: 'True' }] },
          },
          {
            metadata: { name: 'qwen3-1', uid: 'u1' },
            status: { conditions: [{ type: 'Ready', status: 'False' }] },
          },
          { metadata: { name: 'qwen3-2', uid: 'u2' } },
        ],
      }),
    );
    const pods = await new KubeCluster(transport, 'vllm').listPods('app=qwen3');
    expect(calls[0].path).toBe('/api/v1/namespaces/vllm/pods?labelSelector=app%3Dqwen3');
    expect(pods).toEqual([
      { name: 'qwen3-0', uid: 'u0', ready: true },
      { name: 'qwen3-1', uid: 'u1', ready: false },
      { name: 'qwen3-2', uid: 'u2', ready: false },
    ]);
  });

  it("tells a pod no node can take by its PodScheduled condition, with the scheduler's message", async () => {
    const message = '0/2 nodes are available: 2 Insufficient memory.';
    const pod = (name: string, conditions: unknown[]) => ({
      metadata: { name, uid: name },
      status: { conditions },
    });
    const { transport } = recording(() => ({
      status: 200,
      body: JSON.stringify({
        items: [
          pod('stuck', [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message }]),
          // Still being considered (no reason yet), and scheduled: neither is Unschedulable.
          pod('new', [{ type: 'PodScheduled', status: 'False' }]),
          pod('placed', [{ type: 'PodScheduled', status: 'True' }]),
        ],
      }),
    }));
    expect(await new KubeCluster(transport, 'vllm').listPods('job-name=bench-partition-r0')).toEqual([
      { name: 'stuck', uid: 'stuck', ready: false, unschedulable: message },
      { name: 'new', uid: 'new', ready: false },
      { name: 'placed', uid: 'placed', ready: false },
    ]);
  });

  it('reads a container log as text', async () => {
    const { transport, calls } = recording(() => ({
      status: 200,
      body: 'GPU KV cache size: 163,472 tokens',
    }));
    expect(await new KubeCluster(transport, 'vllm').podLog('qwen3-0', 'vllm')).toMatch(/163,472/);
    expect(calls[0].path).toBe('/api/v1/namespaces/vllm/pods/qwen3-0/log?container=vllm');
  });

  it('reads only the log lines since a moment, in whole RFC 3339 seconds', async () => {
    const { transport, calls } = recording(() => ({ status: 200, body: 'Successfully reset prefix cache' }));
    await new KubeCluster(transport, 'vllm').podLog('qwen3-1', 'vllm', new Date('2025-10-14T09:02:03.789Z'));
    expect(calls[0].path).toBe(
      '/api/v1/namespaces/vllm/pods/qwen3-1/log?container=vllm&sinceTime=2025-10-14T09%3A02%3A03Z',
    );
    expect(rfc3339Seconds(new Date('2025-10-14T09:02:03.789Z'))).toBe('2025-10-14T09:02:03Z');
  });

  it("reads a custom resource's status, undefined when it does not exist", async () => {
    const route = {
      group: 'gateway.networking.k8s.io',
      version: 'v1',
      plural: 'httproutes',
      namespace: 'vllm',
      name: 'ai-gateway',
    };
    const status = { parents: [{ conditions: [{ type: 'Accepted', status: 'True' }] }] };
    const found = recording(() => ok({ kind: 'HTTPRoute', status }));
    expect(await new KubeCluster(found.transport, 'vllm').resourceStatus(route)).toEqual(status);
    expect(found.calls[0]).toMatchObject({
      method: 'GET',
      path: '/apis/gateway.networking.k8s.io/v1/namespaces/vllm/httproutes/ai-gateway',
    });
    const fresh = recording(() => ok({ kind: 'HTTPRoute' }));
    expect(await new KubeCluster(fresh.transport, 'vllm').resourceStatus(route)).toEqual({});
    const missing = recording(() => ({ status: 404, body: '{"kind":"Status","message":"not found"}' }));
    expect(await new KubeCluster(missing.transport, 'vllm').resourceStatus(route)).toBeUndefined();
  });

  it('restarts a Deployment as kubectl rollout restart does, and reads its rollout', async () => {
    const { transport, calls } = recording((call) =>
      call.method === 'PATCH'
        ? ok()
        : ok({
            metadata: { generation: 3 },
            spec: { replicas: 1 },
            status: { observedGeneration: 3, replicas: 2, updatedReplicas: 1, availableReplicas: 1 },
          }),
    );
    const cluster = new KubeCluster(transport, 'vllm');
    await cluster.restartDeployment('vllm-router-cache-aware', new Date('2025-10-14T10:00:00Z'));
    expect(calls[0]).toEqual({
      method: 'PATCH',
      path: '/apis/apps/v1/namespaces/vllm/deployments/vllm-router-cache-aware',
      body: JSON.stringify({
        spec: {
          template: {
            metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': '2025-10-14T10:00:00.000Z' } },
          },
        },
      }),
      contentType: 'application/strategic-merge-patch+json',
    });
    const state = await cluster.getDeployment('vllm-router-cache-aware');
    expect(state).toEqual({
      generation: 3,
      observedGeneration: 3,
      desired: 1,
      total: 2,
      updated: 1,
      available: 1,
    });
    // The old pod still runs: not complete yet.
    expect(rolloutComplete(state as NonNullable<typeof state>)).toBe(false);
    expect(rolloutComplete({ ...(state as NonNullable<typeof state>), total: 1 })).toBe(true);
    expect(
      rolloutComplete({
        generation: 4,
        observedGeneration: 3,
        desired: 1,
        total: 1,
        updated: 1,
        available: 1,
      }),
    ).toBe(false);
  });

  describe('Services (the gates of staged clients)', () => {
    const gate = gateService(config, 'cache-aware-r1-c0', 'vllm-router-cache-aware', {
      type: 'ClusterIP',
      clusterIP: '10.43.0.12',
      selector: { app: 'vllm-router-cache-aware' },
      ports: [{ name: 'http', port: 80, targetPort: 8000, protocol: 'TCP' }],
    });
    const gatesPath = `/api/v1/namespaces/${config.namespace}/services`;

    it("reads a Service's spec, undefined when it does not exist", async () => {
      const spec = { selector: { app: 'vllm-router-cache-aware' }, ports: [{ port: 80 }] };
      const { transport, calls } = recording((call) =>
        call.path.endsWith('/vllm-router-cache-aware') ? ok({ kind: 'Service', spec }) : notFound,
      );
      const cluster = new KubeCluster(transport, 'vllm');
      expect(await cluster.getServiceSpec('vllm-router-cache-aware')).toEqual(spec);
      expect(await cluster.getServiceSpec('gone')).toBeUndefined();
      expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual([
        'GET /api/v1/namespaces/vllm/services/vllm-router-cache-aware',
        'GET /api/v1/namespaces/vllm/services/gone',
      ]);
    });

    it('creates a gate in the lab namespace, and refuses one for another namespace', async () => {
      const { transport, calls } = recording(() => ({ status: 201, body: '{}' }));
      await new KubeCluster(transport, config.namespace).createService(gate);
      expect(calls).toEqual([
        { method: 'POST', path: gatesPath, body: JSON.stringify(gate), contentType: undefined },
      ]);
      await expect(new KubeCluster(transport, 'other').createService(gate)).rejects.toThrow(
        `service/gate-cache-aware-r1-c0 is for namespace ${config.namespace}, not other`,
      );
      expect(calls).toHaveLength(1);
    });

    it('opens a gate with a JSON patch that replaces the whole selector', async () => {
      const { transport, calls } = recording(() => ok());
      const selector = { 'app.kubernetes.io/name': 'vllm-router', arm: 'cache-aware' };
      await new KubeCluster(transport, 'vllm').setServiceSelector('gate-x', selector);
      expect(calls).toEqual([
        {
          method: 'PATCH',
          path: '/api/v1/namespaces/vllm/services/gate-x',
          body: JSON.stringify([{ op: 'add', path: '/spec/selector', value: selector }]),
          contentType: 'application/json-patch+json',
        },
      ]);
    });

    it('fails to open a gate that is gone, naming the Service', async () => {
      const { transport } = recording(() => ({
        status: 404,
        body: JSON.stringify({ kind: 'Status', message: 'services "gate-x" not found', code: 404 }),
      }));
      const error = await new KubeCluster(transport, 'vllm')
        .setServiceSelector('gate-x', { app: 'a' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(KubeApiError);
      expect((error as Error).message).toBe(
        'PATCH /api/v1/namespaces/vllm/services/gate-x: HTTP 404: services "gate-x" not found',
      );
    });

    it('deletes a Service, not-found being done, and fails on other errors', async () => {
      const gone = recording(() => notFound);
      await new KubeCluster(gone.transport, 'vllm').deleteService('gate-x');
      expect(gone.calls.map((c) => `${c.method} ${c.path}`)).toEqual([
        'DELETE /api/v1/namespaces/vllm/services/gate-x',
      ]);
      const forbidden = recording(() => ({ status: 403, body: '' }));
      await expect(new KubeCluster(forbidden.transport, 'vllm').deleteService('gate-x')).rejects.toThrow(
        'DELETE /api/v1/namespaces/vllm/services/gate-x: HTTP 403',
      );
    });

    it('lists the names of the Services matching a label selector', async () => {
      const { transport, calls } = recording(() =>
        ok({
          kind: 'ServiceList',
          items: [{ metadata: { name: 'gate-a' } }, { metadata: { name: 'gate-b' } }],
        }),
      );
      const cluster = new KubeCluster(transport, 'vllm');
      expect(await cluster.listServiceNames('app.kubernetes.io/component=gate')).toEqual([
        'gate-a',
        'gate-b',
      ]);
      expect(calls[0]).toMatchObject({
        method: 'GET',
        path: '/api/v1/namespaces/vllm/services?labelSelector=app.kubernetes.io%2Fcomponent%3Dgate',
      });
      const empty = recording(() => ok({ kind: 'ServiceList', items: [] }));
      expect(await new KubeCluster(empty.transport, 'vllm').listServiceNames('x=y')).toEqual([]);
    });
  });

  it('turns an API error into a KubeApiError with the Status message', async () => {
    const { transport } = recording(() => ({
      status: 403,
      body: JSON.stringify({
        kind: 'Status',
        message:
          'jobs.batch is forbidden: User "system:serviceaccount:vllm:lab-study-runner" cannot create resource',
      }),
    }));
    const error = await new KubeCluster(transport, 'vllm').createJob(job).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KubeApiError);
    expect((error as KubeApiError).status).toBe(403);
    expect((error as Error).message).toBe(
      'POST /apis/batch/v1/namespaces/vllm/jobs: HTTP 403: jobs.batch is forbidden: User "system:serviceaccount:vllm:lab-study-runner" cannot create resource',
    );
  });
});

describe('inClusterTransport over TLS with the ServiceAccount files', () => {
  let server: Server;
  let dir: string;
  const seen: { auth?: string; path?: string; method?: string; body: string }[] = [];

  beforeAll(async () => {
    dir = tempDir('lab-sa-');
    // A throw-away self-signed certificate for 127.0.0.1, made for this test only.
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'ca.crt'),
      ],
      { stdio: 'pipe' },
    );
    writeFileSync(join(dir, 'token'), 'first-token\n');
    server = createServer(
      { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'ca.crt')) },
      (req, res) => {
        let body = '';
        req.on('data', (chunk) => {
          body += chunk;
        });
        req.on('end', () => {
          seen.push({ auth: req.headers.authorization, path: req.url, method: req.method, body });
          res.writeHead(req.url === '/version' ? 200 : 404, { 'content-type': 'application/json' });
          res.end(
            req.url === '/version'
              ? '{"gitVersion":"v1.33.4+k3s1"}'
              : '{"kind":"Status","message":"not found"}',
          );
        });
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('trusts the ServiceAccount CA, sends the bearer token and re-reads it on every call', async () => {
    const port = (server.address() as AddressInfo).port;
    const transport = inClusterTransport({ serviceAccountDir: dir, host: '127.0.0.1', port });
    const cluster = new KubeCluster(transport, 'vllm');
    expect(await cluster.serverVersion()).toBe('v1.33.4+k3s1');
    writeFileSync(join(dir, 'token'), 'rotated-token\n');
    expect(await cluster.getJob('bench-x')).toBeUndefined();
    await cluster.deletePod('qwen3-0');
    expect(seen.map((s) => `${s.method} ${s.path} ${s.auth}`)).toEqual([
      'GET /version Bearer first-token',
      'GET /apis/batch/v1/namespaces/vllm/jobs/bench-x Bearer rotated-token',
      'DELETE /api/v1/namespaces/vllm/pods/qwen3-0 Bearer rotated-token',
    ]);
  });

  it('refuses a server whose certificate the CA does not sign', async () => {
    const port = (server.address() as AddressInfo).port;
    const other = tempDir('lab-sa-other-');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=other',
        '-keyout',
        join(other, 'key.pem'),
        '-out',
        join(other, 'ca.crt'),
      ],
      { stdio: 'pipe' },
    );
    writeFileSync(join(other, 'token'), 't');
    const transport = inClusterTransport({ serviceAccountDir: other, host: '127.0.0.1', port });
    await expect(transport('GET', '/version')).rejects.toThrow(/self.signed|certificate/i);
  });

  it('says where it must run when the service host is unknown', () => {
    expect(() => inClusterTransport({ serviceAccountDir: dir, host: '' })).toThrow(
      /KUBERNETES_SERVICE_HOST is not set/,
    );
  });
});
