/** The engine's queues: client slots waiting at a replica, and step-end events. */

/** FIFO of client slots in a ring buffer; a slot is in at most one queue at a time. */
export class SlotQueue {
  private readonly items: Int32Array;
  private head = 0;
  size = 0;

  constructor(capacity: number) {
    this.items = new Int32Array(Math.max(1, capacity));
  }

  push(slot: number): void {
    this.items[(this.head + this.size) % this.items.length] = slot;
    this.size++;
  }

  peek(): number {
    return this.items[this.head] as number;
  }

  shift(): number {
    const slot = this.items[this.head] as number;
    this.head = (this.head + 1) % this.items.length;
    this.size--;
    return slot;
  }
}

/** Min-heap of step-end events, at most one per replica, ordered by (time, replica) for determinism. */
export class EventHeap {
  private readonly time: Float64Array;
  private readonly replica: Int32Array;
  size = 0;
  /** Time of the event the last pop() returned. */
  lastTime = 0;

  constructor(capacity: number) {
    this.time = new Float64Array(capacity);
    this.replica = new Int32Array(capacity);
  }

  push(time: number, replica: number): void {
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.lessThan(time, replica, parent)) break;
      this.move(parent, i);
      i = parent;
    }
    this.time[i] = time;
    this.replica[i] = replica;
  }

  /** Removes the earliest event and returns its replica; its time is left in lastTime. */
  pop(): number {
    const top = this.replica[0] as number;
    this.lastTime = this.time[0] as number;
    const n = --this.size;
    const time = this.time[n] as number;
    const replica = this.replica[n] as number;
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      const right = child + 1;
      if (right < n && this.lessThan(this.time[right] as number, this.replica[right] as number, child))
        child = right;
      if (this.lessThan(time, replica, child)) break;
      this.move(child, i);
      i = child;
    }
    this.time[i] = time;
    this.replica[i] = replica;
    return top;
  }

  private lessThan(time: number, replica: number, at: number): boolean {
    const t = this.time[at] as number;
    return time < t || (time === t && replica < (this.replica[at] as number));
  }

  private move(from: number, to: number): void {
    this.time[to] = this.time[from] as number;
    this.replica[to] = this.replica[from] as number;
  }
}
