import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';

async function canBind(port: number): Promise<boolean> {
  const server = createServer();
  const bound = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (bound) await new Promise<void>((resolve) => server.close(() => resolve()));
  return bound;
}

/** The kernel's ephemeral port range (local ports of outgoing connections). */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    return [Number(low), Number(high)];
  } catch {
    return [32768, 60999];
  }
}

/**
 * A loopback port nothing listens on, below the ephemeral range: a tight loop of connects to a
 * closed port inside that range can connect to itself (see isSelfConnect) and hold the port.
 */
export async function closedPort(): Promise<number> {
  const [low] = ephemeralRange();
  const floor = Math.min(10_000, low - 1_000);
  for (let tries = 0; tries < 200; tries++) {
    const port = floor + Math.floor(Math.random() * (low - floor));
    if (await canBind(port)) return port;
  }
  throw new Error(`no free loopback port found between ${floor} and ${low}`);
}

/**
 * Runs `work` and returns the worst event-loop lag (ms) this process suffered meanwhile. On a
 * loaded 2-core machine a test process can be starved; no probe can see a socket event while it
 * does not run, so timing bounds add this lag instead of guessing a margin.
 */
export async function withLoopLag<T>(work: () => Promise<T>): Promise<{ value: T; lagMs: number }> {
  const lag = monitorEventLoopDelay({ resolution: 1 });
  lag.enable();
  try {
    const value = await work();
    // The monitor records a stall when its own timer fires next: a stall in the loop turn that
    // ended the work (a connect that came late) was not recorded yet. A timer due after the
    // monitor's runs after it (a test once saw 38 ms of latency past its bound with 1 ms of lag).
    await new Promise((resolve) => setTimeout(resolve, 3));
    return { value, lagMs: lag.max / 1e6 };
  } finally {
    lag.disable();
  }
}

/** Polls `condition` every 10 ms until it holds or `timeoutMs` passed; returns whether it held. */
export async function eventually(condition: () => boolean, timeoutMs = 5_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  return condition();
}
