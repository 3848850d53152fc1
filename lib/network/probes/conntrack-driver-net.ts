/** The socket side of the conntrack driver (E10): many connects at once, held, then closed. */
import { readFileSync } from 'node:fs';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import {
  type ConnectionOutcome,
  type ConntrackDriverResult,
  driverResult,
  failureCause,
  openFilesLimitOf,
} from './conntrack-driver.ts';
import { describeNetError, errorCode } from './net-errors.ts';

/** What the driver needs of a socket: node:net's Socket, or a fake in tests. */
export interface DrivenSocket {
  once(event: 'connect', listener: () => void): unknown;
  once(event: 'close', listener: () => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  destroy(): void;
}

export type DrivenSocketFactory = (host: string, port: number) => DrivenSocket;

export interface DriveOptions {
  readonly host: string;
  readonly port: number;
  readonly connections: number;
  readonly connectTimeoutMs: number;
  readonly holdMs: number;
  readonly sockets?: DrivenSocketFactory;
  readonly clock?: () => number;
}

/** One connection after its connect phase: its outcome (read after the hold) and its closer. */
interface Connection {
  outcome(): ConnectionOutcome;
  close(): void;
}

/** Starts one connect; resolves when it connected, failed, or hit the connect timeout. */
function connectOne(
  sockets: DrivenSocketFactory,
  options: DriveOptions,
  clock: () => number,
): Promise<Connection> {
  return new Promise((resolve) => {
    const started = clock();
    let socket: DrivenSocket | undefined;
    let settled = false;
    let closing = false;
    let dropped = false;
    const failed = (code: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket?.destroy();
      const outcome: ConnectionOutcome = { ok: false, cause: failureCause(code) };
      resolve({ outcome: () => outcome, close: () => {} });
    };
    const timer = setTimeout(() => failed('timeout'), options.connectTimeoutMs);
    try {
      socket = sockets(options.host, options.port);
    } catch (error) {
      failed(errorCode(error) ?? 'ERROR');
      return;
    }
    const connected = socket;
    // After the connect phase an error only means the peer went away; 'close' records that.
    connected.on('error', (error) => failed(errorCode(error) ?? 'ERROR'));
    connected.once('connect', () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const connectMs = clock() - started;
      connected.once('close', () => {
        if (!closing) dropped = true;
      });
      resolve({
        outcome: () => ({ ok: true, connectMs, droppedDuringHold: dropped }),
        close: () => {
          closing = true;
          connected.destroy();
        },
      });
    });
  });
}

/**
 * Opens `connections` connections at once, waits until each one connected or failed (at most the
 * connect timeout), holds the connected ones for `holdMs`, then closes them all. Returns the
 * outcomes in connect order and how long issuing the connects took (ms).
 */
export async function driveConnections(
  options: DriveOptions,
): Promise<{ outcomes: ConnectionOutcome[]; issuedInMs: number }> {
  const sockets = options.sockets ?? ((host: string, port: number) => connect({ host, port }));
  const clock = options.clock ?? (() => performance.now());
  const first = clock();
  const pending: Promise<Connection>[] = [];
  for (let i = 0; i < options.connections; i++) pending.push(connectOne(sockets, options, clock));
  const issuedInMs = clock() - first;
  const connections = await Promise.all(pending);
  await new Promise((resolve) => setTimeout(resolve, options.holdMs));
  const outcomes = connections.map((connection) => connection.outcome());
  for (const connection of connections) connection.close();
  return { outcomes, issuedInMs };
}

/** A loopback listener that accepts and holds connections, for a driver given no port. */
export async function startSink(host: string): Promise<{ port: number; close: () => Promise<void> }> {
  const accepted = new Set<Socket>();
  const server = createServer((socket) => {
    accepted.add(socket);
    socket.on('error', () => {});
    socket.once('close', () => accepted.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) =>
      reject(new Error(`cannot listen on ${host}: ${describeNetError(error)}`)),
    );
    // A deep accept queue: the kernel caps it at net.core.somaxconn.
    server.listen({ host, port: 0, backlog: 65_535 }, resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const socket of accepted) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function openFilesLimit(): number | null {
  try {
    return openFilesLimitOf(readFileSync('/proc/self/limits', 'utf8'));
  } catch {
    return null;
  }
}

export interface ConntrackDriverOptions extends Omit<DriveOptions, 'port'> {
  /** The port to connect to; 0: the driver's own loopback listener on `host`. */
  readonly port: number;
}

/** The whole E10 step: (own listener,) drive the connections, summarize. */
export async function runConntrackDriver(options: ConntrackDriverOptions): Promise<ConntrackDriverResult> {
  const sink = options.port === 0 ? await startSink(options.host) : undefined;
  const port = sink?.port ?? options.port;
  try {
    const { outcomes, issuedInMs } = await driveConnections({ ...options, port });
    return driverResult({
      target: `${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}`,
      connectTimeoutMs: options.connectTimeoutMs,
      holdMs: options.holdMs,
      outcomes,
      issuedInMs,
      openFilesLimit: openFilesLimit(),
    });
  } finally {
    await sink?.close();
  }
}
