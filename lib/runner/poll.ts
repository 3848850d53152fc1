import type { Clock } from './ports.ts';

/**
 * The one way the runner waits for something (a Job to end, a replica to serve, a log line to
 * appear): poll `check` every `intervalMs` until it is done or `timeoutMs` has passed since the
 * first check. While it waits, `onWait` runs once per poll (status.json and the progress line),
 * and `announce` once, with what it waits for, the first time the check is not done.
 */

/** What one check found: done (with its result), or still waiting, and for what. */
export type PollCheck<T> = { readonly done: T } | { readonly waiting: string };

export interface PollOptions {
  readonly clock: Clock;
  readonly timeoutMs: number;
  readonly intervalMs: number;
  /** Every poll that is not done: status.json, the progress line every minute. */
  readonly onWait?: () => Promise<void>;
  /** Once, the first time a check is not done: `waiting up to 10m00s for qwen3-1 ...`. */
  readonly announce?: (waiting: string) => Promise<void>;
}

/** The outcome: done with the check's result, or timed out with what it still waited for. */
export type PollOutcome<T> =
  | { readonly done: T; readonly afterMs: number }
  | { readonly timedOut: string; readonly afterMs: number };

export async function pollUntil<T>(
  check: () => Promise<PollCheck<T>>,
  options: PollOptions,
): Promise<PollOutcome<T>> {
  const { clock } = options;
  const start = clock.now().getTime();
  const deadline = start + options.timeoutMs;
  let announced = false;
  for (;;) {
    const found = await check();
    const now = clock.now().getTime();
    if ('done' in found) return { done: found.done, afterMs: now - start };
    if (now >= deadline) return { timedOut: found.waiting, afterMs: now - start };
    if (!announced) {
      announced = true;
      await options.announce?.(found.waiting);
    }
    await options.onWait?.();
    await clock.sleep(options.intervalMs);
  }
}
