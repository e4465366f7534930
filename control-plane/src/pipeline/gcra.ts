// The per-minute limits as GCRA (generic cell rate algorithm): the state of a key is one
// number, its theoretical arrival time `tat`, so replicas on PostgreSQL can share it with
// one UPSERT per request (store/postgres/rate-limit-store.ts runs `gcraStep` in SQL).
// It admits exactly what the in-memory token bucket (token-bucket.ts) admits: a bucket
// of `limit` tokens refilled evenly over a minute holds (now + MINUTE - tat) / interval
// tokens, where interval = MINUTE / limit is what one token costs. Pure functions.
import type { TakeResult } from './token-bucket.js';

export const MINUTE_MS = 60_000;
/**
 * Float slack on the admission test: `tat` is a float of epoch milliseconds, so a limit
 * that does not divide a minute evenly (7 per minute) could refuse its last token by a
 * rounding error. A microsecond is far below one token's worth at any limit we allow.
 */
export const SLACK_MS = 0.001;

/** Milliseconds one unit of the limit stands for. */
export function emissionInterval(limit: number): number {
  return MINUTE_MS / limit;
}

/**
 * One admission: the new `tat` (unchanged when refused) and whether `cost` fits. An
 * absent row (`tat` undefined, or in the past) is a full bucket. `headroomMs` asks for
 * that much of the bucket (in refill time) to stay after the step: a replica's lease of
 * allowance (allowance-lease.ts) is granted only while the key is far from its limit.
 * Mirrored by the SQL.
 */
export function gcraStep(tat: number | undefined, limit: number, now: number, cost: number, headroomMs = 0): { tat: number; admitted: boolean } {
  const start = Math.max(tat ?? now, now);
  const next = start + cost * emissionInterval(limit);
  if (next <= gcraHorizon(now, headroomMs)) return { tat: next, admitted: true };
  return { tat: tat ?? now, admitted: false };
}

/** The latest `tat` a step may leave: a minute ahead (a full bucket's worth), less the headroom asked for. */
export function gcraHorizon(now: number, headroomMs = 0): number {
  return now + MINUTE_MS + SLACK_MS - headroomMs;
}

/** The headers' values for a step's outcome, as token-bucket.ts reports them. */
export function gcraResult(tat: number, admitted: boolean, limit: number, now: number, cost: number): TakeResult {
  const interval = emissionInterval(limit);
  const start = Math.max(tat, now);
  // Time until the bucket is full again, and the tokens left in it.
  const resetMs = Math.ceil(start - now);
  const tokens = (now + MINUTE_MS - start) / interval;
  if (admitted) {
    return { allowed: true, limit, remaining: Math.max(0, Math.floor(tokens + SLACK_MS / interval)), resetMs, retryAfterMs: 0 };
  }
  // A cost above the limit can never be met: the wait shown is the full refill.
  return { allowed: false, limit, remaining: 0, resetMs, retryAfterMs: Math.max(0, Math.ceil((Math.min(cost, limit) - tokens) * interval)) };
}

/**
 * Gives `amount` units back (an estimate that was too high) or, negative, takes more (too
 * low): never beyond a full bucket, and possibly past a minute's worth, which later
 * admissions wait out. Mirrored by the SQL of the settlement.
 */
export function gcraCredit(tat: number | undefined, limit: number, now: number, amount: number): number {
  const start = Math.max(tat ?? now, now);
  return Math.max(now, start - amount * emissionInterval(limit));
}
