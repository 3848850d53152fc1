/**
 * Experiment E7 (docs/facts.md §N3): a server sends N Server-Sent Events at a fixed interval and
 * a client measures the gaps between their arrivals. This module is the pure part: the wire
 * format, an incremental parser, the server's schedule and the client's summary.
 *
 * Wire format as in the WHATWG HTML standard, "Server-sent events" (9.2.6 parsing an event
 * stream): lines end with CRLF, LF or CR; a blank line dispatches the event; `id`, `event` and
 * `data` fields; lines starting with ':' are comments; an event without data is not dispatched;
 * an event still open at the end of the stream is discarded. Checked against the standard's
 * statements as quoted in Mozilla bug 710546 and the docs of several conforming parsers; the
 * standard's own page was not in the reference store.
 */
import { gapsBetween, type MsDistribution, msDistribution, roundMs } from './stats.ts';

/** The path the SSE server streams on; any other path but the health check is 404. */
export const SSE_PATH = '/events';
/** Answers 200 "ok" while the server listens (a readiness probe for the chart). */
export const SSE_HEALTH_PATH = '/healthz';
/** The `event:` name of every event the server sends. */
export const SSE_EVENT_NAME = 'tick';

export interface SseEvent {
  /** The last `id:` field seen (the spec's last event ID), if any. */
  readonly id: string | undefined;
  /** The `event:` field; "message" when absent, as the standard says. */
  readonly event: string;
  /** The `data:` lines joined with "\n". */
  readonly data: string;
}

/** One event as the server writes it: its sequence number as id, its schedule in data. */
export function formatSseEvent(seq: number, dueMs: number): string {
  return `id: ${seq}\nevent: ${SSE_EVENT_NAME}\ndata: {"seq":${seq},"dueMs":${roundMs(dueMs)}}\n\n`;
}

/** Incremental parser: push decoded text as it arrives, get the events it completes. */
export class SseParser {
  private buffer = '';
  private id: string | undefined = undefined;
  private event = '';
  private data: string[] = [];
  private open = false;

  push(text: string): SseEvent[] {
    this.buffer += text;
    const events: SseEvent[] = [];
    for (;;) {
      const end = this.buffer.search(/[\r\n]/);
      if (end === -1) break;
      // A CR at the very end may be the first half of a CRLF split across chunks: wait for more.
      if (this.buffer[end] === '\r' && end === this.buffer.length - 1) break;
      const terminator = this.buffer.startsWith('\r\n', end) ? 2 : 1;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + terminator);
      const event = this.line(line);
      if (event) events.push(event);
    }
    return events;
  }

  /**
   * Call at the end of the stream: the events a final lone CR completes, and whether an event
   * was still open (it is discarded, as the standard says).
   */
  finish(): { readonly events: SseEvent[]; readonly cutOff: boolean } {
    const events: SseEvent[] = [];
    if (this.buffer.endsWith('\r')) {
      const event = this.line(this.buffer.slice(0, -1));
      if (event) events.push(event);
      this.buffer = '';
    }
    const cutOff = this.open || this.buffer !== '';
    this.buffer = '';
    this.open = false;
    this.data = [];
    return { events, cutOff };
  }

  private line(line: string): SseEvent | undefined {
    if (line === '') {
      // The standard dispatches only events that carry data; an id or event name alone is dropped.
      const complete = this.data.length > 0;
      const event = { id: this.id, event: this.event || 'message', data: this.data.join('\n') };
      this.event = '';
      this.data = [];
      this.open = false;
      return complete ? event : undefined;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'data') {
      this.data.push(value);
      this.open = true;
    } else if (field === 'event') {
      this.event = value;
      this.open = true;
    } else if (field === 'id') {
      this.id = value;
      this.open = true;
    }
    return undefined;
  }
}

/** What one stream sends: so many events, one every `intervalMs`, optionally stalling once. */
export interface StreamPlan {
  readonly events: number;
  readonly intervalMs: number;
  /** After this event (0-based) the stream pauses `stallMs` once; -1: never. */
  readonly stallAfter: number;
  readonly stallMs: number;
}

/**
 * When event `seq` is due, in ms after the stream started. The schedule is absolute (start +
 * seq x interval), so a late timer does not push every later event back: drift would read as
 * gaps the network never caused.
 */
export function eventDueMs(plan: StreamPlan, seq: number): number {
  const stalled = plan.stallAfter >= 0 && seq > plan.stallAfter ? plan.stallMs : 0;
  return seq * plan.intervalMs + stalled;
}

/** Limits of a stream request's query overrides. */
export const STREAM_LIMITS = { events: { min: 1, max: 100_000 }, intervalMs: { min: 1, max: 60_000 } };

