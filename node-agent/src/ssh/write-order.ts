// SFTP writes carry their own offsets, but the gateway streams an upload into the
// container as one sequence of bytes. This puts writes in order: the next expected one is
// passed on, a few that come early wait in a bounded window until the gap before them is
// filled, and anything else (a write behind what was already streamed, one too far ahead,
// overlapping ones) is refused with a reason the client is shown.

export type WriteVerdict = { ok: true; flush: Buffer[] } | { ok: false; reason: string };

export class WriteOrder {
  private readonly early = new Map<number, Buffer>();
  private earlyBytes = 0;

  constructor(
    /** The offset the next streamed byte goes to. */
    private nextOffset: number,
    /** How many bytes may wait ahead of a gap. */
    private readonly windowBytes: number,
  ) {}

  /** Bytes streamed so far end here. */
  get next(): number {
    return this.nextOffset;
  }

  /** Bytes waiting for a gap before them to be filled. */
  get waiting(): number {
    return this.earlyBytes;
  }

  /** Where the first hole is, when writes are waiting for it. */
  get hole(): number | undefined {
    return this.early.size > 0 ? this.nextOffset : undefined;
  }

  offer(offset: number, data: Buffer): WriteVerdict {
    if (!Number.isSafeInteger(offset) || offset < 0) return { ok: false, reason: `bad offset ${offset}` };
    if (data.length === 0) return { ok: true, flush: [] };
    if (offset < this.nextOffset) {
      return { ok: false, reason: `a write at offset ${offset} goes back over bytes already written (up to ${this.nextOffset}); uploads are streamed into the instance and each byte can be written once` };
    }
    if (offset > this.nextOffset) {
      const end = offset + data.length;
      if (end - this.nextOffset > this.windowBytes) {
        return { ok: false, reason: `a write at offset ${offset} is more than ${this.windowBytes} bytes ahead of the upload (at ${this.nextOffset}); write files in order` };
      }
      for (const [start, waiting] of this.early) {
        if (offset < start + waiting.length && start < end) return { ok: false, reason: `a write at offset ${offset} overlaps one at ${start}` };
      }
      this.early.set(offset, data);
      this.earlyBytes += data.length;
      return { ok: true, flush: [] };
    }
    const flush = [data];
    this.nextOffset += data.length;
    for (let next = this.early.get(this.nextOffset); next; next = this.early.get(this.nextOffset)) {
      this.early.delete(this.nextOffset);
      this.earlyBytes -= next.length;
      flush.push(next);
      this.nextOffset += next.length;
    }
    // A write that came early but starts inside what was just streamed would be a rewrite.
    for (const start of this.early.keys()) {
      if (start < this.nextOffset) return { ok: false, reason: `a write at offset ${start} overlaps bytes already written (up to ${this.nextOffset})` };
    }
    return { ok: true, flush };
  }
}
