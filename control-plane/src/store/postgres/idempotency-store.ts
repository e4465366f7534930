// PostgreSQL idempotency claims: the same rows and rules as the SQLite store. The
// primary key does the arbitration between replicas: a second INSERT of a claim waits
// for the first transaction, then finds its row; the row lock (FOR UPDATE) makes the
// take-over of a dead claim happen once. `completeClaim` runs inside other stores'
// transactions, so the work and the answer that says it was done commit together.
// Expiry deletes answers, never a claim whose process still renews its lease (see the
// SQLite twin).
import type pg from 'pg';
import { ApiError } from '@svc/shared';
import { foundState, idempotencyRow } from '../idempotency-rows.js';
import type { IdempotencyBegin, IdempotencyCompletion, IdempotencyFound, IdempotencyOwner, StoredResponse } from '../records.js';
import type { IdempotencyStore } from '../store.js';
import { inTransaction, one, run } from './pg-pool.js';

/** See the SQLite twin: a claim no longer held throws, rolling the caller's work back. */
export async function completeClaim(client: pg.ClientBase, completion: IdempotencyCompletion | null | undefined): Promise<void> {
  if (!completion) return;
  const { keyId, idemKey, claim, response, expiresAt } = completion;
  const updated = await run(
    client,
    `UPDATE idempotency_records SET state = 'completed', status_code = $1, headers = $2, body = $3, expires_at = $7
     WHERE key_id = $4 AND idem_key = $5 AND claim = $6 AND state = 'in_progress'`,
    [response.statusCode, JSON.stringify(response.headers), response.body, keyId, idemKey, claim, expiresAt],
  );
  if (updated !== 1) {
    throw new ApiError('conflict', 'another request took over this X-Service-Idempotency-Key; retry to get its answer');
  }
}

/** What `begin` and `purgeExpired` delete: an expired answer, or an expired claim no process renews (`isExpired`; $1: now). */
const EXPIRED = `expires_at <= $1 AND (state = 'completed' OR lease_until <= $1)`;

export class PgIdempotencyStore implements IdempotencyStore {
  constructor(private readonly pool: pg.Pool) {}

  async begin(
    keyId: string,
    idemKey: string,
    requestHash: string,
    now: number,
    expiresAt: number,
    holder: IdempotencyOwner,
  ): Promise<IdempotencyBegin> {
    return inTransaction(this.pool, async (client): Promise<IdempotencyBegin> => {
      await run(client, `DELETE FROM idempotency_records WHERE ${EXPIRED} AND key_id = $2 AND idem_key = $3`, [now, keyId, idemKey]);
      // A release between our INSERT and SELECT leaves no row: try again.
      for (;;) {
        const inserted = await run(
          client,
          `INSERT INTO idempotency_records (key_id, idem_key, request_hash, state, owner, claim, lease_until, created_at, expires_at)
           VALUES ($1, $2, $3, 'in_progress', $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
          [keyId, idemKey, requestHash, holder.owner, holder.claim, holder.leaseUntil, now, expiresAt],
        );
        if (inserted === 1) return { state: 'started', takenOver: false };
        const row = await one(client, 'SELECT * FROM idempotency_records WHERE key_id = $1 AND idem_key = $2 FOR UPDATE', [keyId, idemKey]);
        if (!row) continue;
        if (row.request_hash !== requestHash) return { state: 'mismatch' };
        if (row.state === 'completed') {
          return {
            state: 'completed',
            response: { statusCode: Number(row.status_code), headers: JSON.parse(String(row.headers)) as Record<string, string>, body: String(row.body) },
          };
        }
        if (Number(row.lease_until) > now) return { state: 'in_progress' };
        // Its process stopped renewing (died): its work did not commit (it commits with
        // the answer). Run it again, once: the row lock makes one taker win.
        await run(client, 'UPDATE idempotency_records SET owner = $1, claim = $2, lease_until = $3 WHERE key_id = $4 AND idem_key = $5', [
          holder.owner,
          holder.claim,
          holder.leaseUntil,
          keyId,
          idemKey,
        ]);
        return { state: 'started', takenOver: true };
      }
    });
  }

  async find(keyId: string, idemKey: string, requestHash: string, now: number): Promise<IdempotencyFound> {
    const row = await one(this.pool, 'SELECT * FROM idempotency_records WHERE key_id = $1 AND idem_key = $2', [keyId, idemKey]);
    return foundState(row && idempotencyRow(row), requestHash, now);
  }

  async complete(keyId: string, idemKey: string, claim: string, response: StoredResponse, expiresAt: number): Promise<void> {
    // A 2xx already stored with its work stays (see the SQLite twin).
    await run(
      this.pool,
      `UPDATE idempotency_records SET state = 'completed', status_code = $1, headers = $2, body = $3, expires_at = $7
       WHERE key_id = $4 AND idem_key = $5 AND claim = $6
         AND (state = 'in_progress' OR status_code >= 300 OR $1 < 300)`,
      [response.statusCode, JSON.stringify(response.headers), response.body, keyId, idemKey, claim, expiresAt],
    );
  }

  async release(keyId: string, idemKey: string, claim: string): Promise<void> {
    await run(this.pool, `DELETE FROM idempotency_records WHERE key_id = $1 AND idem_key = $2 AND claim = $3 AND state = 'in_progress'`, [keyId, idemKey, claim]);
  }

  async renew(owner: string, leaseUntil: number): Promise<void> {
    await run(this.pool, `UPDATE idempotency_records SET lease_until = $1 WHERE owner = $2 AND state = 'in_progress'`, [leaseUntil, owner]);
  }

  async purgeExpired(now: number): Promise<number> {
    return run(this.pool, `DELETE FROM idempotency_records WHERE ${EXPIRED}`, [now]);
  }
}
