import { createServer, type Server } from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  binomialTail,
  parseProberTarget,
  quantizationCheck,
  rayleighP,
  samplePlan,
} from '../../../lib/network/probes/service-prober.ts';
import {
  attemptConnect,
  clockPair,
  measureSample,
  runServiceProber,
  type SocketFactory,
  watchTargets,
} from '../../../lib/network/probes/service-prober-net.ts';
import { Answered, DroppedSyn, RefusedAfter } from './fake-sockets.ts';
import { closedPort, withLoopLag } from './loopback.ts';

describe('service prober targets', () => {
  it('reads host:port with an optional start in epoch ms', () => {
    expect(parseProberTarget('10.43.0.12:80')).toEqual({ host: '10.43.0.12', port: 80 });
    expect(parseProberTarget('10.43.0.12:80@1767225600123.5')).toEqual({
      host: '10.43.0.12',
      port: 80,
      startEpochMs: 1767225600123.5,
    });
    expect(() => parseProberTarget('10.43.0.12:80@soon')).toThrow(
      "--target start after '@' must be ms since the Unix epoch, got 'soon'",
    );
  });

  it('repeats one target for --samples, and only one target without a start', () => {
    const target = { host: 'a', port: 1 };
    expect(samplePlan([target], 3)).toEqual([target, target, target]);
    expect(samplePlan([target, target], 1)).toHaveLength(2);
    expect(() => samplePlan([target, target], 20)).toThrow(
      '--samples 20 repeats one --target without a start time; with 2 targets each target is one sample',
    );
    expect(() => samplePlan([], 1)).toThrow('--target is required (host:port[@startEpochMs], may repeat)');
  });
});

describe('quantization check (E9 validity, reused by the network study)', () => {
  it('flags the manual study symptom: latencies on multiples of a 200 ms attempt limit', () => {
    const check = quantizationCheck([200, 400, 200, 600, 400, 200, 400, 200], 200);
    expect(check.verdict).toBe('clustered');
    expect(check.onMultiples).toBe(8);
    expect(check.reason).toContain('8 of 8 samples within 20 ms of a multiple of 200 ms');
  });

  it('flags multiples shifted by a constant (a round trip), through the phases', () => {
    const shifted = [3, 4, 7, 10, 15, 22, 26, 31, 40, 55].map((k) => k * 20 + 7.3);
    const check = quantizationCheck(shifted, 20);
    expect(check.onMultiples).toBe(0);
    expect(check.phaseP).toBeLessThan(1e-4);
    expect(check.verdict).toBe('clustered');
    expect(check.reason).toContain("the samples' phases modulo 20 ms are concentrated");
  });

  it('passes latencies unrelated to the step', () => {
    // Spread deterministically over 100 .. 1100 ms (golden-ratio sequence).
    const latencies = Array.from({ length: 20 }, (_, i) => 100 + ((i * 0.618034 * 1000) % 1000));
    const check = quantizationCheck(latencies, 20);
    expect(check).toMatchObject({ verdict: 'not-clustered', considered: 20 });
    expect(check.phaseP).toBeGreaterThan(0.01);
  });

  it('does not judge phases of a tight cluster, and needs enough samples', () => {
    const tight = quantizationCheck([1005, 1006, 1005.5, 1006.5, 1007, 1005.2], 20);
    expect(tight).toMatchObject({ verdict: 'not-clustered', phaseP: null, onMultiples: 0 });
    expect(quantizationCheck([0.2, 0.3, 200, 400], 200)).toMatchObject({
      verdict: 'too-few',
      considered: 2,
      reason: '2 samples of at least 100 ms; the check needs 5',
    });
    expect(() => quantizationCheck([1], 0)).toThrow('quantization step must be > 0 ms, got 0');
  });

  it('computes its tail probabilities', () => {
    expect(binomialTail(5, 3, 0.2)).toBeCloseTo(0.05792, 5);
    expect(binomialTail(5, 0, 0.2)).toBe(1);
    expect(binomialTail(20, 20, 0.2)).toBeCloseTo(0.2 ** 20, 25);
    expect(rayleighP(20, 20)).toBeLessThan(1e-8);
    expect(rayleighP(20, 0)).toBe(1);
  });
});

