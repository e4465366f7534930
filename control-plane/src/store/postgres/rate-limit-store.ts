// The shared GCRA rows: one UPSERT per admission, which the row lock of ON CONFLICT makes
// atomic across processes, so N replicas admit a key's limit once, not N times. The SQL is
// gcraStep / gcraCredit (pipeline/gcra.ts) written as one statement each. A token-spending
// request takes its request slot and its tokens in one statement too (two UPSERTs in one
// WITH, the second fed by the first): one round trip per request, not two.
import type pg from 'pg';
import { emissionInterval, gcraStep, MINUTE_MS, SLACK_MS } from '../../pipeline/gcra.js';
import type { GcraStep, LimitCredit, LimitKind, RateLimitStore } from '../rate-limit-store.js';

/** `ON CONFLICT` of one GCRA step on row alias `x`: $now, the step's cost in ms and the admission horizon. */
function gcraUpdate(x: string, now: string, cost: string, horizon: string): string {
  const next = `GREATEST(${x}.tat, ${now}::float8) + ${cost}::float8`;
  return `ON CONFLICT (key_id, kind) DO UPDATE SET
               admitted = ${next} <= ${horizon}::float8,
               tat = CASE WHEN ${next} <= ${horizon}::float8 THEN ${next} ELSE ${x}.tat END`;
}

const TAKE = `INSERT INTO rate_limits AS r (key_id, kind, tat, admitted) VALUES ($1, $2, $3, $4)
             ${gcraUpdate('r', '$5', '$6', '$7')}
             RETURNING tat, admitted`;

// The token row is written only when the request row admitted (`FROM req WHERE
// req.admitted` feeds its INSERT), which also orders the row locks, requests then tokens,
// the same for every caller.
const TAKE_REQUEST_AND_TOKENS = `WITH req AS (
               INSERT INTO rate_limits AS r (key_id, kind, tat, admitted) VALUES ($1::text, 'requests', $2::float8, $3::boolean)
               ${gcraUpdate('r', '$4', '$5', '$6')}
               RETURNING tat, admitted
             ), tok AS (
               INSERT INTO rate_limits AS r (key_id, kind, tat, admitted)
               SELECT $1::text, 'tokens', $7::float8, $8::boolean FROM req WHERE req.admitted
               ${gcraUpdate('r', '$4', '$9', '$6')}
               RETURNING tat, admitted
             )
             SELECT req.tat AS request_tat, req.admitted AS request_admitted, tok.tat AS token_tat, tok.admitted AS token_admitted
               FROM req LEFT JOIN tok ON TRUE`;

export class PgRateLimitStore implements RateLimitStore {
  constructor(private readonly pool: pg.Pool) {}

  async take(keyId: string, kind: LimitKind, limit: number, now: number, cost: number): Promise<GcraStep> {
    // What a key without a row gets: the step from a full bucket, computed here.
    const fresh = gcraStep(undefined, limit, now, cost);
    const result = await this.pool.query({
      // Named: prepared once per connection, it runs on every request.
      name: 'svc_rate_limit_take',
      text: TAKE,
      values: [keyId, kind, fresh.tat, fresh.admitted, now, cost * emissionInterval(limit), now + MINUTE_MS + SLACK_MS],
    });
    const row = result.rows[0] as { tat: number; admitted: boolean };
    return { tat: Number(row.tat), admitted: row.admitted };
  }

  async takeRequestAndTokens(
    keyId: string,
    requestLimit: number,
    tokenLimit: number,
    now: number,
    tokens: number,
  ): Promise<{ requests: GcraStep; tokens: GcraStep | null }> {
    const freshRequest = gcraStep(undefined, requestLimit, now, 1);
    const freshTokens = gcraStep(undefined, tokenLimit, now, tokens);
    const result = await this.pool.query({
      name: 'svc_rate_limit_take_request_and_tokens',
      text: TAKE_REQUEST_AND_TOKENS,
      values: [
        keyId,
        freshRequest.tat,
        freshRequest.admitted,
        now,
        emissionInterval(requestLimit),
        now + MINUTE_MS + SLACK_MS,
        freshTokens.tat,
        freshTokens.admitted,
        tokens * emissionInterval(tokenLimit),
      ],
    });
    const row = result.rows[0] as { request_tat: number; request_admitted: boolean; token_tat: number | null; token_admitted: boolean | null };
    return {
      requests: { tat: Number(row.request_tat), admitted: row.request_admitted },
      tokens: row.token_admitted === null ? null : { tat: Number(row.token_tat), admitted: row.token_admitted },
    };
  }

  async credit(credits: readonly LimitCredit[], now: number): Promise<void> {
    if (credits.length === 0) return;
    // The rows are locked in key order first: two replicas settling overlapping keys at once
    // would otherwise lock them in whatever order each plan visits them, and could deadlock.
    await this.pool.query(
      `WITH c AS (SELECT * FROM unnest($2::text[], $3::text[], $4::float8[], $5::float8[]) AS c(key_id, kind, amount, interval)),
            locked AS MATERIALIZED (SELECT r.key_id, r.kind FROM rate_limits r JOIN c ON r.key_id = c.key_id AND r.kind = c.kind
                                     ORDER BY r.key_id, r.kind FOR UPDATE OF r)
       UPDATE rate_limits r SET tat = GREATEST($1::float8, GREATEST(r.tat, $1::float8) - c.amount * c.interval)
         FROM c JOIN locked l ON l.key_id = c.key_id AND l.kind = c.kind
        WHERE r.key_id = c.key_id AND r.kind = c.kind`,
      [now, credits.map((c) => c.keyId), credits.map((c) => c.kind), credits.map((c) => c.amount), credits.map((c) => emissionInterval(c.limit))],
    );
  }

  async purge(kind: LimitKind, now: number): Promise<number> {
    return (await this.pool.query('DELETE FROM rate_limits WHERE kind = $1 AND tat < $2', [kind, now])).rowCount ?? 0;
  }
}
