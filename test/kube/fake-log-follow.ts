import type { IncomingMessage, ServerResponse } from 'node:http';
import { send, status } from './fake-api-util.ts';
import type { FakePod } from './fake-pods.ts';

/**
 * `GET pods/<pod>/log?follow=true` on the fake API server (fake-api-server.ts), as the API server
 * does it: the log so far (its last `tailLines` lines), then each chunk as the container writes
 * it, and the response ends when the container ends; a client that goes away stops it.
 */

/** A container's log while it runs: a test appends to it and ends it (the container exits). */
export class LiveLog {
  private written = '';
  private ended = false;
  private readonly listeners = new Set<(chunk: string | undefined) => void>();

  get text(): string {
    return this.written;
  }

  get done(): boolean {
    return this.ended;
  }

  append(chunk: string): void {
    if (this.ended) throw new Error('the container has ended: its log takes no more lines');
    this.written += chunk;
    for (const listener of this.listeners) listener(chunk);
  }

  /** The container ends: every follower's stream ends. */
  end(): void {
    this.ended = true;
    for (const listener of this.listeners) listener(undefined);
    this.listeners.clear();
  }

  /** Told each new chunk, and undefined once the container ended; returns what stops it. */
  subscribe(listener: (chunk: string | undefined) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** How many clients follow it now (a stopped follower must not stay). */
  get followers(): number {
    return this.listeners.size;
  }
}

/** What the test's workloads add for following: a pod's live log, or undefined (the plain log). */
export interface FollowedLogs {
  followLog?(pod: FakePod): LiveLog | undefined;
}

/** The last `lines` lines of `text` (all of it without a count), as `tailLines` cuts a log. */
export function tailOf(text: string, lines: number | undefined): string {
  if (lines === undefined) return text;
  const parts = text.split('\n');
  const trailing = parts.at(-1) === '' ? parts.pop() : undefined;
  return parts.slice(-lines).join('\n') + (trailing === '' ? '\n' : '');
}

/** The pod's containers by name (init containers too: a native sidecar is one). */
function containersOf(pod: FakePod): string[] {
  const spec = pod.spec as { containers?: { name: string }[]; initContainers?: { name: string }[] };
  return [...(spec.containers ?? []), ...(spec.initContainers ?? [])].map((c) => c.name);
}

/**
 * Serves a followed log when the request asks to follow and the pod has a live log: true when it
 * answered. A container the pod does not have is the API server's 400.
 */
export function serveFollowedLog(
  req: IncomingMessage,
  res: ServerResponse,
  pod: FakePod,
  logs: FollowedLogs | undefined,
): boolean {
  const query = new URL(req.url ?? '/', 'http://fake').searchParams;
  if (query.get('follow') !== 'true') return false;
  const live = logs?.followLog?.(pod);
  if (!live) return false;
  const container = query.get('container');
  const names = containersOf(pod);
  if (container && names.length > 0 && !names.includes(container)) {
    send(res, 400, status(400, `container ${container} is not valid for pod ${pod.metadata.name}`));
    return true;
  }
  const tail = query.get('tailLines');
  res.writeHead(200, { 'content-type': 'text/plain', 'transfer-encoding': 'chunked' });
  const sofar = tailOf(live.text, tail ? Number(tail) : undefined);
  if (sofar) res.write(sofar);
  if (live.done) {
    res.end();
    return true;
  }
  const stop = live.subscribe((chunk) => {
    if (chunk === undefined) res.end();
    else res.write(chunk);
  });
  res.on('close', stop);
  return true;
}
