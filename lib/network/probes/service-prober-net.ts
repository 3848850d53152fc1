/** The socket side of the service prober (E9): connect attempts in a tight loop, no sleeps. */
import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import { errorCode } from './net-errors.ts';
import {
  type AttemptOutcome,
  type AttemptRun,
  addAttempt,
  type ProberTarget,
  type ProbeSample,
  proberResult,
  type ServiceProberResult,
  sampleOf,
  type WatchedTarget,
  type WatchProberOutput,
} from './service-prober.ts';

/** What an attempt needs of a socket: node:net's Socket, or a fake that never connects. */
export interface AttemptSocket {
  readonly localAddress?: string | undefined;
  readonly localPort?: number | undefined;
  readonly remoteAddress?: string | undefined;
  readonly remotePort?: number | undefined;
  once(event: 'connect', listener: () => void): unknown;
  once(event: 'error', listener: (error: Error) => void): unknown;
  destroy(): void;
}

export type SocketFactory = (host: string, port: number) => AttemptSocket;

/** Real TCP connects through node:net. */
export const tcpSockets: SocketFactory = (host, port) => connect({ host, port });

/** The clocks a sample reads: monotonic for durations, wall for a start given in epoch ms. */
export interface ProberClocks {
  readonly monotonicMs: () => number;
  readonly epochMs: () => number;
}

export const systemClocks: ProberClocks = {
  monotonicMs: () => performance.now(),
  // Date.now(), the clock the runner stamps the Service's creation with (1 ms steps).
  epochMs: () => Date.now(),
};

/**
 * The wall clock read with the monotonic one it pairs with. A process preempted between the two
 * reads (a loaded node; a loaded test machine saw 40 ms) shifts every time computed from the
 * pair by that stall, so the pair is read again until the monotonic clock moved at most 1 ms
 * across the wall clock's read (Date.now() has 1 ms steps), at most 10 times: then the tightest.
 */
export function clockPair(clocks: ProberClocks): { readonly epochMs: number; readonly monotonicMs: number } {
  let best = { epochMs: 0, monotonicMs: 0, spreadMs: Number.POSITIVE_INFINITY };
  for (let tries = 0; tries < 10 && best.spreadMs > 1; tries++) {
    const before = clocks.monotonicMs();
    const epochMs = clocks.epochMs();
    const spreadMs = clocks.monotonicMs() - before;
    if (spreadMs < best.spreadMs) best = { epochMs, monotonicMs: before, spreadMs };
  }
  return { epochMs: best.epochMs, monotonicMs: best.monotonicMs };
}

/** The outcome code of an attempt that connected to itself (see `isSelfConnect`). */
export const SELF_CONNECT = 'SELF_CONNECT';

/**
 * Linux picks the local port of a connect from the ephemeral range; connecting over loopback to a
 * closed port inside that range can get the same port as the destination and "connect" by TCP
 * simultaneous open, to itself. Thousands of tight-loop attempts make that likely, so such a
 * connection is not the target answering. (It cannot happen to a ClusterIP: the addresses differ.)
 */
export function isSelfConnect(socket: AttemptSocket): boolean {
  return (
    socket.localPort !== undefined &&
    socket.localPort === socket.remotePort &&
    socket.localAddress === socket.remoteAddress
  );
}

/**
 * One connect attempt, ended by success, an error, or `timeoutMs` (the socket is destroyed: a
 * SYN that was dropped would otherwise be retried by the kernel only after its initial RTO, 1 s:
 * Linux include/net/tcp.h TCP_TIMEOUT_INIT, set by tcp_connect_init in net/ipv4/tcp_output.c).
 */
export function attemptConnect(
  sockets: SocketFactory,
  host: string,
  port: number,
  timeoutMs: number,
  clock: () => number,
): Promise<AttemptOutcome> {
  return new Promise((resolve) => {
    let socket: AttemptSocket;
    try {
      socket = sockets(host, port);
    } catch (error) {
      resolve({ kind: 'error', code: errorCode(error) ?? 'ERROR' });
      return;
    }
    let ended = false;
    const end = (outcome: AttemptOutcome) => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    // libuv runs expired timers before it polls for I/O: on a busy loop the timer can expire
    // while the RST already waits. Deciding in the check phase (after the poll) lets that answer
    // count as refused instead of timed out; the decision comes at most one loop turn later.
    const timer = setTimeout(() => setImmediate(() => ended || end({ kind: 'timeout' })), timeoutMs);
    socket.once('connect', () => {
      const atMs = clock();
      end(isSelfConnect(socket) ? { kind: 'error', code: SELF_CONNECT } : { kind: 'connected', atMs });
    });
    socket.once('error', (error) => {
      const code = errorCode(error) ?? 'ERROR';
      end(code === 'ECONNREFUSED' ? { kind: 'refused' } : { kind: 'error', code });
    });
  });
}

