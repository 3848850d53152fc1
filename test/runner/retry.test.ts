import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { gateService } from '../../charts/gate-service.ts';
import { defaultLabConfig } from '../../lib/config/load.ts';
import { HttpReplicas } from '../../lib/runner/http-replicas.ts';
import { KubeApiError, KubeCluster, type KubeResponse } from '../../lib/runner/kube-cluster.ts';
import type { Replicas } from '../../lib/runner/ports.ts';
import {
  backoffDelayMs,
  HttpStatusError,
  type RetryContext,
  retryable,
  retryingCluster,
  retryingReplicas,
  withRetry,
} from '../../lib/runner/retry.ts';
import { FakeClock } from './fakes.ts';

function context(attempts = 5): RetryContext & { lines: string[]; clock: FakeClock } {
  const lines: string[] = [];
  const clock = new FakeClock();
  return {
    policy: { attempts, initialDelayMs: 1_000, maxDelayMs: 8_000 },
    clock,
    lines,
    log: (line) => {
      lines.push(line);
    },
  };
}

describe('which failures are retried', () => {
  it('retries 429, 5xx and connection faults, not a request that was wrong', () => {
    expect(retryable(new KubeApiError('GET', '/x', 500, ''))).toBe(true);
    expect(retryable(new KubeApiError('GET', '/x', 503, ''))).toBe(true);
    expect(retryable(new KubeApiError('GET', '/x', 429, ''))).toBe(true);
    expect(retryable(new HttpStatusError('GET /metrics answered HTTP 502', 502))).toBe(true);
    for (const status of [400, 401, 403, 404, 409, 422]) {
      expect(retryable(new KubeApiError('GET', '/x', status, '')), String(status)).toBe(false);
    }
    expect(
      retryable(Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { code: 'ECONNREFUSED' })),
    ).toBe(true);
    expect(retryable(new Error('GET http://qwen3-0:8000/metrics: ECONNRESET'))).toBe(true);
    expect(retryable(new Error('GET /apis/batch/v1/x: no answer within 60000 ms'))).toBe(true);
    expect(retryable(new Error('job/x is for namespace a, not b'))).toBe(false);
  });

  it('doubles the delay from the first one up to the maximum', () => {
    const policy = { attempts: 8, initialDelayMs: 1_000, maxDelayMs: 8_000 };
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffDelayMs(policy, n))).toEqual([
      1_000, 2_000, 4_000, 8_000, 8_000, 8_000,
    ]);
  });
});

describe('withRetry', () => {
  it('tries again after a transient fault, logging each retry and sleeping the backoff', async () => {
    const ctx = context();
    let calls = 0;
    const result = await withRetry(
      'get job/x',
      async () => {
        calls++;
        if (calls < 3) throw new KubeApiError('GET', '/jobs/x', 500, '{"kind":"Status","message":"boom"}');
        return 'ok';
      },
      ctx,
    );
    expect(result).toBe('ok');
    expect(calls).toBe(3);
    expect(ctx.lines).toEqual([
      'retry 1/4 of get job/x in 1s: GET /jobs/x: HTTP 500: boom',
      'retry 2/4 of get job/x in 2s: GET /jobs/x: HTTP 500: boom',
    ]);
    expect(ctx.clock.ms - Date.parse('2025-10-14T09:00:00.000Z')).toBe(3_000);
  });

  it('gives up after the last try with the last error, and never retries a 4xx', async () => {
    const ctx = context(3);
    let calls = 0;
    await expect(
      withRetry(
        'x',
        async () => {
          calls++;
          throw new KubeApiError('GET', '/x', 503, '');
        },
        ctx,
      ),
    ).rejects.toThrow('GET /x: HTTP 503');
    expect(calls).toBe(3);
    expect(ctx.lines).toHaveLength(2);

    const forbidden = context();
    calls = 0;
    await expect(
      withRetry(
        'x',
        async () => {
          calls++;
          throw new KubeApiError('GET', '/x', 403, '');
        },
        forbidden,
      ),
    ).rejects.toThrow('HTTP 403');
    expect(calls).toBe(1);
    expect(forbidden.lines).toEqual([]);
  });
});

