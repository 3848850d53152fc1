/** The socket side of experiment E7: the SSE server and client over node:http. */
import { createServer, get, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { describeNetError } from './net-errors.ts';
import {
  eventDueMs,
  formatSseEvent,
  SSE_HEALTH_PATH,
  SSE_PATH,
  type SseClientResult,
  type SseEvent,
  SseParser,
  type SseServerResult,
  type StreamPlan,
  streamPlanOf,
  summarizeStream,
} from './sse.ts';
import { msDistribution } from './stats.ts';

/** A monotonic clock in ms (fractional); injected so tests can drive it. */
export type Clock = () => number;
const monotonic: Clock = () => performance.now();

export interface SseServerOptions {
  readonly host: string;
  /** 0 picks a free port (see `RunningSseServer.port`). */
  readonly port: number;
  /** Each stream's plan unless the request's query overrides it. */
  readonly plan: StreamPlan;
  readonly clock?: Clock;
}

export interface RunningSseServer {
  readonly port: number;
  /** Resolves each time a stream has been sent to the end, with the number completed so far. */
  onStreamDone(listener: (completed: number) => void): void;
  /** Stops listening, cuts open streams, and returns what was served. */
  stop(): Promise<SseServerResult>;
}

export async function startSseServer(options: SseServerOptions): Promise<RunningSseServer> {
  const clock = options.clock ?? monotonic;
  const lateness: number[] = [];
  const listeners: ((completed: number) => void)[] = [];
  let streams = 0;
  let abandoned = 0;

  const stream = (res: ServerResponse, plan: StreamPlan) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    // Each event must leave at once: Nagle's algorithm would hold a small write for the ACK.
    res.socket?.setNoDelay(true);
    res.flushHeaders();
    const start = clock();
    let timer: NodeJS.Timeout | undefined;
    let finished = false;
    const send = (seq: number) => {
      const due = eventDueMs(plan, seq);
      lateness.push(Math.max(0, clock() - start - due));
      res.write(formatSseEvent(seq, due));
      if (seq + 1 < plan.events) {
        const wait = start + eventDueMs(plan, seq + 1) - clock();
        timer = setTimeout(() => send(seq + 1), Math.max(0, wait));
        return;
      }
      finished = true;
      res.end(() => {
        streams++;
        for (const listener of listeners) listener(streams);
      });
    };
    res.on('close', () => {
      clearTimeout(timer);
      if (!finished) abandoned++;
    });
    send(0);
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://probe');
    if (req.method !== 'GET') {
      res.writeHead(405, { allow: 'GET' }).end(`only GET is served, not ${req.method}\n`);
    } else if (url.pathname === SSE_HEALTH_PATH) {
      res.writeHead(200).end('ok\n');
    } else if (url.pathname === SSE_PATH) {
      const plan = streamPlanOf(options.plan, url.searchParams);
      if (typeof plan === 'string') res.writeHead(400).end(`${plan}\n`);
      else stream(res, plan);
    } else {
      res.writeHead(404).end(`no such path ${url.pathname}; streams are at ${SSE_PATH}\n`);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) =>
      reject(new Error(`cannot listen on ${options.host}:${options.port}: ${describeNetError(error)}`)),
    );
    server.listen(options.port, options.host, resolve);
  });

  return {
    port: (server.address() as AddressInfo).port,
    onStreamDone: (listener) => listeners.push(listener),
    stop: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
      return {
        probe: 'sse-server',
        streams,
        abandoned,
        eventsSent: lateness.length,
        sendLate: msDistribution(lateness),
      };
    },
  };
}

export interface SseClientOptions {
  /** An http:// URL of the SSE server's stream (sidecars add the TLS in the mesh arms). */
  readonly url: string;
  /** The number of events the stream should carry; 0: do not check. */
  readonly expectedEvents: number;
  /** The whole stream must end within this many ms. */
  readonly timeoutMs: number;
  readonly clock?: Clock;
}

/**
 * Reads one stream and measures when each event arrives. Rejects when there is no stream to
 * measure (connection refused, no answer, an HTTP error, not an event stream); problems during
 * the stream end up in the result's `errors`.
 */
export function readSseStream(options: SseClientOptions): Promise<SseClientResult> {
  const clock = options.clock ?? monotonic;
  const { url, timeoutMs } = options;
  if (!/^http:\/\//.test(url)) return Promise.reject(new Error(`--url must be an http:// URL, got '${url}'`));
  return new Promise((resolve, reject) => {
    const requestAtMs = clock();
    let connectedAtMs: number | undefined;
    let responded = false;
    const transportErrors: string[] = [];
    const broke = (error: unknown) => {
      // One cause per stream: the request and the response both report a destroyed socket.
      if (transportErrors.length === 0) transportErrors.push(`the stream broke: ${describeNetError(error)}`);
    };
    const request = get(url, { agent: false, headers: { accept: 'text/event-stream' } });
    const timer = setTimeout(() => {
      if (responded) transportErrors.push(`timed out: the stream did not end within ${timeoutMs} ms`);
      request.destroy(new Error(`no response within ${timeoutMs} ms`));
    }, timeoutMs);
    request.on('socket', (socket) => socket.once('connect', () => (connectedAtMs = clock())));
    request.on('error', (error) => {
      if (responded) return broke(error);
      clearTimeout(timer);
      reject(new Error(`cannot read ${url}: ${describeNetError(error)}`));
    });
    request.on('response', (res) => {
      responded = true;
      const type = res.headers['content-type'] ?? '';
      if (res.statusCode !== 200 || !type.startsWith('text/event-stream')) {
        clearTimeout(timer);
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('error', () => {});
        res.on('close', () => {
          const what = res.statusCode === 200 ? `content type '${type}', not text/event-stream` : 'an error';
          reject(
            new Error(`${url} answered HTTP ${res.statusCode} with ${what}: ${body.trim().slice(0, 200)}`),
          );
        });
        return;
      }
      const parser = new SseParser();
      const arrivals: { atMs: number; event: SseEvent }[] = [];
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const atMs = clock();
        for (const event of parser.push(chunk)) arrivals.push({ atMs, event });
      });
      res.on('error', broke);
      res.on('close', () => {
        const endedAtMs = clock();
        clearTimeout(timer);
        const tail = parser.finish();
        for (const event of tail.events) arrivals.push({ atMs: endedAtMs, event });
        if (tail.cutOff) transportErrors.push('the stream ended inside an event (it was discarded)');
        if (!res.complete && transportErrors.length === 0) {
          transportErrors.push(
            `the stream ended after ${arrivals.length} events before the server finished it`,
          );
        }
        resolve(
          summarizeStream({
            url,
            status: 200,
            expectedEvents: options.expectedEvents,
            requestAtMs,
            connectedAtMs,
            endedAtMs,
            arrivals,
            transportErrors,
          }),
        );
      });
    });
  });
}