export interface ProberOptions {
  /** Each attempt's limit (ms); the spec's 20 ms. */
  readonly attemptTimeoutMs: number;
  /** Give a sample up after this long (ms). */
  readonly giveUpMs: number;
  readonly sockets?: SocketFactory;
  readonly clocks?: ProberClocks;
}

/**
 * Probes one target until it connects or `giveUpMs` has passed since its start. The next
 * attempt starts as soon as the previous one ended: a sleep between attempts would quantize.
 */
export async function measureSample(target: ProberTarget, options: ProberOptions): Promise<ProbeSample> {
  const sockets = options.sockets ?? tcpSockets;
  const clocks = options.clocks ?? systemClocks;
  const startEpochMs = target.startEpochMs;
  let alreadyElapsed = 0;
  let begin: number;
  if (startEpochMs === undefined) begin = clocks.monotonicMs();
  else {
    let now = clockPair(clocks);
    if (now.epochMs < startEpochMs) {
      // A start in the future: wait for it, then the sample starts on time.
      await new Promise((resolve) => setTimeout(resolve, startEpochMs - now.epochMs));
      now = clockPair(clocks);
    }
    alreadyElapsed = Math.max(0, now.epochMs - startEpochMs);
    begin = now.monotonicMs;
  }
  const outcomes: AttemptOutcome[] = [];
  for (;;) {
    const outcome = await attemptConnect(
      sockets,
      target.host,
      target.port,
      options.attemptTimeoutMs,
      clocks.monotonicMs,
    );
    outcomes.push(outcome);
    if (outcome.kind === 'connected') {
      return sampleOf(target, alreadyElapsed, outcomes, alreadyElapsed + outcome.atMs - begin);
    }
    if (alreadyElapsed + clocks.monotonicMs() - begin >= options.giveUpMs) {
      return sampleOf(target, alreadyElapsed, outcomes, null);
    }
  }
}

/** The samples one after the other (each its own start), summarized. */
export async function runServiceProber(
  targets: readonly ProberTarget[],
  options: ProberOptions,
): Promise<ServiceProberResult> {
  const samples: ProbeSample[] = [];
  for (const target of targets) samples.push(await measureSample(target, options));
  return proberResult(options.attemptTimeoutMs, options.giveUpMs, samples);
}

export interface WatchOptions extends ProberOptions {
  /** Called once every address's first attempt has ended: the prober is probing (E9's go signal). */
  readonly onProbing?: (probingSinceEpochMs: number) => void;
}

/**
 * E9's prober (prober first): every address probed at once, each in its own tight loop, from
 * before its Service exists until it connects or `giveUpMs` after probing began. Each attempt's
 * start is kept, as runs of one outcome, on the realtime clock read once and advanced by the
 * monotonic one, so the runner can place its Service's acceptance among them.
 */
export async function watchTargets(
  targets: readonly { readonly host: string; readonly port: number }[],
  options: WatchOptions,
): Promise<WatchProberOutput> {
  if (targets.length === 0) throw new Error('--target is required (host:port, may repeat)');
  const sockets = options.sockets ?? tcpSockets;
  const clocks = options.clocks ?? systemClocks;
  const { epochMs: epochAtStart, monotonicMs: monoAtStart } = clockPair(clocks);
  const epochNow = () => epochAtStart + (clocks.monotonicMs() - monoAtStart);
  let started = 0;
  const watchOne = async (target: { host: string; port: number }): Promise<WatchedTarget> => {
    const runs: AttemptRun[] = [];
    const outcomes: AttemptOutcome[] = [];
    let connectedAt: number | null = null;
    let firstStart: number | undefined;
    for (;;) {
      const start = epochNow();
      firstStart ??= start;
      const outcome = await attemptConnect(
        sockets,
        target.host,
        target.port,
        options.attemptTimeoutMs,
        epochNow,
      );
      // Probing is announced once every address's first attempt has ended, not when it was
      // started: node:net sends the SYN a tick after connect() (later still for a host name), and
      // a process starved right after the announcement could send it only after the Service
      // exists, which then answered the first attempt (a test on a loaded machine saw it).
      if (outcomes.length === 0 && ++started === targets.length) options.onProbing?.(epochAtStart);
      outcomes.push(outcome);
      addAttempt(runs, outcome.kind, start);
      if (outcome.kind === 'connected') {
        connectedAt = outcome.atMs;
        break;
      }
      if (epochNow() - epochAtStart >= options.giveUpMs) break;
    }
    const tally = sampleOf(target, 0, outcomes, connectedAt);
    return {
      target: tally.target,
      probingSinceEpochMs: firstStart ?? epochAtStart,
      connectedAtEpochMs: connectedAt,
      attempts: tally.attempts,
      refused: tally.refused,
      timedOut: tally.timedOut,
      otherErrors: tally.otherErrors,
      attemptRuns: runs,
    };
  };
  const watched = await Promise.all(targets.map(watchOne));
  return {
    probe: 'service-prober',
    mode: 'watch',
    attemptTimeoutMs: options.attemptTimeoutMs,
    giveUpMs: options.giveUpMs,
    watched,
  };
}
