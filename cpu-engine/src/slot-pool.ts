// A fixed set of generation slots (llama.cpp sequences or embedding contexts)
// handed out one request at a time. Requests beyond --parallel wait in FIFO
// order instead of failing; a waiter whose client went away leaves the queue.

export class SlotPool<T> {
  private readonly free: T[];
  private readonly waiters: Array<{ resolve: (slot: T) => void; reject: (err: unknown) => void; signal: AbortSignal | undefined; onAbort: () => void }> = [];

  constructor(slots: readonly T[]) {
    if (slots.length === 0) throw new Error('a slot pool needs at least one slot');
    this.free = [...slots];
  }

  get available(): number {
    return this.free.length;
  }

  get waiting(): number {
    return this.waiters.length;
  }

  acquire(signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const slot = this.free.shift();
    if (slot !== undefined) return Promise.resolve(slot);
    return new Promise<T>((resolve, reject) => {
      const waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(signal!.reason);
        },
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  release(slot: T): void {
    const next = this.waiters.shift();
    if (next) {
      next.signal?.removeEventListener('abort', next.onAbort);
      next.resolve(slot);
    } else {
      this.free.push(slot);
    }
  }

  /** Runs `work` holding a slot, and always gives the slot back. */
  async with<R>(signal: AbortSignal | undefined, work: (slot: T) => Promise<R>): Promise<R> {
    const slot = await this.acquire(signal);
    try {
      return await work(slot);
    } finally {
      this.release(slot);
    }
  }
}
