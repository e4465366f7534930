// Requests-per-minute as a token bucket: `limit` tokens refilled evenly over a minute,
// so a client is never locked out for a whole window after a burst. Pure functions.

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

export function take(bucket: Bucket | undefined, limit: number, now: number): { bucket: Bucket; result: TakeResult } {
  const filled = refill(bucket, limit, now);
  const msPerToken = MINUTE_MS / limit;
  if (filled.tokens >= 1) {
    const next = { tokens: filled.tokens - 1, updatedAt: now };
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
      retryAfterMs: Math.ceil((1 - filled.tokens) * msPerToken),
    },
  };
}

/** OpenAI's duration style for reset headers: `20ms`, `1.5s`, `6m0s`. */
export function formatResetDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const totalSeconds = ms / 1000;
  if (totalSeconds < 60) return `${Number(totalSeconds.toFixed(3))}s`;
  const minutes = Math.floor(totalSeconds / 60);
  return `${minutes}m${Math.ceil(totalSeconds - minutes * 60)}s`;
}
