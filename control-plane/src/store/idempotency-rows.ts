// What an idempotency row means to a request that names its key, for both engines'
// read-only look-up (`IdempotencyStore.find`). The same rules as their `begin`, which
// writes: an expired row counts as absent, and so does an unfinished claim whose process
// stopped renewing it (the claim step takes it over).
import type { IdempotencyFound, StoredResponse } from './records.js';

export interface IdempotencyRow {
  requestHash: string;
  state: 'in_progress' | 'completed';
  leaseUntil: number;
  expiresAt: number;
  /** Set when completed. */
  response: StoredResponse | null;
}

/**
 * True for a row `begin` and `purgeExpired` delete (their SQL says the same: `EXPIRED` in
 * each engine's idempotency store): an answer past its window, or an unfinished claim past
 * it whose lease ran out. A claim whose process still renews it never expires: the
 * request may run longer than the window.
 */
export function isExpired(row: Pick<IdempotencyRow, 'state' | 'leaseUntil' | 'expiresAt'>, now: number): boolean {
  return row.expiresAt <= now && (row.state === 'completed' || row.leaseUntil <= now);
}

/** What a request with `requestHash` finds under its key at `now`. */
export function foundState(row: IdempotencyRow | undefined, requestHash: string, now: number): IdempotencyFound {
  if (!row || isExpired(row, now)) return { state: 'absent' };
  if (row.requestHash !== requestHash) return { state: 'mismatch' };
  if (row.state === 'completed' && row.response) return { state: 'completed', response: row.response };
  return row.leaseUntil > now ? { state: 'in_progress' } : { state: 'absent' };
}

/** A row as either engine reads it (PostgreSQL's BIGINTs arrive as strings). */
export function idempotencyRow(row: Record<string, unknown>): IdempotencyRow {
  const completed = row.state === 'completed';
  return {
    requestHash: String(row.request_hash),
    state: completed ? 'completed' : 'in_progress',
    leaseUntil: Number(row.lease_until),
    expiresAt: Number(row.expires_at),
    response: completed
      ? { statusCode: Number(row.status_code), headers: JSON.parse(String(row.headers)) as Record<string, string>, body: String(row.body) }
      : null,
  };
}
