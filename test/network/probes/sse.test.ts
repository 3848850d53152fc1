import { createServer } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  eventDueMs,
  formatSseEvent,
  type SseClientResult,
  SseParser,
  type SseServerResult,
  type StreamPlan,
  sequenceErrors,
  streamPlanOf,
  summarizeStream,
} from '../../../lib/network/probes/sse.ts';
import { type RunningSseServer, readSseStream, startSseServer } from '../../../lib/network/probes/sse-net.ts';
import { closedPort } from './loopback.ts';

const PLAN: StreamPlan = { events: 200, intervalMs: 20, stallAfter: -1, stallMs: 0 };

describe('SSE wire format and parser', () => {
  it('parses what the server writes, however the bytes are split', () => {
    const text = formatSseEvent(0, 0) + formatSseEvent(1, 20);
    const whole = new SseParser().push(text);
    expect(whole).toEqual([
      { id: '0', event: 'tick', data: '{"seq":0,"dueMs":0}' },
      { id: '1', event: 'tick', data: '{"seq":1,"dueMs":20}' },
    ]);
    const parser = new SseParser();
    const split = [...text].flatMap((char) => parser.push(char));
    expect(split).toEqual(whole);
  });

  it('accepts CRLF and CR line ends (a CRLF split across reads is one line end), comments and multi-line data', () => {
    const parser = new SseParser();
    expect(parser.push(': keep-alive\r\ndata: a\r')).toEqual([]);
    expect(parser.push('\ndata: b\r\r')).toEqual([]);
    expect(parser.push('data:c\n\n')).toEqual([
      { id: undefined, event: 'message', data: 'a\nb' },
      { id: undefined, event: 'message', data: 'c' },
    ]);
  });

  it('does not dispatch an event without data', () => {
    expect(new SseParser().push('id: 3\nevent: tick\n\ndata: d\n\n')).toEqual([
      { id: '3', event: 'message', data: 'd' },
    ]);
  });

  it('discards an event the stream cut off, and completes one ended by a final CR', () => {
    const cut = new SseParser();
    cut.push('id: 4\ndata: half');
    expect(cut.finish()).toEqual({ events: [], cutOff: true });
    const cr = new SseParser();
    expect(cr.push('data: x\r\r')).toEqual([]);
    expect(cr.finish()).toEqual({ events: [{ id: undefined, event: 'message', data: 'x' }], cutOff: false });
  });

  it('names missing, repeated and unnumbered events', () => {
    expect(sequenceErrors(['0', '1', '2'])).toEqual([]);
    expect(sequenceErrors(['0', '3', '4'])).toEqual(['events 1 to 2 missing (2 events)']);
    expect(sequenceErrors(['0', '1', '1'])).toEqual(['event 1 arrived again or out of order after event 1']);
    expect(sequenceErrors(['0', undefined])).toEqual(["event 1 has id '', not a sequence number"]);
  });

  it('schedules events on an absolute clock, with the stall once', () => {
    expect([0, 1, 199].map((seq) => eventDueMs(PLAN, seq))).toEqual([0, 20, 3980]);
    const stalled = { ...PLAN, stallAfter: 1, stallMs: 500 };
    expect([0, 1, 2, 3].map((seq) => eventDueMs(stalled, seq))).toEqual([0, 20, 540, 560]);
  });

  it('takes per-request overrides from the query and refuses bad ones', () => {
    expect(streamPlanOf(PLAN, new URLSearchParams('events=5&intervalMs=7'))).toEqual({
      ...PLAN,
      events: 5,
      intervalMs: 7,
    });
    expect(streamPlanOf(PLAN, new URLSearchParams('events=0'))).toBe(
      "query parameter events must be an integer from 1 to 100000, got '0'",
    );
  });

  it('summarizes arrivals into gaps, first-event latency and errors', () => {
    const arrivals = [105, 125, 145, 175].map((atMs, seq) => ({
      atMs,
      event: { id: String(seq), event: 'tick', data: '' },
    }));
    const result = summarizeStream({
      url: 'http://x/events',
      status: 200,
      expectedEvents: 5,
      requestAtMs: 100,
      connectedAtMs: 101.5,
      endedAtMs: 180,
      arrivals,
      transportErrors: [],
    });
    expect(result).toMatchObject({
      events: 4,
      connectMs: 1.5,
      firstEventMs: 5,
      durationMs: 80,
      gaps: { count: 3, p50Ms: 20, maxMs: 30, meanMs: 23.333 },
      errors: ['expected 5 events, received 4'],
    });
  });
});

/**
 * One stream over loopback on a stepped clock: the server's timers are vitest's fake ones, both
 * ends read the fake clock (their injected `clock`), and the clock moves to the next event's due
 * time only once the client has read the event before it. Each arrival is then stamped with its
 * due time however starved this process is, so the gaps are exact, not bounded by a margin.
 */
async function steppedStream(
  plan: StreamPlan,
): Promise<{ result: SseClientResult; served: SseServerResult }> {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  let running: RunningSseServer | undefined;
  try {
    const clock = () => Date.now();
    running = await startSseServer({ host: '127.0.0.1', port: 0, plan, clock });
    // The client reads the clock for its request, its connect, then once per chunk it receives.
    let reads = 0;
    let wake: (() => void) | undefined;
    const clientClock = () => {
      reads++;
      wake?.();
      return Date.now();
    };
    const readsReach = (n: number) =>
      new Promise<void>((resolve) => {
        wake = () => reads >= n && resolve();
        wake();
      });
    const reading = readSseStream({
      url: `http://127.0.0.1:${running.port}/events`,
      expectedEvents: plan.events,
      timeoutMs: 30_000,
      clock: clientClock,
    });
    for (let seq = 1; seq < plan.events; seq++) {
      await readsReach(2 + seq);
      vi.advanceTimersToNextTimer();
    }
    const result = await reading;
    const served = await running.stop();
    running = undefined;
    return { result, served };
  } finally {
    vi.useRealTimers();
    await running?.stop();
  }
}

