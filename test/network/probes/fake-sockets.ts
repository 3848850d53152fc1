import { EventEmitter } from 'node:events';

/**
 * Fake sockets for the paths loopback cannot produce reliably. They satisfy both the prober's
 * AttemptSocket and the driver's DrivenSocket (EventEmitter gives once/on).
 */

/** A connect whose SYN goes unanswered (no rule yet, or a full conntrack table): never ends. */
export class DroppedSyn extends EventEmitter {
  destroyed = false;
  destroy(): void {
    this.destroyed = true;
  }
}

/** A connect that succeeds, or fails with `code`, on the next turn of the event loop. */
export class Answered extends EventEmitter {
  constructor(code?: string) {
    super();
    setImmediate(() => {
      if (code === undefined) this.emit('connect');
      else this.emit('error', Object.assign(new Error(code), { code }));
    });
  }
  destroy(): void {}
}

/** A connect refused after `ms` (a loopback RST takes about 0.4 ms): on fake timers, time passes. */
export class RefusedAfter extends EventEmitter {
  constructor(ms: number) {
    super();
    setTimeout(
      () => this.emit('error', Object.assign(new Error('ECONNREFUSED'), { code: 'ECONNREFUSED' })),
      ms,
    );
  }
  destroy(): void {}
}
