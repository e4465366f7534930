// Health events wait here while no session is up, so a GPU that failed during a
// disconnect still reaches the control plane's timeline after the reconnect. Bounded:
// past MAX_QUEUED the oldest are dropped (and counted), since the GPU's current verdict
// also travels in every telemetry sample.
import type { HealthEvent } from '@svc/proto';

const MAX_QUEUED = 256;

export type HealthEventSender = (event: HealthEvent) => Promise<void>;

export class HealthEventOutbox {
  private queue: HealthEvent[] = [];
  private sender: HealthEventSender | undefined;
  /** The pump in progress, if any; one at a time keeps events in order. */
  private pumping: Promise<void> | undefined;
  /** Events dropped because the queue was full. */
  dropped = 0;

  push(event: HealthEvent): void {
    this.queue.push(event);
    if (this.queue.length > MAX_QUEUED) {
      this.queue.shift();
      this.dropped++;
    }
    if (this.sender) this.flush(this.sender);
  }

  /** Sends what is queued, then every new event at once, through `sender` until detach(). */
  attach(sender: HealthEventSender): Promise<void> {
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
  private flush(sender: HealthEventSender): Promise<void> {
    this.pumping ??= this.pump(sender).finally(() => (this.pumping = undefined));
    return this.pumping;
  }

  private async pump(sender: HealthEventSender): Promise<void> {
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
