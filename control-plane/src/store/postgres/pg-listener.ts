// One PostgreSQL connection that LISTENs on a few channels and comes back by itself: a
// connection that fails or drops is opened again every RECONNECT_MS until it is closed.
// Notifications sent while it was down are lost, so `onConnected` tells the owner each
// time it is listening (again), to catch up however its messages allow.
import pg from 'pg';
import { clientOptions } from './pg-pool.js';

const RECONNECT_MS = 500;

export interface PgListenerHooks {
  onNotification(channel: string, payload: string): void;
  /** Listening; `again` is false the first time, true after a failure or a drop. */
  onConnected?(again: boolean): void;
  /** The connection failed or dropped; it is retried. */
  onLost?(err: unknown): void;
}

export class PgListener {
  private client: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  private retry: NodeJS.Timeout | null = null;
  private closed = false;
  private attempts = 0;

  constructor(
    private readonly url: string,
    private readonly channels: readonly string[],
    private readonly hooks: PgListenerHooks,
    private readonly Client: typeof pg.Client = pg.Client,
  ) {}

  /** Resolves once listening (or after a failed attempt, which is retried). */
  ready(): Promise<void> {
    if (this.closed || this.client) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  /** NOTIFY on the listening connection; false when it is down (the owner catches up on reconnect). */
  notify(channel: string, payload: string, onError: (err: unknown) => void): boolean {
    if (!this.client) return false;
    this.client.query('SELECT pg_notify($1, $2)', [channel, payload]).catch(onError);
    return true;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    await this.connecting;
    const client = this.client;
    this.client = null;
    if (!client) return;
    // Notifications already queued on the connection go out before it ends.
    await client.query('SELECT 1').catch(() => {});
    await client.end().catch(() => {});
  }

  private retryLater(err: unknown): void {
    if (this.closed) return;
    this.hooks.onLost?.(err);
    if (this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      void this.ready();
    }, RECONNECT_MS);
    this.retry.unref();
  }

  private async connect(): Promise<void> {
    const client = new this.Client(clientOptions(this.url));
    const lost = (err?: unknown): void => {
      if (this.client !== client) return;
      this.client = null;
      client.removeAllListeners('notification');
      client.end().catch(() => {});
      this.retryLater(err);
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (n) => this.hooks.onNotification(n.channel, n.payload ?? ''));
    try {
      await client.connect();
      await client.query(this.channels.map((c) => `LISTEN ${c}`).join('; '));
    } catch (err) {
      client.end().catch(() => {});
      this.retryLater(err);
      return;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.hooks.onConnected?.(this.attempts++ > 0);
  }
}
