// Writes control messages to one server stream with backpressure: after write() returns
// false nothing more is written until 'drain'; meanwhile messages wait in a bounded
// queue. An agent that stops reading long enough to fill it is reported through
// onOverflow (the session then ends it). Nothing is written after close().

export interface WritableLike<T> {
  write(message: T): boolean;
  once(event: 'drain', listener: () => void): unknown;
}

export const DEFAULT_MAX_QUEUED = 1000;

export class StreamWriter<T> {
  private readonly queue: T[] = [];
  private waitingForDrain = false;
  private closed = false;

  constructor(
    private readonly stream: WritableLike<T>,
    private readonly onOverflow: () => void,
    private readonly maxQueued = DEFAULT_MAX_QUEUED,
  ) {}

  /** Writes or queues the message; false when closed or over the limit (the message is dropped). */
  send(message: T): boolean {
    if (this.closed) return false;
    if (this.waitingForDrain) {
      if (this.queue.length >= this.maxQueued) {
        this.onOverflow();
        return false;
      }
      this.queue.push(message);
      return true;
    }
    this.writeNow(message);
    return true;
  }

  get queued(): number {
    return this.queue.length;
  }

  /** Drops what is queued; later sends are refused. */
  close(): void {
    this.closed = true;
    this.queue.length = 0;
  }

  private writeNow(message: T): void {
    if (!this.stream.write(message)) {
      this.waitingForDrain = true;
      this.stream.once('drain', () => this.drain());
    }
  }

  private drain(): void {
    this.waitingForDrain = false;
    while (!this.closed && !this.waitingForDrain && this.queue.length > 0) this.writeNow(this.queue.shift()!);
  }
}
