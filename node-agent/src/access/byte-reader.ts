// Reads exact amounts from a stream that arrives in chunks of any size: what an SFTP READ
// of N bytes at the current position needs from a file streamed out of the container.
// Pulls only when asked, so a slow client holds the container's stream back instead of
// the agent buffering it.

export class ByteReader {
  private readonly chunks: AsyncIterator<unknown>;
  private rest: Buffer = Buffer.alloc(0);
  private ended = false;
  /** Bytes handed out or skipped so far. */
  position = 0;

  constructor(source: AsyncIterable<unknown>) {
    this.chunks = source[Symbol.asyncIterator]();
  }

  /** Up to `n` bytes: fewer only at the end of the stream (empty there). */
  async read(n: number): Promise<Buffer> {
    while (this.rest.length < n && !this.ended) {
      const next = await this.chunks.next();
      if (next.done) this.ended = true;
      else {
        const chunk = next.value as Uint8Array;
        this.rest = this.rest.length === 0 ? (Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk)) : Buffer.concat([this.rest, chunk]);
      }
    }
    const out = this.rest.subarray(0, n);
    this.rest = this.rest.subarray(out.length);
    this.position += out.length;
    return out;
  }

  /**
   * Drops `n` bytes (reads ahead of the position); false when the stream ended first.
   * `pace` is awaited after each chunk dropped, with its size.
   */
  async skip(n: number, pace?: (bytes: number) => Promise<void>): Promise<boolean> {
    let left = n;
    while (left > 0) {
      const got = await this.read(Math.min(left, 1024 * 1024));
      if (got.length === 0) return false;
      left -= got.length;
      await pace?.(got.length);
    }
    return true;
  }

  /** Stops the source (a generator's finally, a stream's destroy through its iterator). */
  async close(): Promise<void> {
    this.ended = true;
    await this.chunks.return?.();
  }
}
