// The shared GCRA rows, which the row lock of each UPSERT makes atomic across processes,
// so N replicas admit a key's limit once, not N times. A request takes one step (its
// request slot) or two (the slot, then its tokens if the slot was admitted): both through
// svc_take_limits (migration 24), the single-step UPSERT of gcraStep / gcraCredit
// (pipeline/gcra.ts) in SQL, run for an array of admissions in one call.
//
// Group commit: while one call is on its way, the admissions that arrive wait and go
// together in the next. At concurrency 1 every request still has its own statement (and
// waits for nothing else); under load one statement carries many requests' steps, so the
// per-request cost of the round trip (client encoding, parsing, syscalls, the server's
// statement overhead) shrinks with the load instead of growing with it.
import type pg from 'pg';
import { emissionInterval, gcraHorizon, gcraStep } from '../../pipeline/gcra.js';
import type { GcraStep, LeaseStep, LimitCredit, LimitKind, RateLimitStore } from '../rate-limit-store.js';

/** One admission waiting for its batch. */
interface PendingAdmission {
  keyId: string;
  kind: LimitKind;
  limit: number;
  cost: number;
  /** The second step, tokens, taken only if the first is admitted. */
  tokens: { limit: number; cost: number } | null;
  now: number;
  /** Refill time both steps must leave in their rows (a lease); 0 for an admission. */
  headroomMs: number;
  resolve(steps: { first: GcraStep; tokens: GcraStep | null }): void;
  reject(err: unknown): void;
}

interface TakeRow {
  o_index: number;
  o_tat: number;
  o_admitted: boolean;
  o_token_tat: number | null;
  o_token_admitted: boolean | null;
}

/** The most admissions one call carries; more wait for the next. */
const MAX_BATCH = 512;

export class PgRateLimitStore implements RateLimitStore {
  private queue: PendingAdmission[] = [];
  private sending = false;

  constructor(private readonly pool: pg.Pool) {}

  async take(keyId: string, kind: LimitKind, limit: number, now: number, cost: number): Promise<GcraStep> {
    return (await this.enqueue(keyId, kind, limit, cost, null, now, 0)).first;
  }

  async takeRequestAndTokens(
    keyId: string,
    requestLimit: number,
    tokenLimit: number,
    now: number,
    tokens: number,
    lease?: LeaseStep,
  ): Promise<{ requests: GcraStep; tokens: GcraStep | null }> {
    const steps = await this.enqueue(keyId, 'requests', requestLimit, lease?.requests ?? 1, { limit: tokenLimit, cost: tokens }, now, lease?.headroomMs ?? 0);
    return { requests: steps.first, tokens: steps.tokens };
  }

  private enqueue(keyId: string, kind: LimitKind, limit: number, cost: number, tokens: PendingAdmission['tokens'], now: number, headroomMs: number) {
    return new Promise<{ first: GcraStep; tokens: GcraStep | null }>((resolve, reject) => {
      this.queue.push({ keyId, kind, limit, cost, tokens, now, headroomMs, resolve, reject });
      if (!this.sending) void this.sendBatches();
    });
  }

  /** Sends what is queued, one call at a time, until the queue is empty. */
  private async sendBatches(): Promise<void> {
    this.sending = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_BATCH);
        await this.send(batch).catch((err: unknown) => {
          for (const a of batch) a.reject(err);
        });
      }
    } finally {
      this.sending = false;
    }
  }

  private async send(batch: PendingAdmission[]): Promise<void> {
    // Key order (stable: one key's admissions keep their arrival order) is the row-lock
    // order every replica uses.
    const ordered = batch.map((a, i) => ({ a, i })).sort((x, y) => (x.a.keyId < y.a.keyId ? -1 : x.a.keyId > y.a.keyId ? 1 : x.i - y.i)).map((x) => x.a);
    const args = {
      key: [] as string[], kind: [] as string[], freshTat: [] as number[], freshAdmitted: [] as boolean[], cost: [] as number[],
      tokenFreshTat: [] as (number | null)[], tokenFreshAdmitted: [] as (boolean | null)[], tokenCost: [] as (number | null)[],
      now: [] as number[], horizon: [] as number[],
    };
    for (const a of ordered) {
      // What a key without a row gets: the step from a full bucket, computed here.
      const fresh = gcraStep(undefined, a.limit, a.now, a.cost, a.headroomMs);
      const tokenFresh = a.tokens && gcraStep(undefined, a.tokens.limit, a.now, a.tokens.cost, a.headroomMs);
      args.key.push(a.keyId);
      args.kind.push(a.kind);
      args.freshTat.push(fresh.tat);
      args.freshAdmitted.push(fresh.admitted);
      args.cost.push(a.cost * emissionInterval(a.limit));
      args.tokenFreshTat.push(tokenFresh?.tat ?? null);
      args.tokenFreshAdmitted.push(tokenFresh?.admitted ?? null);
      args.tokenCost.push(a.tokens ? a.tokens.cost * emissionInterval(a.tokens.limit) : null);
      args.now.push(a.now);
      args.horizon.push(gcraHorizon(a.now, a.headroomMs));
    }
    const result = await this.pool.query<TakeRow>({
      // Named: prepared once per connection, it runs on every request.
      name: 'svc_take_limits',
      text: 'SELECT o_index, o_tat, o_admitted, o_token_tat, o_token_admitted FROM svc_take_limits($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)',
      values: [args.key, args.kind, args.freshTat, args.freshAdmitted, args.cost, args.tokenFreshTat, args.tokenFreshAdmitted, args.tokenCost, args.now, args.horizon],
    });
    for (const row of result.rows) {
      const a = ordered[row.o_index - 1]!;
      a.resolve({
        first: { tat: Number(row.o_tat), admitted: row.o_admitted },
        tokens: row.o_token_admitted === null ? null : { tat: Number(row.o_token_tat), admitted: row.o_token_admitted },
      });
    }
    if (result.rows.length !== ordered.length) throw new Error(`svc_take_limits answered ${result.rows.length} of ${ordered.length} admissions`);
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
