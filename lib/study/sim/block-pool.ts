/** One vLLM replica's KV block pool: hash-chained full blocks, an LRU free queue, pinned blocks. */

const NONE = -1;

/**
 * One replica's KV blocks, vLLM v1 style. A block is pinned while its reference count is positive; at
 * zero it sits in the free queue (head = next to evict) and keeps its content key, so it can still be
 * hit until it is reallocated. Keys are (prefix, block index) chain positions; a key can have several
 * physical copies when a chain was recomputed after a middle block was evicted. Every operation is O(1).
 */
export class BlockPool {
  readonly capacity: number;
  private readonly refCount: Int32Array;
  private readonly blockKey: Int32Array;
  private readonly freePrev: Int32Array;
  private readonly freeNext: Int32Array;
  private freeHead = NONE;
  private freeTail = NONE;
  private freeSize = 0;
  private readonly keyFirst: Int32Array;
  private readonly copyPrev: Int32Array;
  private readonly copyNext: Int32Array;

  constructor(capacity: number, keys: number) {
    this.capacity = capacity;
    this.refCount = new Int32Array(capacity);
    this.blockKey = new Int32Array(capacity).fill(NONE);
    this.freePrev = new Int32Array(capacity);
    this.freeNext = new Int32Array(capacity);
    this.copyPrev = new Int32Array(capacity).fill(NONE);
    this.copyNext = new Int32Array(capacity).fill(NONE);
    this.keyFirst = new Int32Array(keys).fill(NONE);
    // Every block free, in index order: what appendFree() on 0, 1, 2, ... leaves, linked in one pass.
    for (let b = 0; b < capacity; b++) {
      this.freePrev[b] = b - 1;
      this.freeNext[b] = b + 1;
    }
    if (capacity > 0) {
      this.freeNext[capacity - 1] = NONE;
      this.freeHead = 0;
      this.freeTail = capacity - 1;
    }
    this.freeSize = capacity;
  }

  get freeBlocks(): number {
    return this.freeSize;
  }

  get pinnedBlocks(): number {
    return this.capacity - this.freeSize;
  }

  isPinned(block: number): boolean {
    return (this.refCount[block] as number) > 0;
  }

  /** A physical block holding `key`, or -1. */
  cached(key: number): number {
    return this.keyFirst[key] as number;
  }

  /** Takes a reference; a free cached block leaves the free queue (vLLM's touch). */
  pin(block: number): void {
    const ref = this.refCount[block] as number;
    if (ref === 0) this.unlinkFree(block);
    this.refCount[block] = ref + 1;
  }

  /** Evicts the least recently freed block and returns it pinned and empty. Never touches pinned blocks. */
  allocate(): number {
    const block = this.freeHead;
    if (block === NONE) throw new RangeError('no free KV block: every block is pinned');
    this.unlinkFree(block);
    this.dropKey(block);
    this.refCount[block] = 1;
    return block;
  }

  /** Drops a reference; at zero the block becomes evictable, most recently freed last. */
  release(block: number): void {
    const ref = (this.refCount[block] as number) - 1;
    if (ref < 0) throw new RangeError(`block ${block} released more often than pinned`);
    this.refCount[block] = ref;
    if (ref === 0) this.appendFree(block);
  }

  /** Records that `block` now holds the KV of chain position `key`, so later requests can hit it. */
  assign(block: number, key: number): void {
    this.dropKey(block);
    this.blockKey[block] = key;
    const first = this.keyFirst[key] as number;
    this.copyPrev[block] = NONE;
    this.copyNext[block] = first;
    if (first !== NONE) this.copyPrev[first] = block;
    this.keyFirst[key] = block;
  }

  /**
   * Longest chain of cached keys keyBase, keyBase+1, ... (at most maxBlocks), written to out from
   * offset. Returns its length; matchedEvictable tells how many of those blocks are free (unpinned).
   * Nothing is pinned yet, so a request that then does not fit leaves the pool untouched.
   */
  matchChain(keyBase: number, maxBlocks: number, out: Int32Array, offset: number): number {
    let hit = 0;
    let evictable = 0;
    while (hit < maxBlocks) {
      const block = this.keyFirst[keyBase + hit] as number;
      if (block === NONE) break;
      if (this.refCount[block] === 0) evictable++;
      out[offset + hit] = block;
      hit++;
    }
    this.matchedEvictable = evictable;
    return hit;
  }

  /** Free blocks among the last matchChain() result. */
  matchedEvictable = 0;

  /** Length of the cached chain keyBase, keyBase+1, ... (at most maxBlocks), without side effects. */
  chainLength(keyBase: number, maxBlocks: number): number {
    let n = 0;
    while (n < maxBlocks && (this.keyFirst[keyBase + n] as number) !== NONE) n++;
    return n;
  }

  /** pin() for blocks[from..to). */
  pinAll(blocks: Int32Array, from: number, to: number): void {
    for (let i = from; i < to; i++) this.pin(blocks[i] as number);
  }

  /** allocate() into blocks[from..to); positions below keyedTo get keys keyBase + position - offset. */
  allocateAll(
    blocks: Int32Array,
    from: number,
    to: number,
    offset: number,
    keyBase: number,
    keyedTo: number,
  ): void {
    for (let i = from; i < to; i++) {
      const block = this.allocate();
      if (i < keyedTo) this.assign(block, keyBase + i - offset);
      blocks[i] = block;
    }
  }

  /** release() for blocks[from..to) from the last one back: a sequence's tail is evicted first. */
  releaseAllReversed(blocks: Int32Array, from: number, to: number): void {
    for (let i = to - 1; i >= from; i--) this.release(blocks[i] as number);
  }

  private dropKey(block: number): void {
    const key = this.blockKey[block] as number;
    if (key === NONE) return;
    const prev = this.copyPrev[block] as number;
    const next = this.copyNext[block] as number;
    if (prev === NONE) this.keyFirst[key] = next;
    else this.copyNext[prev] = next;
    if (next !== NONE) this.copyPrev[next] = prev;
    this.blockKey[block] = NONE;
    this.copyPrev[block] = NONE;
    this.copyNext[block] = NONE;
  }

  private appendFree(block: number): void {
    this.freePrev[block] = this.freeTail;
    this.freeNext[block] = NONE;
    if (this.freeTail === NONE) this.freeHead = block;
    else this.freeNext[this.freeTail] = block;
    this.freeTail = block;
    this.freeSize++;
  }

  private unlinkFree(block: number): void {
    const prev = this.freePrev[block] as number;
    const next = this.freeNext[block] as number;
    if (prev === NONE) this.freeHead = next;
    else this.freeNext[prev] = next;
    if (next === NONE) this.freeTail = prev;
    else this.freePrev[next] = prev;
    this.freeSize--;
  }
}
