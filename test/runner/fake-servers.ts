import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Clock } from '../../lib/runner/ports.ts';

/**
 * The loopback servers of a rehearsal: vLLM replicas, the front ends and the Endpoint Pickers, real
 * HTTP on 127.0.0.1, with the fake clock their logs and outages run on.
 */

/** A clock whose sleep only moves time forward: a study of hours runs in milliseconds. */
export class FakeClock implements Clock {
  constructor(public ms = Date.parse('2025-10-14T09:00:00.000Z')) {}
  now(): Date {
    return new Date(this.ms);
  }
  async sleep(ms: number): Promise<void> {
    this.ms += ms;
  }
}

/** What a fake replica does with POST /reset_prefix_cache once it answered 200. */
export type ResetBehaviour = 'succeeds' | 'refused' | 'silent';

/**
 * A vLLM replica as the runner sees it: a real HTTP server on loopback with vLLM's counters and
 * gauges, POST /reset_prefix_cache (404 without dev mode; 200 whatever happens, as vLLM's route),
 * GET /metrics and GET /v1/models, and a container log with the reset messages of vLLM's
 * BlockPool.reset_prefix_cache, stamped with the fake clock.
 */
export class FakeReplica {
  requests = 0;
  queries = 0;
  hits = 0;
  uid = randomUUID();
  /** VLLM_SERVER_DEV_MODE=1: the reset route exists. */
  devMode = true;
  /** The next this-many scrapes show no vllm: series (as with --disable-log-stats). */
  blankScrapes = 0;
  /** The next this-many scrapes show a request running (a replica still draining). */
  busyScrapes = 0;
  /** What the block pool does on a reset; a busy replica always refuses. */
  resetBehaviour: ResetBehaviour = 'succeeds';
  /** After its pod is deleted, the new pod never becomes Ready. */
  neverReadyAfterRestart = false;
  resets = 0;
  /** Called on each cache reset call (tests record the order of events with it). */
  onReset: (() => void) | undefined;
  /** Log lines with the fake time they were written at. */
  log: { at: number; line: string }[] = [];
  clock: FakeClock | undefined;
  /**
   * An outage in fake time: from `from` the process is gone (it restarts: counters 0, new uid)
   * and every connection is reset until `until`, when the new process serves again.
   */
  outage: { from: number; until: number; restarted?: boolean; keepsUid?: boolean } | undefined;
  /** Called before the replica answers: the fake cluster serves the clients' load up to now. */
  beforeAnswer: (() => void) | undefined;
  /**
   * Injected network faults: returns whether this request's connection is reset before the
   * replica sees it (`before`) or after it acted, losing its answer (`after`).
   */
  flaky: (() => 'before' | 'after' | undefined) | undefined;
  private server: Server | undefined;
  url = '';

  constructor(readonly pod: string) {
    this.log = this.startupLog(0);
  }

  /** Whether the replica is in its outage now; its restart happens at the first look after it began. */
  down(): boolean {
    const o = this.outage;
    const now = this.clock?.ms ?? 0;
    if (!o || now < o.from) return false;
    if (!o.restarted) {
      o.restarted = true;
      // A container restart (the engine crashed) keeps the pod and its uid; a new pod does not.
      this.restart(o.keepsUid);
    }
    return now < o.until;
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      this.beforeAnswer?.();
      if (this.down()) {
        // A process that is gone: the connection is reset, as a pod being replaced does.
        req.socket.destroy();
        return;
      }
      const fault = this.flaky?.();
      if (fault === 'before') {
        req.socket.destroy();
        return;
      }
      if (fault === 'after') {
        // The replica acts on the request; its answer never arrives.
        res.end = (() => {
          req.socket.destroy();
          return res;
        }) as typeof res.end;
      }
      if (req.method === 'POST' && req.url === '/reset_prefix_cache') {
        if (!this.devMode) {
          res.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}');
          return;
        }
        this.resets++;
        this.onReset?.();
        this.logReset();
        res.writeHead(200).end();
      } else if (req.method === 'GET' && req.url === '/metrics') {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(this.metricsText());
      } else if (req.method === 'GET' && req.url === '/v1/models') {
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end('{"object":"list","data":[{"id":"qwen3"}]}');
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }

  /** A new process: counters start at 0, nothing runs, the log starts afresh; a new pod has a new uid. */
  restart(keepsUid = false): void {
    this.requests = 0;
    this.queries = 0;
    this.hits = 0;
    this.busyScrapes = 0;
    if (!keepsUid) this.uid = randomUUID();
    this.log = this.startupLog(this.clock?.ms ?? 0);
  }

  /** Log lines written at or after `since` (ms), as the API's sinceTime returns them. */
  logSince(since: number | undefined): string {
    return this.log
      .filter((l) => since === undefined || l.at >= since)
      .map((l) => l.line)
      .join('\n');
  }

  private startupLog(at: number): { at: number; line: string }[] {
    return [
      'INFO 10-14 09:00:01 [api_server.py:1896] vLLM API server version 0.11.0',
      '(EngineCore_DP0 pid=212) INFO 10-14 09:00:41 [kv_cache_utils.py:1087] GPU KV cache size: 163,472 tokens',
      'INFO:     Application startup complete.',
    ].map((line) => ({ at, line }));
  }

