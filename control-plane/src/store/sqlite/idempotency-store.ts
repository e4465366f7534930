// SQLite idempotency claims. A claim is a row `in_progress` with an owner process, a
// per-claim token and a lease; its answer replaces it as `completed`. `completeClaim`
// is also called inside the transactions of other stores (an instance and its charge),
// so the work and the answer that says it was done commit together.
// A row's expiry deletes an answer, never a claim whose process still renews its lease:
// a request may run longer than the window (a whole completion may wait 5 minutes for
// its first byte), and deleting its claim would let a retry run it a second time. The
// answer's expiry is set when it is stored, so it is replayed for a whole window.
import type Database from 'better-sqlite3';
import { ApiError } from '@svc/shared';
import { foundState, idempotencyRow } from '../idempotency-rows.js';
import type { IdempotencyBegin, IdempotencyCompletion, IdempotencyFound, IdempotencyOwner, StoredResponse } from '../records.js';
import type { IdempotencyStore } from '../store.js';

type Db = Database.Database;
type Row = Record<string, unknown>;

/**
 * Stores `completion` as the answer of its claim, inside the caller's transaction. A
 * claim no longer held (taken over after its lease ran out) throws, which rolls the
 * caller's work back: the request that holds the claim now does the work once.
 */
export function completeClaim(db: Db, completion: IdempotencyCompletion | null | undefined): void {
  if (!completion) return;
  const { keyId, idemKey, claim, response, expiresAt } = completion;
  const updated = db
    .prepare(
      `UPDATE idempotency_records SET state = 'completed', status_code = ?, headers = ?, body = ?, expires_at = ?
       WHERE key_id = ? AND idem_key = ? AND claim = ? AND state = 'in_progress'`,
    )
    .run(response.statusCode, JSON.stringify(response.headers), response.body, expiresAt, keyId, idemKey, claim);
  if (updated.changes !== 1) {
    throw new ApiError('conflict', 'another request took over this X-Service-Idempotency-Key; retry to get its answer');
  }
}

/** What `begin` and `purgeExpired` delete: an expired answer, or an expired claim no process renews (`isExpired`). */
const EXPIRED = `expires_at <= @now AND (state = 'completed' OR lease_until <= @now)`;

export class SqliteIdempotencyStore implements IdempotencyStore {
  constructor(private readonly db: Db) {}

  async begin(
    keyId: string,
    idemKey: string,
    requestHash: string,
    now: number,
    expiresAt: number,
    holder: IdempotencyOwner,
  ): Promise<IdempotencyBegin> {
    return this.db.transaction((): IdempotencyBegin => {
      this.db.prepare(`DELETE FROM idempotency_records WHERE key_id = @keyId AND idem_key = @idemKey AND ${EXPIRED}`).run({ keyId, idemKey, now });
      const inserted = this.db
        .prepare(
          `INSERT INTO idempotency_records (key_id, idem_key, request_hash, state, owner, claim, lease_until, created_at, expires_at)
           VALUES (?, ?, ?, 'in_progress', ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
        )
        .run(keyId, idemKey, requestHash, holder.owner, holder.claim, holder.leaseUntil, now, expiresAt);
      if (inserted.changes === 1) return { state: 'started', takenOver: false };
      const row = this.db.prepare('SELECT * FROM idempotency_records WHERE key_id = ? AND idem_key = ?').get(keyId, idemKey) as Row;
      if (row.request_hash !== requestHash) return { state: 'mismatch' };
      if (row.state === 'completed') {
        return {
          state: 'completed',
          response: { statusCode: Number(row.status_code), headers: JSON.parse(String(row.headers)) as Record<string, string>, body: String(row.body) },
        };
      }
      if (Number(row.lease_until) > now) return { state: 'in_progress' };
      // Its process stopped renewing (died): nothing it did committed an answer, so the
      // work did not commit either (they commit together). Run it again, once.
      this.db
        .prepare('UPDATE idempotency_records SET owner = ?, claim = ?, lease_until = ? WHERE key_id = ? AND idem_key = ?')
        .run(holder.owner, holder.claim, holder.leaseUntil, keyId, idemKey);
      return { state: 'started', takenOver: true };
    }).immediate();
  }

  async find(keyId: string, idemKey: string, requestHash: string, now: number): Promise<IdempotencyFound> {
    const row = this.db.prepare('SELECT * FROM idempotency_records WHERE key_id = ? AND idem_key = ?').get(keyId, idemKey) as Row | undefined;
    return foundState(row && idempotencyRow(row), requestHash, now);
  }

  async complete(keyId: string, idemKey: string, claim: string, response: StoredResponse, expiresAt: number): Promise<void> {
    // A 2xx already stored with its work stays: a later error of the same request (after
    // the commit) would otherwise tell a retry that nothing was done.
    this.db
      .prepare(
        `UPDATE idempotency_records SET state = 'completed', status_code = @status, headers = @headers, body = @body, expires_at = @expiresAt
         WHERE key_id = @keyId AND idem_key = @idemKey AND claim = @claim
           AND (state = 'in_progress' OR status_code >= 300 OR @status < 300)`,
      )
      .run({ status: response.statusCode, headers: JSON.stringify(response.headers), body: response.body, expiresAt, keyId, idemKey, claim });
  }

  async release(keyId: string, idemKey: string, claim: string): Promise<void> {
    this.db.prepare(`DELETE FROM idempotency_records WHERE key_id = ? AND idem_key = ? AND claim = ? AND state = 'in_progress'`).run(keyId, idemKey, claim);
  }

  async renew(owner: string, leaseUntil: number): Promise<void> {
    this.db.prepare(`UPDATE idempotency_records SET lease_until = ? WHERE owner = ? AND state = 'in_progress'`).run(leaseUntil, owner);
  }

  async purgeExpired(now: number): Promise<number> {
    return this.db.prepare(`DELETE FROM idempotency_records WHERE ${EXPIRED}`).run({ now }).changes;
  }
}