describe('SSE over loopback', () => {
  let server: RunningSseServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it('receives exactly 200 events 20 ms apart (E7 default)', async () => {
    const { result, served } = await steppedStream(PLAN);
    expect(result.errors).toEqual([]);
    expect(result.events).toBe(200);
    expect(result.gaps).toMatchObject({ count: 199, p50Ms: 20, maxMs: 20, meanMs: 20 });
    expect(result.firstEventMs).toBe(0);
    // The schedule is absolute: the last event is due 199 intervals after the first.
    expect(result.durationMs).toBe(3_980);
    expect(served).toMatchObject({ probe: 'sse-server', streams: 1, abandoned: 0, eventsSent: 200 });
    expect(served.sendLate?.maxMs).toBe(0);
  });

  it('shows a server stall in the maximum gap, not in the median', async () => {
    const { result } = await steppedStream({ events: 40, intervalMs: 10, stallAfter: 20, stallMs: 300 });
    expect(result.errors).toEqual([]);
    // The stall after event 20 delays event 21 and, on the absolute schedule, every later one.
    expect(result.gaps).toMatchObject({ count: 39, maxMs: 310, p50Ms: 10 });
    expect(result.durationMs).toBe(39 * 10 + 300);
  });

  it('honours query overrides, counts a client that leaves, answers 400 and 404', async () => {
    server = await startSseServer({ host: '127.0.0.1', port: 0, plan: PLAN });
    const base = `http://127.0.0.1:${server.port}`;
    const short = await readSseStream({
      url: `${base}/events?events=3&intervalMs=5`,
      expectedEvents: 3,
      timeoutMs: 5_000,
    });
    expect(short).toMatchObject({ events: 3, errors: [] });
    await expect(
      readSseStream({ url: `${base}/events?events=x`, expectedEvents: 0, timeoutMs: 5_000 }),
    ).rejects.toThrow(
      `${base}/events?events=x answered HTTP 400 with an error: query parameter events must be an integer from 1 to 100000, got 'x'`,
    );
    await expect(
      readSseStream({ url: `${base}/metrics`, expectedEvents: 0, timeoutMs: 5_000 }),
    ).rejects.toThrow('answered HTTP 404 with an error: no such path /metrics; streams are at /events');
    expect(await server.stop()).toMatchObject({ streams: 1, abandoned: 0 });
    server = undefined;
  });

  // On the stepped clock: on real time a starved process could fire the client's 300 ms timer
  // before it read the first event, or stop the server before it saw the client leave.
  it('counts a client that leaves at its timeout, with the events it read', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    let running: RunningSseServer | undefined;
    try {
      running = await startSseServer({ host: '127.0.0.1', port: 0, plan: PLAN, clock: () => Date.now() });
      let reads = 0;
      let wake: (() => void) | undefined;
      const reading = readSseStream({
        url: `http://127.0.0.1:${running.port}/events`,
        expectedEvents: 200,
        timeoutMs: 300,
        clock: () => {
          reads++;
          wake?.();
          return Date.now();
        },
      });
      // The request, the connect, the first event's chunk: then 300 ms pass at once.
      await new Promise<void>((resolve) => {
        wake = () => reads >= 3 && resolve();
        wake();
      });
      vi.advanceTimersByTime(300);
      const cut = await reading;
      expect(cut.events).toBeGreaterThan(0);
      expect(cut.events).toBeLessThan(200);
      expect(cut.errors).toContain('timed out: the stream did not end within 300 ms');
      expect(cut.errors).toContain(`expected 200 events, received ${cut.events}`);
      // The server sees the client leave before it is stopped: it drops its next event's timer
      // (the client's own timer has fired), however long that takes this process.
      await vi.waitUntil(() => vi.getTimerCount() === 0, { timeout: 60_000, interval: 10 });
      expect(await running.stop()).toMatchObject({ streams: 0, abandoned: 1 });
      running = undefined;
    } finally {
      vi.useRealTimers();
      await running?.stop();
    }
  });

  it('reports a refused connection as a clear error', async () => {
    const port = await closedPort();
    await expect(
      readSseStream({ url: `http://127.0.0.1:${port}/events`, expectedEvents: 200, timeoutMs: 5_000 }),
    ).rejects.toThrow(`cannot read http://127.0.0.1:${port}/events: connection refused (ECONNREFUSED)`);
  });

  it('reports a server that never answers, and a stream that is not SSE', async () => {
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    await expect(
      readSseStream({ url: `http://127.0.0.1:${port}/events`, expectedEvents: 0, timeoutMs: 200 }),
    ).rejects.toThrow(`cannot read http://127.0.0.1:${port}/events: no response within 200 ms`);
    silent.close();
    await expect(
      readSseStream({ url: 'https://x/events', expectedEvents: 0, timeoutMs: 200 }),
    ).rejects.toThrow("--url must be an http:// URL, got 'https://x/events'");
  });
});