/**
 * The plan of one request: the server's defaults, overridden by `?events=` and `?intervalMs=`
 * (so the study can vary them per run without restarting the pod). Returns an error message for
 * a bad override (the server answers 400 with it).
 */
export function streamPlanOf(defaults: StreamPlan, query: URLSearchParams): StreamPlan | string {
  const plan = { ...defaults };
  for (const key of ['events', 'intervalMs'] as const) {
    const raw = query.get(key);
    if (raw === null) continue;
    const value = Number(raw);
    const { min, max } = STREAM_LIMITS[key];
    if (raw.trim() === '' || !Number.isInteger(value) || value < min || value > max) {
      return `query parameter ${key} must be an integer from ${min} to ${max}, got '${raw}'`;
    }
    plan[key] = value;
  }
  return plan;
}

/** Problems in the sequence of event ids the client saw (the server numbers them 0, 1, 2, ...). */
export function sequenceErrors(ids: readonly (string | undefined)[]): string[] {
  const errors: string[] = [];
  let expected = 0;
  for (const [index, id] of ids.entries()) {
    const seq = id === undefined ? Number.NaN : Number(id);
    if (!Number.isInteger(seq)) {
      errors.push(`event ${index} has id '${id ?? ''}', not a sequence number`);
      expected++;
      continue;
    }
    if (seq > expected) errors.push(`events ${expected} to ${seq - 1} missing (${seq - expected} events)`);
    if (seq < expected) errors.push(`event ${seq} arrived again or out of order after event ${expected - 1}`);
    expected = Math.max(expected, seq + 1);
  }
  return errors;
}

/** The SSE client's JSON result (experiment E7). Times in ms, measured on the client's monotonic clock. */
export interface SseClientResult {
  readonly probe: 'sse-client';
  readonly url: string;
  /** HTTP status of the response (200 when the probe reports a result). */
  readonly status: number;
  /** Complete events received (count). */
  readonly events: number;
  /** Events the client was told to expect (count); 0 when not checked. */
  readonly expectedEvents: number;
  /** ms from sending the request until the TCP connection was established. */
  readonly connectMs: number | null;
  /** ms from sending the request until the first event arrived; null without events. */
  readonly firstEventMs: number | null;
  /** ms from sending the request until the stream ended (or broke, or timed out). */
  readonly durationMs: number;
  /**
   * Gaps between consecutive event arrivals (ms): p50Ms is the median. Null with fewer than two
   * events. Events that arrive in the same read share one arrival time (a gap of 0).
   */
  readonly gaps: MsDistribution | null;
  /** Everything that makes the stream incomplete or suspect; empty for a clean run. */
  readonly errors: string[];
}

/** What the client observed, on its clock (ms), before summarizing. */
export interface StreamObservation {
  readonly url: string;
  readonly status: number;
  readonly expectedEvents: number;
  readonly requestAtMs: number;
  readonly connectedAtMs: number | undefined;
  readonly endedAtMs: number;
  readonly arrivals: readonly { readonly atMs: number; readonly event: SseEvent }[];
  /** Transport problems: a reset, a timeout, an event cut off by the end of the stream. */
  readonly transportErrors: readonly string[];
}

export function summarizeStream(observed: StreamObservation): SseClientResult {
  const times = observed.arrivals.map((arrival) => arrival.atMs);
  const errors = [...observed.transportErrors, ...sequenceErrors(observed.arrivals.map((a) => a.event.id))];
  if (observed.expectedEvents > 0 && times.length !== observed.expectedEvents) {
    errors.push(`expected ${observed.expectedEvents} events, received ${times.length}`);
  }
  const since = (atMs: number | undefined) =>
    atMs === undefined ? null : roundMs(atMs - observed.requestAtMs);
  return {
    probe: 'sse-client',
    url: observed.url,
    status: observed.status,
    events: times.length,
    expectedEvents: observed.expectedEvents,
    connectMs: since(observed.connectedAtMs),
    firstEventMs: since(times[0]),
    durationMs: roundMs(observed.endedAtMs - observed.requestAtMs),
    gaps: msDistribution(gapsBetween(times)),
    errors,
  };
}

/** The SSE server's JSON result, printed when it stops. */
export interface SseServerResult {
  readonly probe: 'sse-server';
  /** Streams sent to the end (count). */
  readonly streams: number;
  /** Streams whose client went away before the last event (count). */
  readonly abandoned: number;
  /** Events written over all streams (count). */
  readonly eventsSent: number;
  /**
   * How late each write was against its schedule (ms): the server's own timer jitter, so a gap
   * the client sees can be told apart from one the server caused. Null before any event.
   */
  readonly sendLate: MsDistribution | null;
}
