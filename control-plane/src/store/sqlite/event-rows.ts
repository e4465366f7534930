// Rows of the events table (the outbox): writing one inside any store transaction, and
// reading one back. Every store part that records an event uses these, so they live
// apart from the store classes.
import type Database from 'better-sqlite3';
import type { EventRecord, StoredEvent } from '../records.js';

type Db = Database.Database;
type Row = Record<string, unknown>;

export function toEvent(row: Row): StoredEvent {
  return {
    seq: Number(row.seq),
    id: String(row.id),
    type: String(row.type),
    orgId: row.org_id === null ? null : String(row.org_id),
    subject: row.subject === null ? null : String(row.subject),
    data: JSON.parse(String(row.data)) as unknown,
    createdAt: Number(row.created_at),
  };
}

/**
 * Who hears that an event was appended through a connection. They are told on a
 * microtask: better-sqlite3 transactions are synchronous, so by then the insert has
 * committed (or rolled back, and a listener that looks finds nothing new).
 */
const appendListeners = new WeakMap<Db, Set<() => void>>();

export function insertEvent(db: Db, event: EventRecord): StoredEvent {
  const info = db
    .prepare('INSERT INTO events (id, type, org_id, subject, data, created_at) VALUES (?, ?, ?, ?, ?, ?)')
    .run(event.id, event.type, event.orgId, event.subject, JSON.stringify(event.data), event.createdAt);
  const listeners = appendListeners.get(db);
  if (listeners && listeners.size > 0) queueMicrotask(() => listeners.forEach((listener) => listener()));
  return { ...event, seq: Number(info.lastInsertRowid) };
}

export function addAppendListener(db: Db, listener: () => void): () => void {
  let listeners = appendListeners.get(db);
  if (!listeners) appendListeners.set(db, (listeners = new Set()));
  listeners.add(listener);
  return () => listeners.delete(listener);
}