describe('connect attempts', () => {
  it('ends an attempt whose SYN is dropped at the attempt timeout and destroys its socket', async () => {
    const socket = new DroppedSyn();
    const { value: outcome, tookMs } = await onFakeTime(() =>
      attemptConnect(
        () => socket,
        '10.43.0.12',
        80,
        20,
        () => Date.now(),
      ),
    );
    expect(outcome).toEqual({ kind: 'timeout' });
    expect(socket.destroyed).toBe(true);
    // Exactly its timeout: the decision waits one loop turn (setImmediate), not more time.
    expect(tookMs).toBe(20);
  });

  it('classifies refused and other errors by code', async () => {
    const clock = () => performance.now();
    expect(await attemptConnect(() => new Answered('ECONNREFUSED'), 'h', 1, 20, clock)).toEqual({
      kind: 'refused',
    });
    expect(await attemptConnect(() => new Answered('EHOSTUNREACH'), 'h', 1, 20, clock)).toEqual({
      kind: 'error',
      code: 'EHOSTUNREACH',
    });
    const throwing: SocketFactory = () => {
      throw Object.assign(new Error('too many'), { code: 'EMFILE' });
    };
    expect(await attemptConnect(throwing, 'h', 1, 20, clock)).toEqual({ kind: 'error', code: 'EMFILE' });
  });

  it('does not take a loopback connect to itself for the target answering', async () => {
    const self = Object.assign(new Answered(), {
      localAddress: '127.0.0.1',
      localPort: 40001,
      remoteAddress: '127.0.0.1',
      remotePort: 40001,
    });
    expect(
      await attemptConnect(
        () => self,
        '127.0.0.1',
        40001,
        20,
        () => 0,
      ),
    ).toEqual({
      kind: 'error',
      code: 'SELF_CONNECT',
    });
  });

  it('counts dropped attempts until the rule exists, then connects', async () => {
    // The rule appears 95 ms after the first attempt (the sample's start, on its own clock).
    let programmedAt: number | undefined;
    const sockets: SocketFactory = () => {
      programmedAt ??= Date.now() + 95;
      return Date.now() < programmedAt ? new DroppedSyn() : new Answered();
    };
    const clocks = { monotonicMs: () => Date.now(), epochMs: () => Date.now() };
    const { value: sample } = await onFakeTime(() =>
      measureSample(
        { host: '10.43.0.12', port: 80 },
        { attemptTimeoutMs: 20, giveUpMs: 5_000, sockets, clocks },
      ),
    );
    // Attempts back to back, each ended at its 20 ms (0, 20, .. 80), then the one at 100 connects:
    // the resolution with dropped SYNs is one attempt timeout. On fake time, so that a starved
    // test process cannot stretch an attempt (on real time a loaded machine once let one
    // attempt last past the 95 ms).
    expect(sample).toMatchObject({ connected: true, timedOut: 5, attempts: 6, latencyMs: 100 });
  });

  // Also on fake time: a loaded machine stretches real attempts (a CI run once measured two of its
  // delays under 100 ms), and a sample's phases modulo 20 ms then become noise; here each refusal
  // takes 1 ms, so only the prober's own loop decides when the connect comes.
  it('measures a port that starts answering after a delay exactly that delay, in a tight loop of refused attempts', async () => {
    const latencies: number[] = [];
    // Phases modulo 20 ms spread evenly (3, 6, 9, 12, 15, 18): the delays themselves do not cluster.
    for (const delayMs of [103, 126, 149, 172, 195, 218]) {
      let opensAt: number | undefined;
      const sockets: SocketFactory = () => {
        opensAt ??= Date.now() + delayMs;
        return Date.now() < opensAt ? new RefusedAfter(1) : new Answered();
      };
      const clocks = { monotonicMs: () => Date.now(), epochMs: () => Date.now() };
      const { value: sample } = await onFakeTime(() =>
        measureSample(
          { host: '10.43.0.12', port: 80 },
          { attemptTimeoutMs: 20, giveUpMs: 5_000, sockets, clocks },
        ),
      );
      // One attempt right after the other: no sleep between them, no wait for the 20 ms timeout.
      expect(sample).toMatchObject({ connected: true, latencyMs: delayMs, refused: delayMs, timedOut: 0 });
      expect(sample.attempts).toBe(delayMs + 1);
      latencies.push(sample.latencyMs ?? Number.NaN);
    }
    // So the latencies do not sit on multiples of the 20 ms attempt timeout, nor of 200 ms.
    expect(quantizationCheck(latencies, 20).verdict).toBe('not-clustered');
    expect(quantizationCheck(latencies, 200).verdict).toBe('not-clustered');
  });
});

