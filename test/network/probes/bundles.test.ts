import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIGMAP_LIMIT_BYTES } from '../../../charts/study-runner.ts';
import {
  PROBE_NAMES,
  type ProbeName,
  probeBundle,
  probeBundles,
  probeCommand,
} from '../../../lib/network/probes/bundle.ts';
import type { ConntrackDriverResult } from '../../../lib/network/probes/conntrack-driver.ts';
import {
  type ServiceProberResult,
  type WatchProberOutput,
  watchResult,
} from '../../../lib/network/probes/service-prober.ts';
import type { SseClientResult, SseServerResult } from '../../../lib/network/probes/sse.ts';
import { closedPort } from './loopback.ts';

const dir = mkdtempSync(join(tmpdir(), 'lab-probes-'));

interface Exit {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a bundle with this machine's node, as the pod runs it with `node /probes/<name>.mjs`. */
function start(name: ProbeName, args: string[]): { child: ChildProcess; exit: Promise<Exit> } {
  const child = spawn(process.execPath, [join(dir, `${name}.mjs`), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk) => (stdout += chunk));
  child.stderr?.on('data', (chunk) => (stderr += chunk));
  const exit = new Promise<Exit>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, exit };
}

const run = (name: ProbeName, args: string[]) => start(name, args).exit;

/** The one JSON line a probe prints on success. */
function resultOf<T>(exit: Exit): T {
  expect(exit.code, exit.stderr).toBe(0);
  const lines = exit.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]) as T;
}

