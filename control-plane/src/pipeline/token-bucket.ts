// Per-minute limits as a token bucket: `limit` tokens refilled evenly over a minute, so a
// client is never locked out for a whole window after a burst. Requests per minute take
// one token per request; tokens per minute take the request's estimated tokens and settle
// the difference once the real usage is known (`credit`), which may leave the bucket
// below zero for a while when the estimate was low. Pure functions.

export interface Bucket {
  tokens: number;
  updatedAt: number;
}

export interface TakeResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Until the bucket is full again (x-ratelimit-reset-requests). */
  resetMs: number;
  /** Until one token is available; 0 when allowed. */
  retryAfterMs: number;
}

const MINUTE_MS = 60_000;

export function refill(bucket: Bucket | undefined, limit: number, now: number): Bucket {
  if (!bucket) return { tokens: limit, updatedAt: now };
  const elapsed = Math.max(0, now - bucket.updatedAt);
  return { tokens: Math.min(limit, bucket.tokens + (elapsed * limit) / MINUTE_MS), updatedAt: now };
}

export function take(bucket: Bucket | undefined, limit: number, now: number, cost = 1): { bucket: Bucket; result: TakeResult } {
  const filled = refill(bucket, limit, now);
  const msPerToken = MINUTE_MS / limit;
  if (filled.tokens >= cost) {
    const next = { tokens: filled.tokens - cost, updatedAt: now };
    return {
      bucket: next,
      result: {
        allowed: true,
        limit,
        remaining: Math.floor(next.tokens),
        resetMs: Math.ceil((limit - next.tokens) * msPerToken),
        retryAfterMs: 0,
      },
    };
  }
  return {
    bucket: filled,
    result: {
      allowed: false,
      limit,
      remaining: 0,
      resetMs: Math.ceil((limit - filled.tokens) * msPerToken),
      // A cost above the limit can never be met: the wait shown is the full refill, and
      // the caller says why in its message.
      retryAfterMs: Math.ceil((Math.min(cost, limit) - filled.tokens) * msPerToken),
    },
  };
}

/**
 * Gives `amount` tokens back (an estimate that was too high) or, negative, takes more
 * (too low); never above the limit, and possibly below zero, which later takes wait out.
 */
export function credit(bucket: Bucket | undefined, limit: number, now: number, amount: number): Bucket {
  const filled = refill(bucket, limit, now);
  return { tokens: Math.min(limit, filled.tokens + amount), updatedAt: now };
}

/** The state a caller reports in headers without taking anything. */
export function peek(bucket: Bucket | undefined, limit: number, now: number): { remaining: number; resetMs: number } {
  const filled = refill(bucket, limit, now);
  return { remaining: Math.max(0, Math.floor(filled.tokens)), resetMs: Math.ceil((limit - filled.tokens) * (MINUTE_MS / limit)) };
}

/** OpenAI's duration style for reset headers: `20ms`, `1.5s`, `6m0s`. */
export function formatResetDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const totalSeconds = ms / 1000;
  if (totalSeconds < 60) return `${Number(totalSeconds.toFixed(3))}s`;
  const minutes = Math.floor(totalSeconds / 60);
  return `${minutes}m${Math.ceil(totalSeconds - minutes * 60)}s`;
}