describe('the wall clock paired with the monotonic one', () => {
  it('reads the pair again when the process stalled between the two reads, and keeps the tightest', () => {
    // Monotonic reads around each wall clock read; a 40 ms stall after the first one.
    const monotonic = [0, 40, 40.2, 40.5];
    const epoch = [1_000_040, 1_000_040];
    const clocks = { monotonicMs: () => monotonic.shift() ?? 99, epochMs: () => epoch.shift() ?? 99 };
    expect(clockPair(clocks)).toEqual({ epochMs: 1_000_040, monotonicMs: 40.2 });
    // Always stalled: ten tries, then the tightest pair (the second: 3 ms).
    const spreads = [5, 3, 8, 4, 9, 6, 7, 5, 8, 6];
    const reads = spreads.flatMap((spread, i) => [100 * i, 100 * i + spread]);
    let tries = 0;
    const slow = { monotonicMs: () => reads.shift() ?? Number.NaN, epochMs: () => 10_000 + tries++ };
    expect(clockPair(slow)).toEqual({ epochMs: 10_001, monotonicMs: 100 });
    expect(reads).toEqual([]);
  });

  it('times a sample from a start in epoch ms right when the process stalled between the reads', async () => {
    // A model of time: each monotonic read moves it 0.1 ms; the first wall clock read is followed
    // by a 40 ms stall (the process preempted). Read singly, the sample lost those 40 ms.
    let t = 0;
    let stalls = 1;
    const clocks = {
      monotonicMs: () => {
        t += 0.1;
        return t - 0.1;
      },
      epochMs: () => {
        const now = 1_000_000 + t;
        if (stalls-- > 0) t += 40;
        return now;
      },
    };
    const sample = await measureSample(
      { host: '10.43.0.12', port: 80, startEpochMs: 1_000_000 - 100 },
      { attemptTimeoutMs: 20, giveUpMs: 5_000, sockets: () => new Answered(), clocks },
    );
    // The connect's real moment on the wall clock, less the start: 100 ms before, 40 stalled.
    const trueLatency = t + 100;
    expect(sample.latencyMs).toBeGreaterThan(trueLatency - 0.5);
    expect(sample.latencyMs).toBeLessThanOrEqual(trueLatency);
  });
});

describe('watch mode: the go signal', () => {
  // The runner creates the Services once the prober says it is probing. Said when the first
  // attempt had only been started, node:net had not sent its SYN yet (it does a tick later), and a
  // prober starved right then (a loaded test machine) sent it only after the address answered.
  it('says it is probing only once every address has had a first attempt that ended', async () => {
    const events: string[] = [];
    let made = 0;
    const sockets: SocketFactory = (host) => {
      const n = ++made;
      events.push(`attempt ${n} on ${host}`);
      // The first attempt on each address is refused, the next one connects.
      const socket = n <= 2 ? new Answered('ECONNREFUSED') : new Answered();
      socket.once('error', () => events.push(`attempt ${n} refused`));
      return socket;
    };
    const output = await watchTargets(
      [
        { host: 'a', port: 80 },
        { host: 'b', port: 80 },
      ],
      { attemptTimeoutMs: 20, giveUpMs: 5_000, sockets, onProbing: () => events.push('probing') },
    );
    expect(events.slice(0, 2)).toEqual(['attempt 1 on a', 'attempt 2 on b']);
    const probing = events.indexOf('probing');
    expect(events.filter((e) => e === 'probing')).toHaveLength(1);
    expect(events.indexOf('attempt 1 refused')).toBeGreaterThan(0);
    expect(events.indexOf('attempt 1 refused')).toBeLessThan(probing);
    expect(events.indexOf('attempt 2 refused')).toBeGreaterThan(0);
    expect(events.indexOf('attempt 2 refused')).toBeLessThan(probing);
    expect(output.watched.map((w) => [w.attempts, w.refused, w.connectedAtEpochMs !== null])).toEqual([
      [2, 1, true],
      [2, 1, true],
    ]);
  });
});

/**
 * Runs `work` on vitest's fake timers (setTimeout and Date; setImmediate stays real: a loop turn,
 * no time), moving time from timer to
 * timer until it settles: every attempt lasts exactly what its timers say, however starved the
 * process is. Returns its value and the fake time it took.
 */
