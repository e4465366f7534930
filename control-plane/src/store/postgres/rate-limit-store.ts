// The shared GCRA rows: one UPSERT per admission, which the row lock of ON CONFLICT makes
// atomic across processes, so N replicas admit a key's limit once, not N times. The SQL is
// gcraStep / gcraCredit (pipeline/gcra.ts) written as one statement each.
import type pg from 'pg';
import { emissionInterval, gcraStep, MINUTE_MS, SLACK_MS } from '../../pipeline/gcra.js';
import type { LimitCredit, LimitKind, RateLimitStore } from '../rate-limit-store.js';

export class PgRateLimitStore implements RateLimitStore {
  constructor(private readonly pool: pg.Pool) {}

  async take(keyId: string, kind: LimitKind, limit: number, now: number, cost: number): Promise<{ tat: number; admitted: boolean }> {
    // What a key without a row gets: the step from a full bucket, computed here.
    const fresh = gcraStep(undefined, limit, now, cost);
    const result = await this.pool.query({
      // Named: prepared once per connection, it runs on every request.
      name: 'svc_rate_limit_take',
      text: `INSERT INTO rate_limits AS r (key_id, kind, tat, admitted) VALUES ($1, $2, $3, $4)
             ON CONFLICT (key_id, kind) DO UPDATE SET
               admitted = GREATEST(r.tat, $5::float8) + $6::float8 <= $7::float8,
               tat = CASE WHEN GREATEST(r.tat, $5::float8) + $6::float8 <= $7::float8
                          THEN GREATEST(r.tat, $5::float8) + $6::float8 ELSE r.tat END
             RETURNING tat, admitted`,
      values: [keyId, kind, fresh.tat, fresh.admitted, now, cost * emissionInterval(limit), now + MINUTE_MS + SLACK_MS],
    });
    const row = result.rows[0] as { tat: number; admitted: boolean };
    return { tat: Number(row.tat), admitted: row.admitted };
  }

  async credit(credits: readonly LimitCredit[], now: number): Promise<void> {
    if (credits.length === 0) return;
    await this.pool.query(
      `UPDATE rate_limits r SET tat = GREATEST($1::float8, GREATEST(r.tat, $1::float8) - c.amount * c.interval)
         FROM unnest($2::text[], $3::text[], $4::float8[], $5::float8[]) AS c(key_id, kind, amount, interval)
        WHERE r.key_id = c.key_id AND r.kind = c.kind`,
      [now, credits.map((c) => c.keyId), credits.map((c) => c.kind), credits.map((c) => c.amount), credits.map((c) => emissionInterval(c.limit))],
    );
  }

  async purge(kind: LimitKind, now: number): Promise<number> {
    return (await this.pool.query('DELETE FROM rate_limits WHERE kind = $1 AND tat < $2', [kind, now])).rowCount ?? 0;
  }
}