  /** What vLLM logs for a reset: the route's line, then the block pool's verdict. */
  private logReset(): void {
    const at = this.clock?.ms ?? 0;
    this.log.push({
      at,
      line: 'INFO 10-14 09:02:00 [api_server.py:1020] Resetting prefix cache with specific None...',
    });
    const refused = this.resetBehaviour === 'refused' || this.busyScrapes > 0;
    if (refused) {
      this.log.push({
        at,
        line: '(EngineCore_DP0 pid=212) WARNING 10-14 09:02:00 [block_pool.py:321] Failed to reset prefix cache because some blocks (34) are not freed yet',
      });
    } else if (this.resetBehaviour === 'succeeds') {
      this.log.push({
        at,
        line: '(EngineCore_DP0 pid=212) INFO 10-14 09:02:00 [block_pool.py:332] Successfully reset prefix cache',
      });
    }
  }

  private metricsText(): string {
    const process = '# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 2.1e+09\n';
    if (this.blankScrapes > 0) {
      this.blankScrapes--;
      return process;
    }
    let running = 0;
    if (this.busyScrapes > 0) {
      this.busyScrapes--;
      running = 3;
    }
    const labels = 'engine="0",model_name="qwen3"';
    return [
      process,
      '# TYPE vllm:num_requests_running gauge',
      `vllm:num_requests_running{${labels}} ${running}.0`,
      `vllm:num_requests_waiting{${labels}} 0.0`,
      `vllm:kv_cache_usage_perc{${labels}} 0.12`,
      '# TYPE vllm:prefix_cache_queries_total counter',
      `vllm:prefix_cache_queries_total{${labels}} ${this.queries}.0`,
      `vllm:prefix_cache_hits_total{${labels}} ${this.hits}.0`,
      `vllm:request_success_total{engine="0",finished_reason="stop",model_name="qwen3"} 0.0`,
      `vllm:request_success_total{engine="0",finished_reason="length",model_name="qwen3"} ${this.requests}.0`,
      `vllm:request_success_total{engine="0",finished_reason="abort",model_name="qwen3"} 0.0`,
      '',
    ].join('\n');
  }
}

/**
 * Every front end of the study on one loopback server, at `<url>/<arm id>`: a completion or chat
 * request is answered 200 and counted by the next fake replica (round robin), unless the arm is
 * listed in `failing`, which answers 503 as an Envoy without a healthy upstream would.
 */
export class FakeFrontEnds {
  readonly requests: { arm: string; path: string; body: Record<string, unknown> }[] = [];
  failing = new Set<string>();
  /** Arms whose requests are answered 200 but never reach a replica. */
  blackHoles = new Set<string>();
  /** Called with the arm of each request (tests record the order of events with it). */
  onRequest: ((arm: string) => void) | undefined;
  /** The replicas behind an arm's path segment (a pair's own, with `study.parallelism: 2`); default all. */
  replicasOf: ((arm: string) => readonly FakeReplica[]) | undefined;
  url = '';
  private next = 0;
  private server: Server | undefined;

  constructor(private readonly replicas: readonly FakeReplica[]) {}

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const [, arm, ...rest] = (req.url ?? '').split('/');
        const path = `/${rest.join('/')}`;
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
        this.requests.push({ arm, path, body });
        this.onRequest?.(arm);
        if (this.failing.has(arm)) {
          res.writeHead(503).end('no healthy upstream');
          return;
        }
        if (!this.blackHoles.has(arm)) {
          const behind = this.replicasOf?.(arm) ?? this.replicas;
          behind[this.next % behind.length].requests++;
          this.next++;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"choices":[{"text":"OK"}]}');
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

/**
 * Every Endpoint Picker's metrics port on one loopback server, at `<url>/<arm id>/metrics`. It
 * answers 401 without the expected bearer token, as GAIE's metrics filter does; the indexer size
 * per arm is settable (default 4096); llm-d arms report the kv-cache-manager index counters
 * unless `llmdWithoutMetrics`.
 */
export class FakeEndpointPickers {
  readonly token = `token-${randomUUID()}`;
  indexerSize: Record<string, number> = {};
  llmdWithoutMetrics = false;
  readonly scraped: string[] = [];
  /**
   * The EPP's authorization of a scrape whose token is valid: a SubjectAccessReview of the token's
   * user for the non-resource path (controller-runtime's WithAuthenticationAndAuthorization, as
   * GAIE v1.0.1 wires it). Unset: every valid token may.
   */
  authorize: ((request: { verb: string; path: string }) => boolean) | undefined;
  url = '';
  private server: Server | undefined;

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const [, arm, what] = (req.url ?? '').split('/');
      if (req.headers.authorization !== `Bearer ${this.token}`) {
        res.writeHead(401).end('Unauthorized');
        return;
      }
      if (what !== 'metrics') {
        res.writeHead(404).end();
        return;
      }
      if (this.authorize && !this.authorize({ verb: 'get', path: '/metrics' })) {
        res.writeHead(403).end('Forbidden');
        return;
      }
      this.scraped.push(arm);
      const lines = [
        '# TYPE inference_extension_info gauge',
        'inference_extension_info{commit="abc",build_ref="v1.0.1"} 1',
      ];
      if (arm.startsWith('llmd')) {
        if (!this.llmdWithoutMetrics) {
          lines.push('kvcache_index_admissions_total 18432', 'kvcache_index_lookup_requests_total 1025');
        }
      } else {
        lines.push('# TYPE inference_extension_prefix_indexer_size gauge');
        lines.push(`inference_extension_prefix_indexer_size ${this.indexerSize[arm] ?? 4096}`);
      }
      res.writeHead(200, { 'content-type': 'text/plain' }).end(`${lines.join('\n')}\n`);
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}