async function onFakeTime<T>(work: () => Promise<T>): Promise<{ value: T; tookMs: number }> {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  try {
    const begin = Date.now();
    let settled = false;
    const running = work().finally(() => {
      settled = true;
    });
    for (let timers = 0; !settled; timers++) {
      if (timers > 10_000) throw new Error('still running after 10,000 timers');
      await vi.advanceTimersToNextTimerAsync();
    }
    return { value: await running, tookMs: Date.now() - begin };
  } finally {
    vi.useRealTimers();
  }
}

describe('service prober on loopback', () => {
  const servers: Server[] = [];
  afterEach(() => {
    for (const server of servers.splice(0)) server.close();
  });

  /** Measures one sample while a listener appears on the port after `delayMs`. */
  async function delayedListener(delayMs: number) {
    const port = await closedPort();
    const server = createServer((socket) => socket.destroy());
    servers.push(server);
    let listenedAt = Number.NaN;
    setTimeout(() => {
      listenedAt = performance.now();
      server.listen(port, '127.0.0.1');
    }, delayMs);
    // The sample's own start is its first clock reading; compare the listen moment with that.
    let sampleBegin: number | undefined;
    const clocks = {
      monotonicMs: () => {
        const now = performance.now();
        sampleBegin ??= now;
        return now;
      },
      epochMs: () => Date.now(),
    };
    const { value: sample, lagMs } = await withLoopLag(() =>
      measureSample({ host: '127.0.0.1', port }, { attemptTimeoutMs: 20, giveUpMs: 10_000, clocks }),
    );
    const begin = sampleBegin ?? Number.NaN;
    return { sample, listenedAfterMs: listenedAt - begin, returnedAfterMs: performance.now() - begin, lagMs };
  }

  it('measures a port that starts listening after a delay close to that delay, across delays', async () => {
    const lateBy: number[] = [];
    for (const delayMs of [203, 226, 249, 272, 295, 318]) {
      const { sample, listenedAfterMs, returnedAfterMs, lagMs } = await delayedListener(delayMs);
      expect(sample.connected).toBe(true);
      const latency = sample.latencyMs ?? Number.NaN;
      // After the moment the port really opened, before the sample returned (on a loaded machine
      // the gap between the two is what the machine made it; the fake-time test above pins the
      // loop itself).
      expect(latency).toBeGreaterThanOrEqual(listenedAfterMs - 1);
      expect(latency).toBeLessThanOrEqual(returnedAfterMs);
      // Every failed attempt was refused; a busy event loop may fire an attempt's 20 ms timer
      // before it reads the RST, which counts that attempt as timed out.
      expect(sample.refused + sample.timedOut, JSON.stringify(sample)).toBe(sample.attempts - 1);
      expect(sample.otherErrors).toEqual({});
      // The first SYN goes a tick after the sample starts, before any timer: the listen's.
      expect(sample.attempts).toBeGreaterThan(1);
      lateBy.push(latency - listenedAfterMs - lagMs);
    }
    // Typically within a few ms of the real moment, once the event-loop lag this process suffered
    // is allowed for (a prober rounding to 200 ms would be ~50 ms off, the 20 ms timeout ~10).
    expect(lateBy.sort((a, b) => a - b)[lateBy.length / 2]).toBeLessThan(10);
  });

  it('counts time from a start given in epoch ms, and gives up on a port that never opens', async () => {
    const port = await closedPort();
    const server = createServer((socket) => socket.destroy());
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    const called = Date.now();
    const started = called - 500;
    const late = await measureSample(
      { host: '127.0.0.1', port, startEpochMs: started },
      { attemptTimeoutMs: 20, giveUpMs: 5_000 },
    );
    const returned = Date.now();
    // Counted from the given start: bracketed by this process's clock before and after the call
    // (Date.now() has 1 ms steps), however long a loaded machine made the connect take.
    expect(late.firstAttemptAfterMs).toBeGreaterThanOrEqual(called - started - 1);
    expect(late.latencyMs).toBeGreaterThanOrEqual(late.firstAttemptAfterMs);
    expect(late.latencyMs).toBeLessThanOrEqual(returned - started + 1);

    const never = await closedPort();
    const result = await runServiceProber([{ host: '127.0.0.1', port: never }], {
      attemptTimeoutMs: 20,
      giveUpMs: 100,
    });
    expect(result).toMatchObject({ connected: 0, failed: 1, latency: null });
    const [sample] = result.samples;
    expect(sample).toMatchObject({ connected: false, latencyMs: null, otherErrors: {} });
    expect(sample.refused + sample.timedOut).toBe(sample.attempts); // see the delays test
    expect(result.quantization.verdict).toBe('too-few');
  });
});
