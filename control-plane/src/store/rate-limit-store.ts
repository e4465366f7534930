// Per-key limit state shared by every process on one database (PostgreSQL). SQLite is one
// process and keeps its buckets in memory, so it has none of this. The math is GCRA
// (pipeline/gcra.ts); the store runs one step atomically, or a request's two (its slot,
// then its tokens) in one statement.
export type LimitKind = 'requests' | 'tokens';

export interface LimitCredit {
  keyId: string;
  kind: LimitKind;
  limit: number;
  /** Units given back (positive) or taken on top (negative). */
  amount: number;
}

export interface GcraStep {
  tat: number;
  admitted: boolean;
}

/**
 * A replica's lease of a key's allowance: `requests` slots taken at once in place of one,
 * granted only if `headroomMs` of refill time stays in both rows afterwards (see
 * pipeline/allowance-lease.ts). Refused as a whole step when it does not fit.
 */
export interface LeaseStep {
  requests: number;
  headroomMs: number;
}

export interface RateLimitStore {
  /**
   * One admission of `cost` units against the key's `limit` per minute, as one atomic
   * statement: concurrent callers on any process never admit more than the limit between
   * them. Returns the key's theoretical arrival time afterwards and whether it fit.
   */
  take(keyId: string, kind: LimitKind, limit: number, now: number, cost: number): Promise<GcraStep>;
  /**
   * A token-spending request's admission as one atomic statement: one unit of the key's
   * `requests` limit and, only if that is admitted, `tokens` units of its `tokens` limit
   * (`tokens` is null when the request was refused: its token row was not touched). The
   * same as `take` twice, in that order, without the second round trip. With `lease`,
   * `lease.requests` slots instead of one, both steps keeping `lease.headroomMs` free.
   */
  takeRequestAndTokens(
    keyId: string,
    requestLimit: number,
    tokenLimit: number,
    now: number,
    tokens: number,
    lease?: LeaseStep,
  ): Promise<{ requests: GcraStep; tokens: GcraStep | null }>;
  /** Applies settlements, one per key and kind (sum them first), in one statement. */
  credit(credits: readonly LimitCredit[], now: number): Promise<void>;
  /** Deletes the `kind` rows of full buckets: they hold nothing a missing row would not. */
  purge(kind: LimitKind, now: number): Promise<number>;
}
