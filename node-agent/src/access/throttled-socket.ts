// A client's TCP connection to the agent (the SSH gateway's, handed to ssh2; the Jupyter
// proxy's, handed to node:http), held to its instance's share of the agent's bandwidth.
// SSH sessions and SFTP run through Docker exec, not the instance's network, so the
// kernel's shaping of the instance (runtime/task-bandwidth.ts) never sees them, and
// neither shaping bounds what the agent's thread spends relaying; this does it in user
// space, on the connection itself, with the instance's buckets shared by all its
// connections. While `throttle()` answers nothing (an SSH connection not yet logged in),
// bytes pass as they are.
//   - Received: a chunk that puts the bucket in debt pauses the socket until the debt is
//     paid, so TCP slows the client down.
//   - Sent: a chunk waits for its debt before it reaches the socket. ssh2 does not wait
//     for its writes, but SSH's flow control does: a client that has not received data
//     grants no more window, so what queues here is at most the channels' windows. Not
//     for what is outside any channel's window (replies to global requests, a channel's
//     refusals): a client that sends those without reading had grown the agent's memory
//     by 1.1 GB in 27 s, so a connection whose unsent bytes pass MAX_UNSENT_BYTES is cut.
import { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import type { TokenBucket } from './token-bucket.js';

export interface Throttle {
  in: TokenBucket;
  out: TokenBucket;
}

/** Bytes a connection may have waiting to be sent: many times the channels' windows (ssh2 grants 2 MiB each). */
export const MAX_UNSENT_BYTES = 64 * 1024 * 1024;

export class ThrottledSocket extends Duplex {
  // What ssh2 reads off a socket to describe the connection.
  readonly remoteAddress: string | undefined;
  readonly remoteFamily: string | undefined;
  readonly remotePort: number | undefined;
  /** The consumer wants no more for now (push answered false). */
  private backedUp = false;
  /** Waiting for the inbound bucket's debt to be paid. */
  private held: NodeJS.Timeout | null = null;

  constructor(
    private readonly socket: Socket,
    private readonly throttle: () => Throttle | undefined,
  ) {
    super({ allowHalfOpen: false });
    this.remoteAddress = socket.remoteAddress;
    this.remoteFamily = socket.remoteFamily;
    this.remotePort = socket.remotePort;
    socket.on('data', (chunk: Buffer) => this.received(chunk));
    socket.once('end', () => this.push(null));
    socket.once('error', (err) => this.destroy(err));
    socket.once('close', () => this.destroy());
    socket.on('timeout', () => this.emit('timeout'));
  }

  // What node:http and http-proxy-3 call on a connection besides reading and writing.
  get bytesWritten(): number {
    return this.socket.bytesWritten;
  }

  setNoDelay(noDelay?: boolean): this {
    this.socket.setNoDelay(noDelay);
    return this;
  }

  setKeepAlive(enable?: boolean, initialDelay?: number): this {
    this.socket.setKeepAlive(enable, initialDelay);
    return this;
  }

  /** As net.Socket's: node:http ends a `Connection: close` response with it. */
  destroySoon(): void {
    if (this.writable) this.end();
    if (this.writableFinished) this.destroy();
    else this.once('finish', () => this.destroy());
  }

  setTimeout(ms: number, onTimeout?: () => void): this {
    this.socket.setTimeout(ms);
    if (onTimeout) this.once('timeout', onTimeout);
    return this;
  }

  private received(chunk: Buffer): void {
    const wait = this.throttle()?.in.take(chunk.length) ?? 0;
    if (!this.push(chunk)) this.backedUp = true;
    if (wait > 0 && !this.held) {
      this.held = setTimeout(() => {
        this.held = null;
        this.flow();
      }, wait);
    }
    if (this.backedUp || this.held) this.socket.pause();
  }

  private flow(): void {
    if (!this.backedUp && !this.held && !this.socket.destroyed) this.socket.resume();
  }

  override _read(): void {
    this.backedUp = false;
    this.flow();
  }

  // `any`: one signature that stands for both of Writable.write's overloads.
  override write(chunk: any, encoding?: any, callback?: any): boolean {
    const accepted = (super.write as (...args: unknown[]) => boolean).call(this, chunk, encoding, callback);
    // The peer reads none of it: cut the connection rather than hold it all (see above).
    if (this.writableLength + this.socket.writableLength > MAX_UNSENT_BYTES && !this.destroyed) {
      this.destroy(new Error(`the client read none of the last ${Math.round(MAX_UNSENT_BYTES / 2 ** 20)} MiB sent to it`));
    }
    return accepted;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    const wait = this.throttle()?.out.take(chunk.length) ?? 0;
    const send = (): void => {
      if (this.socket.destroyed) return done();
      if (this.socket.write(chunk)) done();
      else this.socket.once('drain', () => done());
    };
    if (wait > 0) setTimeout(send, wait);
    else send();
  }

  override _final(done: (err?: Error | null) => void): void {
    if (this.socket.destroyed || this.socket.writableEnded) return done();
    this.socket.end(() => done());
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    if (this.held) clearTimeout(this.held);
    this.held = null;
    this.socket.destroy();
    done(err);
  }
}
