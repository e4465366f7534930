// Rows of the events table (the outbox), written inside any store transaction.
//
// Two things SQLite gives for free are made explicit here:
// - Order: the webhook fan-out reads events after a cursor, so an event must never
//   commit after one with a higher seq (the cursor would pass it). Each writer takes a
//   transaction-scoped advisory lock before taking its seq and holds it to commit, so
//   seqs commit in order. Writers of events serialize; their transactions are short.
// - Nudges: NOTIFY is delivered on commit to every listening connection, in every
//   process, so webhook workers on other replicas hear of the event too.
import type pg from 'pg';
import type { EventRecord, StoredEvent } from '../records.js';
import { one } from './pg-pool.js';
import { PgListener } from './pg-listener.js';
import { CHANGES_CHANNEL } from './shared-state-migration.js';

export const EVENTS_LOCK = 0x5356_4531; // "SVE1"
export const EVENTS_CHANNEL = 'svc_events';

/** A row another process (or this one) committed: `kind:id` from the triggers of migration 19. `all`: notices may have been missed. */
export type StoreChange = { kind: 'key' | 'org' | 'replica'; id: string } | { kind: 'all' };

export function parseChange(payload: string | undefined): StoreChange | undefined {
  const at = payload?.indexOf(':') ?? -1;
  if (!payload || at < 0) return undefined;
  const kind = payload.slice(0, at);
  if (kind !== 'key' && kind !== 'org' && kind !== 'replica') return undefined;
  return { kind, id: payload.slice(at + 1) };
}

/** Takes the events lock for the rest of the caller's transaction. */
export async function lockEvents(client: pg.ClientBase): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock($1)', [EVENTS_LOCK]);
}

export async function insertEvent(client: pg.ClientBase, event: EventRecord): Promise<StoredEvent> {
  await lockEvents(client);
  const row = await one(client, `INSERT INTO events (id, type, org_id, subject, data, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING seq`, [
    event.id,
    event.type,
    event.orgId,
    event.subject,
    JSON.stringify(event.data),
    event.createdAt,
  ]);
  await client.query(`SELECT pg_notify('${EVENTS_CHANNEL}', '')`);
  return { ...event, seq: Number(row!.seq) };
}

/**
 * One LISTEN connection per store, opened on the first subscriber, for event nudges and
 * row changes. When it comes back after a drop, listeners are called once (events may
 * have been missed meanwhile) and change listeners with `all`.
 */
export class EventNotifications {
  private readonly listeners = new Set<() => void>();
  private readonly changeListeners = new Set<(change: StoreChange) => void>();
  private readonly listener: PgListener;

  constructor(url: string, Client: typeof pg.Client) {
    this.listener = new PgListener(
      url,
      [EVENTS_CHANNEL, CHANGES_CHANNEL],
      {
        onNotification: (channel, payload) => {
          if (channel !== CHANGES_CHANNEL) return this.notify();
          const change = parseChange(payload);
          if (change) this.changed(change);
        },
        onConnected: (again) => {
          if (!again) return;
          this.notify();
          this.changed({ kind: 'all' });
        },
      },
      Client,
    );
  }

  add(listener: () => void): () => void {
    this.listeners.add(listener);
    void this.listener.ready();
    return () => this.listeners.delete(listener);
  }

  /** Row changes from every process; resolves once listening, with an unsubscribe. */
  async addChangeListener(listener: (change: StoreChange) => void): Promise<() => void> {
    this.changeListeners.add(listener);
    await this.listener.ready();
    return () => this.changeListeners.delete(listener);
  }

  /** Resolves once the LISTEN is in place (tests wait for it before appending). */
  ready(): Promise<void> {
    return this.listener.ready();
  }

  close(): Promise<void> {
    return this.listener.close();
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }

  private changed(change: StoreChange): void {
    for (const listener of this.changeListeners) listener(change);
  }
}
