// One Connect call, with the stream habits the agent relies on:
//   - writes are serialized and respect backpressure (write() false: wait for 'drain');
//   - nothing is written after the stream ended or was closed (send() rejects instead);
//   - `ended` settles once, with why the stream is over (status, server end, or close);
//   - close() half-closes politely, cancel() tears down (what an AbortSignal does).
import type * as grpc from '@grpc/grpc-js';
import type { AgentMessage, ControlMessage__Output } from '@svc/proto';
import { SessionEndedError, statusMessage } from './session-errors.js';

export type ControlCall = grpc.ClientDuplexStream<AgentMessage, ControlMessage__Output>;

export class ControlStream {
  /** Settles with the reason the stream is over; never rejects. */
  readonly ended: Promise<SessionEndedError>;
  private endReason: SessionEndedError | undefined;
  private resolveEnded!: (reason: SessionEndedError) => void;
  private writable = true;
  private tail: Promise<void> = Promise.resolve();
  private readonly drainWaiters = new Set<() => void>();

  constructor(
    private readonly call: ControlCall,
    onMessage: (message: ControlMessage__Output) => void,
  ) {
    this.ended = new Promise((resolve) => (this.resolveEnded = resolve));
    call.on('data', onMessage);
    call.on('error', (err: grpc.ServiceError) => this.finish(new SessionEndedError(statusMessage(err), { code: err.code, cause: err })));
    call.on('end', () => this.finish(new SessionEndedError('the control plane ended the stream')));
    call.on('drain', () => this.wakeDrainWaiters());
  }

  get isEnded(): boolean {
    return this.endReason !== undefined;
  }

  /** Writes one message after the ones before it; rejects with SessionEndedError once the stream is over. */
  send(message: AgentMessage): Promise<void> {
    const written = this.tail.then(() => this.writeOne(message));
    // The chain only orders writes; each caller gets its own outcome through `written`.
    this.tail = written.catch(() => undefined);
    return written;
  }

  /** Ends our side (no more writes); the server then ends its side. Safe to repeat. */
  close(): void {
    if (!this.writable) return;
    this.writable = false;
    this.call.end();
  }

  /** Tears the call down at once (CANCELLED). Safe to repeat. */
  cancel(reason = 'the agent cancelled the stream'): void {
    this.writable = false;
    this.finish(new SessionEndedError(reason));
    this.call.cancel();
  }

  private async writeOne(message: AgentMessage): Promise<void> {
    if (this.endReason) throw this.endReason;
    if (!this.writable) throw new SessionEndedError('the stream is closed for writing');
    if (this.call.write(message)) return;
    await new Promise<void>((resolve, reject) => {
      const wake = (): void => {
        this.drainWaiters.delete(wake);
        if (this.endReason) reject(this.endReason);
        else resolve();
      };
      this.drainWaiters.add(wake);
    });
  }

  private wakeDrainWaiters(): void {
    for (const wake of [...this.drainWaiters]) wake();
  }

  private finish(reason: SessionEndedError): void {
    if (this.endReason) return;
    this.endReason = reason;
    this.writable = false;
    this.resolveEnded(reason);
    this.wakeDrainWaiters();
  }
}
