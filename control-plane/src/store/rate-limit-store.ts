// Per-key limit state shared by every process on one database (PostgreSQL). SQLite is one
// process and keeps its buckets in memory, so it has none of this. The math is GCRA
// (pipeline/gcra.ts); the store runs one step atomically.
export type LimitKind = 'requests' | 'tokens';

export interface LimitCredit {
  keyId: string;
  kind: LimitKind;
  limit: number;
  /** Units given back (positive) or taken on top (negative). */
  amount: number;
}

export interface RateLimitStore {
  /**
   * One admission of `cost` units against the key's `limit` per minute, as one atomic
   * statement: concurrent callers on any process never admit more than the limit between
   * them. Returns the key's theoretical arrival time afterwards and whether it fit.
   */
  take(keyId: string, kind: LimitKind, limit: number, now: number, cost: number): Promise<{ tat: number; admitted: boolean }>;
  /** Applies settlements, one per key and kind (sum them first), in one statement. */
  credit(credits: readonly LimitCredit[], now: number): Promise<void>;
  /** Deletes the `kind` rows of full buckets: they hold nothing a missing row would not. */
  purge(kind: LimitKind, now: number): Promise<number>;
}