describe('probe bundles', () => {
  beforeAll(() => {
    for (const [file, text] of Object.entries(probeBundles())) writeFileSync(join(dir, file), text);
  });

  it('are self-contained ES modules (only node: built-ins imported), cached, and fit one ConfigMap', () => {
    const bundles = probeBundles();
    expect(Object.keys(bundles)).toEqual(PROBE_NAMES.map((name) => `${name}.mjs`));
    for (const text of Object.values(bundles)) {
      const imports = [...text.matchAll(/\bfrom\s*["']([^"']+)["']/g)].map((match) => match[1]);
      expect(imports.length).toBeGreaterThan(0);
      expect(imports.filter((specifier) => !specifier.startsWith('node:'))).toEqual([]);
      expect(text).not.toMatch(/\brequire\(/);
    }
    expect(probeBundle('sse-client')).toBe(bundles['sse-client.mjs']);
    const total = Object.values(bundles).reduce((sum, text) => sum + Buffer.byteLength(text), 0);
    expect(total).toBeLessThan(CONFIGMAP_LIMIT_BYTES / 4);
    expect(probeCommand('service-prober')).toEqual(['node', '/probes/service-prober.mjs']);
  });

  it('sse-server and sse-client measure a stream end to end', async () => {
    const server = start('sse-server', [
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--events',
      '50',
      '--interval-ms',
      '10',
      '--streams',
      '1',
    ]);
    const port = await new Promise<number>((resolve, reject) => {
      let seen = '';
      server.child.stderr?.on('data', (chunk) => {
        seen += chunk;
        const match = /listening on 127\.0\.0\.1:(\d+)/.exec(seen);
        if (match) resolve(Number(match[1]));
      });
      server.child.once('close', () => reject(new Error(`sse-server exited: ${seen}`)));
    });
    const client = resultOf<SseClientResult>(
      await run('sse-client', ['--url', `http://127.0.0.1:${port}/events`, '--expect-events', '50']),
    );
    expect(client).toMatchObject({ probe: 'sse-client', status: 200, events: 50, errors: [] });
    expect(client.gaps?.count).toBe(49);
    // Bounds a loaded machine cannot break (it stretched the mean gap to 30 ms, or bunches
    // arrivals); the in-process tests pin the gaps on a stepped clock. The server sends the last
    // event 490 ms after the request reached it at the earliest, so the arrivals span at least
    // 490 ms less the first one's wait, and at most until the stream ended.
    const first = client.firstEventMs ?? Number.NaN;
    const meanMs = client.gaps?.meanMs ?? Number.NaN;
    expect(meanMs * 49).toBeGreaterThanOrEqual(490 - first - 0.1);
    expect(meanMs * 49).toBeLessThanOrEqual(client.durationMs - first + 0.1);
    const served = resultOf<SseServerResult>(await server.exit);
    expect(served).toMatchObject({ probe: 'sse-server', streams: 1, abandoned: 0, eventsSent: 50 });
  });

  it('sse-client fails with a clear message on a refused connection, and on a bad flag', async () => {
    const port = await closedPort();
    const refused = await run('sse-client', ['--url', `http://127.0.0.1:${port}/events`]);
    expect(refused).toMatchObject({ code: 1, stdout: '' });
    expect(refused.stderr).toBe(
      `sse-client: cannot read http://127.0.0.1:${port}/events: connection refused (ECONNREFUSED)\n`,
    );
    const bad = await run('sse-client', ['--url', 'http://x/events', '--timeout-ms', '0']);
    expect(bad).toMatchObject({
      code: 1,
      stderr: "sse-client: --timeout-ms must be an integer >= 1, got '0'\n",
    });
  });

  it('service-prober and conntrack-driver refuse missing or bad settings with a clear message', async () => {
    expect(await run('service-prober', ['--samples', '3'])).toMatchObject({
      code: 1,
      stdout: '',
      stderr: 'service-prober: --target is required (host:port, may repeat)\n',
    });
    expect(await run('conntrack-driver', ['--connections', 'many'])).toMatchObject({
      code: 1,
      stderr: "conntrack-driver: --connections must be an integer from 1 to 1000000, got 'many'\n",
    });
  });

  describe('service-prober', () => {
    let server: Server;
    afterAll(() => server?.close());

    it('measures from the start it is given until a port opens after it started probing', async () => {
      const port = await closedPort();
      const startEpochMs = Date.now();
      const prober = start('service-prober', [
        '--mode',
        'sequential',
        '--target',
        `127.0.0.1:${port}@${startEpochMs}`,
        '--give-up-ms',
        '20000',
      ]);
      // Node can take long to start on a loaded machine: open the port only once the prober probes.
      await new Promise<void>((resolve) => {
        let seen = '';
        prober.child.stderr?.on('data', (chunk) => {
          seen += chunk;
          if (seen.includes('service-prober: probing 1 samples')) resolve();
        });
      });
      server = createServer((socket) => socket.destroy());
      await new Promise((resolve) => setTimeout(resolve, 200));
      const openedAfterMs = Date.now() - startEpochMs;
      server.listen(port, '127.0.0.1');
      const exit = await prober.exit;
      const exitedAfterMs = Date.now() - startEpochMs;
      const result = resultOf<ServiceProberResult>(exit);
      expect(result).toMatchObject({
        probe: 'service-prober',
        attemptTimeoutMs: 20,
        connected: 1,
        failed: 0,
      });
      const sample = result.samples[0];
      // Counted from the given start, which includes the prober's own start-up (firstAttemptAfterMs):
      // between the moment the port opened and the moment the prober had exited (Date.now() has
      // 1 ms steps), whatever the machine's load; the in-process tests bound the resolution.
      expect(sample.firstAttemptAfterMs).toBeLessThan(openedAfterMs);
      expect(sample.latencyMs).toBeGreaterThanOrEqual(openedAfterMs - 2);
      expect(sample.latencyMs).toBeLessThanOrEqual(exitedAfterMs + 1);
    });
  });

  describe('service-prober watch mode (E9: the prober runs first)', () => {
    const servers: Server[] = [];
    afterAll(() => {
      for (const s of servers) s.close();
    });

    /** Starts the prober on one closed port and resolves once its ready file says it probes. */
    async function watching(port: number) {
      const readyFile = join(dir, `probing-${port}.json`);
      const prober = start('service-prober', [
        '--target',
        `127.0.0.1:${port}`,
        '--give-up-ms',
        '20000',
        '--ready-file',
        readyFile,
      ]);
      // Until the file is there or the prober has ended (no time limit: node can take long to
      // start on a loaded machine; the test's own timeout ends a hang).
      let ended = false;
      void prober.exit.then(() => {
        ended = true;
      });
      while (!existsSync(readyFile) && !ended) await new Promise((r) => setTimeout(r, 50));
      expect(existsSync(readyFile), ended ? (await prober.exit).stderr : '').toBe(true);
      return prober;
    }

    it('times the datapath: probing before the address answers, from its acceptance to the connect', async () => {
      const port = await closedPort();
      const prober = await watching(port);
      await new Promise((resolve) => setTimeout(resolve, 100));
      // The "Service" is accepted when the port starts listening: stamped on the same clock.
      const server = createServer((socket) => socket.destroy());
      servers.push(server);
      const acceptedAt = Date.now();
      server.listen(port, '127.0.0.1');
      const exit = await prober.exit;
      const exitedAt = Date.now();
      const output = resultOf<WatchProberOutput>(exit);
      const result = watchResult(output, new Map([[`127.0.0.1:${port}`, acceptedAt]]));
      const [sample] = result.samples;
      expect(sample.attempts).toBeGreaterThan(1);
      expect(sample.attemptsAfterStart).toBeGreaterThanOrEqual(1);
      // From the acceptance to the connect: after the port opened, before the prober had exited
      // (both clocks in 1 ms steps), however long a loaded machine starved the prober meanwhile.
      expect(sample.latencyMs).toBeGreaterThanOrEqual(-1);
      expect(sample.latencyMs).toBeLessThanOrEqual(exitedAt - acceptedAt + 1);
      expect(result.method).toMatchObject({ firstAttemptConnects: 0, connectedBeforeStart: 0 });
      // The datapath verdict, unless the machine starved the prober: then E9's method check rightly
      // refuses the sample for it (its first attempt after the acceptance came late, or its
      // attempts were far apart), which a loaded machine makes happen (seen at a load of 20).
      const starved = /the prober was not probing when the Service was created|attempts were .* ms apart/;
      expect(result.method?.reasons.filter((reason) => !starved.test(reason))).toEqual([]);
      if (result.method?.verdict === 'method')
        console.warn(`watch mode sample refused: ${result.method.reasons}`);
    });

    it('catches the old order: an address that answers before the prober starts connects on its first attempt', async () => {
      const port = await closedPort();
      const server = createServer((socket) => socket.destroy());
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
      const acceptedAt = Date.now();
      const prober = await watching(port);
      const output = resultOf<WatchProberOutput>(await prober.exit);
      const result = watchResult(output, new Map([[`127.0.0.1:${port}`, acceptedAt]]));
      expect(result.samples[0].attempts).toBe(1);
      expect(result.method?.verdict).toBe('method');
      expect(result.method?.reasons[0]).toContain("connected on the prober's first attempt");
    });
  });

  it('conntrack-driver opens, holds and closes connections to its own listener', async () => {
    const result = resultOf<ConntrackDriverResult>(
      await run('conntrack-driver', ['--connections', '100', '--hold-ms', '100']),
    );
    expect(result).toMatchObject({
      probe: 'conntrack-driver',
      connections: 100,
      succeeded: 100,
      failed: 0,
      connectTimeoutMs: 5000,
      holdMs: 100,
    });
    expect(result.connect?.count).toBe(100);
  });
});
