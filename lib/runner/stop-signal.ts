import { AsyncLocalStorage } from 'node:async_hooks';
import type { Clock } from './ports.ts';

/**
 * A runner told to stop (docs/runner.md, "When the runner's pod is deleted"): SIGTERM when its pod
 * is deleted (`lab stop`, a node drain, the host ending, `lab uninstall`), SIGINT from a terminal.
 * Kubelet waits the pod's terminationGracePeriodSeconds (30 s by default, 300 s with the results
 * uploader) and then kills it (docs/facts.md §6.5), so the runner stops at once and cleans up
 * within a bounded time:
 *
 * - from the request on, every wait of the runner ends by throwing `RunnerInterruptedError` (the
 *   clock's sleep is where every wait and every retry waits: poll.ts, call-policy.ts), and no new
 *   run or Job starts;
 * - cleanup sections (`cleanup`) keep their waits, until `cleanupMs` after the request: the
 *   staged clients dropped, the lab's client Jobs deleted, an E10 step's conntrack limit restored.
 */

/** How long after the signal the cleanup's waits may go on: well inside the default 30 s grace period. */
export const STOP_CLEANUP_MS = 15_000;

/** When the process exits whatever the runner is doing (a call that hangs), after the signal. */
export const STOP_EXIT_MS = 25_000;

/** The study stopped because the runner was told to stop: `interrupted`, resumed by `lab run`. */
export class RunnerInterruptedError extends Error {
  constructor(readonly signal: string) {
    super(
      `the runner received ${signal} (its pod is being deleted: lab stop, a node drain, the host ending or lab uninstall)`,
    );
    this.name = 'RunnerInterruptedError';
  }
}

/** Marks the sleeps that run inside a cleanup section (the async calls below `cleanup`). */
const inCleanup = new AsyncLocalStorage<true>();
const interruptible = new WeakSet<Clock>();

export class StopRequest {
  private error: RunnerInterruptedError | undefined;
  private requestedAtMs = 0;
  private readonly waiting = new Set<(error: RunnerInterruptedError) => void>();
  /** Cleanup sleeps begun before the request: the request cuts each to the cleanup's deadline. */
  private readonly cuts = new Set<() => void>();

  /** `clock` is the runner's own: the cleanup's deadline runs on it (a fake clock in tests). */
  constructor(
    private readonly clock: Clock,
    private readonly cleanupMs = STOP_CLEANUP_MS,
  ) {}

  /** The runner is told to stop (the first request counts); every wait going on ends now. */
  request(signal: string): void {
    if (this.error) return;
    this.error = new RunnerInterruptedError(signal);
    this.requestedAtMs = this.clock.now().getTime();
    for (const stop of this.waiting) stop(this.error);
    this.waiting.clear();
    for (const cut of this.cuts) cut();
    this.cuts.clear();
  }

  /** The stop, once requested. */
  get requested(): RunnerInterruptedError | undefined {
    return this.error;
  }

  /** Before starting something new (a run, a Job): nothing starts after the request. */
  throwIfRequested(): void {
    if (this.error) throw this.error;
  }

  /**
   * `inner` with sleeps that end by throwing once the stop is requested, also a sleep going on
   * then; inside a cleanup section a sleep goes on, shortened to the cleanup's deadline, and
   * throws only after it.
   */
  clockOf(inner: Clock): Clock {
    if (interruptible.has(inner)) return inner;
    const clock: Clock = {
      now: () => inner.now(),
      sleep: async (ms) => {
        if (inCleanup.getStore()) {
          if (!this.error) return this.cleanupSleep(inner, ms);
          const left = this.requestedAtMs + this.cleanupMs - inner.now().getTime();
          if (left <= 0) throw this.error;
          return inner.sleep(Math.min(ms, left));
        }
        this.throwIfRequested();
        await new Promise<void>((resolve, reject) => {
          this.waiting.add(reject);
          inner.sleep(ms).then(
            () => {
              this.waiting.delete(reject);
              resolve();
            },
            (error: unknown) => {
              this.waiting.delete(reject);
              reject(error);
            },
          );
        });
      },
    };
    interruptible.add(clock);
    return clock;
  }

  /**
   * A cleanup sleep begun before any request. A request during it cuts it to the cleanup's
   * deadline: left alone, a retry's backoff (up to 30 s, call-policy.ts) outlived the cleanup time
   * and even STOP_EXIT_MS, and the process exited before the cleanup after it (the lab's client
   * Jobs deleted) had begun.
   */
  private cleanupSleep(inner: Clock, ms: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        this.cuts.delete(cut);
        resolve();
      };
      const failed = (error: unknown) => {
        this.cuts.delete(cut);
        reject(error);
      };
      const end = inner.now().getTime() + ms;
      const cut = () => {
        const deadline = this.requestedAtMs + this.cleanupMs;
        if (end > deadline) inner.sleep(deadline - inner.now().getTime()).then(done, failed);
      };
      this.cuts.add(cut);
      inner.sleep(ms).then(done, failed);
    });
  }

  /** Runs `work` as cleanup: its waits go on after the request, until the cleanup's deadline. */
  cleanup<T>(work: () => Promise<T>): Promise<T> {
    return inCleanup.run(true, work);
  }
}

/** `work` as cleanup when the runner can be stopped, else as it is. */
export function asCleanup<T>(stop: StopRequest | undefined, work: () => Promise<T>): Promise<T> {
  return stop ? stop.cleanup(work) : work();
}

/** The runner's I/O with its clock interruptible by `stop` (unchanged without one). */
export function withStop<D extends { readonly clock: Clock; readonly stop?: StopRequest }>(deps: D): D {
  return deps.stop ? { ...deps, clock: deps.stop.clockOf(deps.clock) } : deps;
}

/** The exit code of a process ended by a signal, as a shell reports it (128 + the signal's number). */
export function signalExitCode(signal: string): number {
  return 128 + (signal === 'SIGINT' ? 2 : signal === 'SIGTERM' ? 15 : 1);
}

/** The part of `process` the runner's entry listens on (a fake in tests). */
export interface SignalSource {
  on(signal: 'SIGTERM' | 'SIGINT', listener: () => void): unknown;
}

/**
 * The runner's entry: SIGTERM or SIGINT requests the stop and says so; the process exits after
 * `STOP_EXIT_MS` at the latest (the runner exits earlier, once its cleanup is done), and at once on
 * a second signal.
 */
export function stopOnSignals(
  source: SignalSource,
  stop: StopRequest,
  io: {
    readonly log: (line: string) => void;
    readonly exit: (code: number) => void;
    readonly exitAfterMs?: number;
  },
): void {
  const received = (signal: 'SIGTERM' | 'SIGINT') => {
    if (stop.requested) {
      io.log(`${signal} again: exiting now`);
      io.exit(signalExitCode(signal));
      return;
    }
    io.log(
      `${signal} received: stopping the study (the run in progress is run again when lab run resumes it)`,
    );
    stop.request(signal);
    const timer = setTimeout(() => {
      io.log(
        `the runner did not end within ${(io.exitAfterMs ?? STOP_EXIT_MS) / 1000}s of ${signal}: exiting`,
      );
      io.exit(signalExitCode(signal));
    }, io.exitAfterMs ?? STOP_EXIT_MS);
    timer.unref?.();
  };
  // Listening replaces Node's default (exit at once, no cleanup); a later signal exits at once.
  source.on('SIGTERM', () => received('SIGTERM'));
  source.on('SIGINT', () => received('SIGINT'));
}
