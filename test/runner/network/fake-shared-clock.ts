import { FakeClock } from '../fake-servers.ts';

/**
 * The fake cell's clock when several runs wait at once (a smoke study's schedule): time is one
 * line for everyone. A sleep does not move time by itself; once every waiter is asleep (the
 * microtasks drained and no real file I/O in flight), time jumps to the earliest wake-up and
 * wakes everyone due then. Two runs polling their Jobs every second for ten seconds take ten
 * seconds together, not twenty, as on a cell. One waiter alone sees exactly FakeClock's time.
 */
export class SharedFakeClock extends FakeClock {
  private sleepers: { wakeMs: number; resolve: () => void }[] = [];
  /** Real I/O in flight (file writes of the result store): time stands still until it ends. */
  private busy = 0;
  private settling = false;

  override sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.sleepers.push({ wakeMs: this.ms + Math.max(0, ms), resolve });
      this.settleSoon();
    });
  }

  /**
   * `target` with every call that returns a promise counted as I/O outside fake time (and the
   * objects its calls return, such as a study's files, the same way).
   */
  outsideTime<T extends object>(target: T): T {
    return new Proxy(target, {
      get: (object, key, receiver) => {
        const value = Reflect.get(object, key, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          const result = value.apply(object, args);
          if (result instanceof Promise) return this.during(result);
          return result !== null && typeof result === 'object' ? this.outsideTime(result) : result;
        };
      },
    });
  }

  private async during<T>(io: Promise<T>): Promise<T> {
    this.busy++;
    try {
      return await io;
    } finally {
      this.busy--;
      this.settleSoon();
    }
  }

  /** After the microtasks of this turn (setImmediate runs once they are drained). */
  private settleSoon(): void {
    if (this.settling) return;
    this.settling = true;
    setImmediate(() => {
      this.settling = false;
      if (this.busy > 0 || this.sleepers.length === 0) return;
      this.ms = Math.max(this.ms, Math.min(...this.sleepers.map((s) => s.wakeMs)));
      const due = this.sleepers.filter((s) => s.wakeMs <= this.ms);
      this.sleepers = this.sleepers.filter((s) => s.wakeMs > this.ms);
      for (const s of due) s.resolve();
    });
  }
}