describe('retrying replicas over real HTTP', () => {
  it('retries a /metrics answered 503 and a reset answered 502, then returns what the replica says', async () => {
    const answers = { metrics: [503, 503, 200], reset: [502, 200] };
    const server = createServer((req, res) => {
      const list = req.url === '/metrics' ? answers.metrics : answers.reset;
      const status = list.shift() ?? 200;
      res.writeHead(status).end(status === 200 ? 'vllm:num_requests_running 0\n' : 'busy');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const ctx = context();
      const replicas = retryingReplicas(new HttpReplicas(5_000), ctx);
      expect(await replicas.metrics(url)).toContain('vllm:num_requests_running');
      expect(await replicas.resetPrefixCache(url)).toBe(200);
      expect(ctx.lines).toHaveLength(3);
      expect(ctx.lines[0]).toMatch(
        /^retry 1\/4 of GET http:\/\/127\.0\.0\.1:\d+\/metrics in 1s: .*answered HTTP 503$/,
      );
      expect(ctx.lines[2]).toMatch(/reset_prefix_cache in 1s: .*answered HTTP 502$/);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('the transport: one kept connection, the answer as sent, a refused connection and a hung replica as retryable errors', async () => {
    let connections = 0;
    const requests: string[] = [];
    let hang = false;
    const server = createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      if (hang) return; // a replica that never answers
      if (req.url === '/metrics') res.writeHead(200).end('vllm:num_requests_running 0\nü\n');
      else if (req.url === '/reset_prefix_cache') res.writeHead(404).end('{"detail":"Not Found"}');
      else res.writeHead(503).end('loading');
    });
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const replicas = new HttpReplicas(200);
    try {
      expect(await replicas.metrics(`${url}/`)).toBe('vllm:num_requests_running 0\nü\n');
      expect(await replicas.resetPrefixCache(url)).toBe(404);
      expect(await replicas.models(url)).toBe(503);
      await expect(replicas.metrics(`${url}/x`)).rejects.toThrow(
        new HttpStatusError(`GET ${url}/x/metrics answered HTTP 503`, 503),
      );
      expect(requests).toEqual([
        'GET /metrics',
        'POST /reset_prefix_cache',
        'GET /v1/models',
        'GET /x/metrics',
      ]);
      // Calls in a row share one connection (keep-alive).
      expect(connections).toBe(1);
      hang = true;
      const hung = await replicas.models(url).catch((error: unknown) => error);
      expect(hung).toMatchObject({
        name: 'TimeoutError',
        message: `GET ${url}/v1/models: no answer within 200 ms`,
      });
      expect(retryable(hung)).toBe(true);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    const refused = await replicas.metrics(url).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'ECONNREFUSED', message: `GET ${url}/metrics: ECONNREFUSED` });
    expect(retryable(refused)).toBe(true);
  });

  it('hands a 404 reset straight back (no dev mode is an answer) and retries a refused connection', async () => {
    const calls: string[] = [];
    const fake: Replicas = {
      resetPrefixCache: async () => {
        calls.push('reset');
        return 404;
      },
      metrics: async (url) => {
        calls.push('metrics');
        if (calls.length < 2)
          throw Object.assign(new Error(`GET ${url}/metrics: ECONNREFUSED`), { code: 'ECONNREFUSED' });
        return 'ok';
      },
      models: async () => 200,
    };
    const ctx = context();
    const replicas = retryingReplicas(fake, ctx);
    expect(await replicas.metrics('http://r')).toBe('ok');
    expect(await replicas.resetPrefixCache('http://r')).toBe(404);
    expect(calls).toEqual(['metrics', 'metrics', 'reset']);
  });
});

describe('retrying the gate Service calls', () => {
  const config = defaultLabConfig();
  const gate = gateService(config, 'cache-aware-r1-c0', 'vllm-router-cache-aware', {
    selector: { app: 'vllm-router-cache-aware' },
    ports: [{ name: 'http', port: 80, targetPort: 8000 }],
  });
  const status = (code: number, message: string): KubeResponse => ({
    status: code,
    body: JSON.stringify({ kind: 'Status', message, code }),
  });
  /** A KubeCluster over a transport that answers from a script, in order, and records the calls. */
  function scripted(answers: KubeResponse[]): { cluster: KubeCluster; calls: string[] } {
    const calls: string[] = [];
    const cluster = new KubeCluster(async (method, path) => {
      calls.push(`${method} ${path}`);
      const answer = answers.shift();
      if (!answer) throw new Error(`unexpected ${method} ${path}`);
      return answer;
    }, config.namespace);
    return { cluster, calls };
  }
  const services = `/api/v1/namespaces/${config.namespace}/services`;

  it('takes a 409 on a retried create for done when the closed gate exists', async () => {
    const { cluster, calls } = scripted([
      status(500, 'etcdserver: request timed out'),
      status(409, 'services "gate-cache-aware-r1-c0" already exists'),
      { status: 200, body: JSON.stringify({ kind: 'Service', spec: { ports: [{ port: 80 }] } }) },
    ]);
    const ctx = context();
    await retryingCluster(cluster, ctx).createService(gate);
    expect(calls).toEqual([`POST ${services}`, `POST ${services}`, `GET ${services}/gate-cache-aware-r1-c0`]);
    expect(ctx.lines).toEqual([
      `retry 1/4 of create service/gate-cache-aware-r1-c0 in 1s: POST ${services}: HTTP 500: etcdserver: request timed out`,
    ]);
  });

  it('throws a 409 on the first try: that Service is not ours', async () => {
    const { cluster, calls } = scripted([status(409, 'services "gate-cache-aware-r1-c0" already exists')]);
    await expect(retryingCluster(cluster, context()).createService(gate)).rejects.toThrow(
      `POST ${services}: HTTP 409: services "gate-cache-aware-r1-c0" already exists`,
    );
    expect(calls).toEqual([`POST ${services}`]);
  });

  it('throws a 409 on a retried create when the Service there is open (it has a selector)', async () => {
    const { cluster } = scripted([
      status(503, 'unavailable'),
      status(409, 'services "gate-cache-aware-r1-c0" already exists'),
      {
        status: 200,
        body: JSON.stringify({ kind: 'Service', spec: { selector: { app: 'vllm-router-cache-aware' } } }),
      },
    ]);
    await expect(retryingCluster(cluster, context()).createService(gate)).rejects.toThrow('HTTP 409');
  });

  it('retries the other Service calls on a 500, not on a 403', async () => {
    const fault = status(500, 'boom');
    const { cluster, calls } = scripted([
      fault,
      { status: 200, body: JSON.stringify({ spec: { ports: [{ port: 80 }] } }) },
      fault,
      { status: 200, body: '{}' },
      fault,
      { status: 200, body: '{}' },
      fault,
      { status: 200, body: JSON.stringify({ items: [{ metadata: { name: 'gate-a' } }] }) },
      status(403, 'forbidden'),
    ]);
    const ctx = context();
    const retrying = retryingCluster(cluster, ctx);
    expect(await retrying.getServiceSpec('vllm-router')).toEqual({ ports: [{ port: 80 }] });
    await retrying.setServiceSelector('gate-a', { app: 'vllm-router' });
    await retrying.deleteService('gate-a');
    expect(await retrying.listServiceNames('component=gate')).toEqual(['gate-a']);
    await expect(retrying.deleteService('gate-b')).rejects.toThrow('HTTP 403');
    expect(calls).toHaveLength(9);
    expect(ctx.lines.map((line) => line.split(' in ')[0])).toEqual([
      'retry 1/4 of get service/vllm-router',
      'retry 1/4 of set the selector of service/gate-a',
      'retry 1/4 of delete service/gate-a',
      'retry 1/4 of list services component=gate',
    ]);
  });
});
