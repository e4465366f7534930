// Messages that must not be lost to a disconnect wait here while no session is up, and
// go out in order after the reconnect: health events (a GPU that failed during a
// disconnect still reaches the timeline) and task states (an instance that failed to
// start still gets its reason). Bounded: past `maxQueued` the oldest are dropped (and
// counted); GPU verdicts also travel in every telemetry sample and running tasks in Hello.
import type { HealthEvent } from '@svc/proto';

export type OutboxSender<T> = (message: T) => Promise<void>;
export type HealthEventSender = OutboxSender<HealthEvent>;

export class Outbox<T> {
  private queue: T[] = [];
  private sender: OutboxSender<T> | undefined;
  /** The pump in progress, if any; one at a time keeps events in order. */
  private pumping: Promise<void> | undefined;
  /** Events dropped because the queue was full. */
  dropped = 0;

  constructor(private readonly maxQueued = 256) {}

  push(message: T): void {
    this.queue.push(message);
    if (this.queue.length > this.maxQueued) {
      this.queue.shift();
      this.dropped++;
    }
    if (this.sender) this.flush(this.sender);
  }

  /** Sends what is queued, then every new event at once, through `sender` until detach(). */
  attach(sender: OutboxSender<T>): Promise<void> {
    this.sender = sender;
    return this.flush(sender);
  }

  detach(): void {
    this.sender = undefined;
  }

  get size(): number {
    return this.queue.length;
  }

  /**
   * Sends queued events in order, one at a time; an event whose send fails stays queued.
   * The first send starts synchronously, so an event pushed before a command's result is
   * also written before it.
   */
  private flush(sender: OutboxSender<T>): Promise<void> {
    this.pumping ??= this.pump(sender).finally(() => (this.pumping = undefined));
    return this.pumping;
  }

  private async pump(sender: OutboxSender<T>): Promise<void> {
    while (this.sender === sender && this.queue.length > 0) {
      const event = this.queue[0]!;
      try {
        await sender(event);
      } catch {
        // The session is ending: the event stays queued for the next one, which is also
        // where the failure is handled (the session's own error ends it).
        return;
      }
      if (this.queue[0] === event) this.queue.shift();
    }
  }
}

export class HealthEventOutbox extends Outbox<HealthEvent> {}
