import { describe, expect, it } from 'vitest';
import { ApiUnreachableError, withRetry } from '../../lib/runner/call-policy.ts';
import { pollUntil } from '../../lib/runner/poll.ts';
import { FakeClock } from './fakes.ts';

describe('pollUntil', () => {
  it('polls at its interval until done, announcing once and reporting on every poll', async () => {
    const clock = new FakeClock(0);
    const said: string[] = [];
    let waits = 0;
    const outcome = await pollUntil(
      async () => (clock.ms >= 12_000 ? { done: 'ready' } : { waiting: `at ${clock.ms}` }),
      {
        clock,
        timeoutMs: 60_000,
        intervalMs: 5_000,
        announce: async (w) => {
          said.push(w);
        },
        onWait: async () => {
          waits++;
        },
      },
    );
    expect(outcome).toEqual({ done: 'ready', afterMs: 15_000 });
    expect(said).toEqual(['at 0']);
    expect(waits).toBe(3);
  });

  it('times out with what it still waited for, after one last check at the deadline', async () => {
    const clock = new FakeClock(0);
    const outcome = await pollUntil(async () => ({ waiting: `at ${clock.ms}` }), {
      clock,
      timeoutMs: 10_000,
      intervalMs: 5_000,
    });
    expect(outcome).toEqual({ timedOut: 'at 10000', afterMs: 10_000 });
  });
});

describe('the outage limit of the error policy', () => {
  const refused = () =>
    Object.assign(new Error('connect ECONNREFUSED 10.43.0.1:443'), { code: 'ECONNREFUSED' });

  it('keeps trying a Kubernetes call past its tries while the outage is shorter than the limit', async () => {
    const clock = new FakeClock(0);
    const lines: string[] = [];
    const result = await withRetry(
      'get job/x',
      async () => {
        if (clock.ms < 4 * 60_000) throw refused();
        return 'answered';
      },
      {
        policy: { attempts: 5, initialDelayMs: 1_000, maxDelayMs: 30_000, outageMs: 10 * 60_000 },
        clock,
        log: (l) => {
          lines.push(l);
        },
      },
    );
    expect(result).toBe('answered');
    // 1, 2, 4, 8, 16 s, then every 30 s: the backoff is capped.
    expect(lines.slice(0, 7).map((l) => l.split(' (')[0])).toEqual([
      'retry 1 of get job/x in 1s',
      'retry 2 of get job/x in 2s',
      'retry 3 of get job/x in 4s',
      'retry 4 of get job/x in 8s',
      'retry 5 of get job/x in 16s',
      'retry 6 of get job/x in 30s',
      'retry 7 of get job/x in 30s',
    ]);
    expect(lines[6]).toContain('(failing for 1m01s, waiting up to 10m00s)');
  });

  it('gives up with ApiUnreachableError once the call has failed for the limit', async () => {
    const clock = new FakeClock(0);
    const call = withRetry('get job/x', async () => Promise.reject(refused()), {
      policy: { attempts: 5, initialDelayMs: 1_000, maxDelayMs: 30_000, outageMs: 2 * 60_000 },
      clock,
      log: () => undefined,
    });
    await expect(call).rejects.toBeInstanceOf(ApiUnreachableError);
    await expect(call).rejects.toThrow(
      /the Kubernetes API did not answer get job\/x for 2m\d\ds \(\d+ tries\): connect ECONNREFUSED/,
    );
    expect(clock.ms).toBeGreaterThanOrEqual(2 * 60_000);
    expect(clock.ms).toBeLessThan(3 * 60_000);
  });
});
