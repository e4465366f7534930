// Leadership among replicas on one database: the process holding a session advisory lock
// on its own connection leads. Others try for it every `retryMs`; when the leader's
// connection ends (process killed, connection dropped) the server releases the lock and
// the next try takes it. A leader that can no longer reach the server steps down at once
// (its connection errors) or at its next check, so it never acts on a lock it lost.
//
// The same connection is this process's seat in the fleet: it holds a shared advisory
// lock every process holds, and each check reads who holds it. A process that dies or
// loses its connection leaves at once (the server drops its locks with the session), so
// the others count it out at their next check; a view of the fleet costs no statement of
// its own and no table to clean up.
import { EventEmitter } from 'node:events';
import type pg from 'pg';
import { ALONE, membershipOf, type Membership } from '../../fleet-share.js';
import type { Leadership } from '../../leadership.js';
import { clientOptions } from './pg-pool.js';

export const LEADER_LOCK = 0x5356_4c31; // "SVL1"
/** Held shared by every control-plane process on the database, for as long as its session lives. */
export const SEAT_LOCK = 0x5356_5331; // "SVS1"

/** Backend pids of the sessions that hold a seat, in order: a process's rank is its place here. */
const SEATS = `ARRAY(SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = ${SEAT_LOCK} AND granted ORDER BY pid) AS seats, pg_backend_pid() AS me`;

export interface AdvisoryLeadershipOptions {
  /** How often a follower tries for the lock and the leader checks it still holds it. */
  retryMs: number;
  onError?: (err: unknown) => void;
}

interface CheckRow {
  ok: boolean;
  seats: number[];
  me: number;
}

export class AdvisoryLeadership implements Leadership {
  private readonly events = new EventEmitter<{ change: [leader: boolean] }>();
  private client: pg.Client | null = null;
  private leader = false;
  private seats: Membership = ALONE;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;

  constructor(
    private readonly url: string,
    private readonly Client: typeof pg.Client,
    private readonly options: AdvisoryLeadershipOptions,
  ) {}

  /** The first try, awaited: a process alone on its database leads from its first request. */
  async start(): Promise<void> {
    await this.tick();
  }

  isLeader(): boolean {
    return this.leader;
  }

  /** As of the last check; kept while the connection is being made again. */
  membership(): Membership {
    return this.seats;
  }

  onChange(listener: (leader: boolean) => void): () => void {
    this.events.on('change', listener);
    return () => this.events.off('change', listener);
  }

  private set(leader: boolean): void {
    if (leader === this.leader) return;
    this.leader = leader;
    this.events.emit('change', leader);
  }

  private tick(): Promise<void> {
    this.ticking ??= this.tryOnce()
      .catch((err: unknown) => {
        this.drop();
        this.options.onError?.(err);
      })
      .finally(() => {
        this.ticking = null;
        if (this.closed) return;
        this.timer = setTimeout(() => void this.tick(), this.options.retryMs);
        this.timer.unref();
      });
    return this.ticking;
  }

  private async tryOnce(): Promise<void> {
    if (this.closed) return;
    const client = this.client ?? (await this.connect());
    if (this.leader) {
      // Still ours? The lock lives exactly as long as this session.
      const { rows } = await client.query(
        `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND objid = $1) AS ok, ${SEATS}`,
        [LEADER_LOCK],
      );
      const row = rows[0] as CheckRow;
      this.seats = membershipOf(row.seats, row.me);
      if (!row.ok) this.drop();
      return;
    }
    const { rows } = await client.query(`SELECT pg_try_advisory_lock($1) AS ok, ${SEATS}`, [LEADER_LOCK]);
    const row = rows[0] as CheckRow;
    this.seats = membershipOf(row.seats, row.me);
    if (row.ok && !this.closed) this.set(true);
  }

  private async connect(): Promise<pg.Client> {
    // Generous timeouts: a busy event loop must not read as a lost lock (the leader would
    // flap); a dead connection is noticed by its error and the keepalives below instead.
    const timeoutMs = Math.max(10_000, this.options.retryMs * 5);
    const client = new this.Client({ ...clientOptions(this.url), keepAlive: true, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
    const lost = (): void => {
      if (this.client === client) this.drop();
    };
    client.on('error', lost);
    client.on('end', lost);
    try {
      await client.connect();
      // The server notices a leader that vanished without closing (a partition) within
      // seconds, not after the kernel's two-hour keepalive: its lock is then released.
      await client.query('SET tcp_keepalives_idle = 2; SET tcp_keepalives_interval = 1; SET tcp_keepalives_count = 3');
      await client.query('SELECT pg_advisory_lock_shared($1)', [SEAT_LOCK]);
    } catch (err) {
      client.end().catch(() => {});
      throw err;
    }
    this.client = client;
    return client;
  }

  /** Forgets the connection (the server releases the lock with it) and steps down. */
  private drop(): void {
    const client = this.client;
    this.client = null;
    if (client) {
      client.removeAllListeners('error');
      client.on('error', () => {});
      client.end().catch(() => {});
    }
    this.set(false);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.ticking;
    const client = this.client;
    this.client = null;
    this.set(false);
    if (client) await client.end().catch(() => {});
  }
}
