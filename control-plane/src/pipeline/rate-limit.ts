// Step 6: per-key requests per minute by org tier, with OpenAI's headers on every
// keyed response and `retry-after` on 429. Buckets live in this process; several
// control-plane replicas each enforce the limit on the traffic they see.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, type Clock } from '@svc/shared';
import { formatResetDuration, take, type Bucket } from './token-bucket.js';

export interface TierLimits {
  2: number;
  3: number;
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly limits: TierLimits,
    private readonly clock: Clock,
  ) {}

  take(keyId: string, tier: 2 | 3) {
    const now = this.clock.now();
    const { bucket, result } = take(this.buckets.get(keyId), this.limits[tier], now);
    this.buckets.set(keyId, bucket);
    return result;
  }

  /** Drops buckets that have refilled completely; they hold nothing a fresh one would not. */
  sweep(): void {
    const now = this.clock.now();
    for (const [keyId, bucket] of this.buckets) {
      if (now - bucket.updatedAt > 60_000) this.buckets.delete(keyId);
    }
  }
}

export function rateLimit(limiter: RateLimiter) {
  return function applyRateLimit(request: FastifyRequest, reply: FastifyReply): void {
    const { key, org } = request.principal!;
    const result = limiter.take(key.id, org.tier);
    reply.header('x-ratelimit-limit-requests', String(result.limit));
    reply.header('x-ratelimit-remaining-requests', String(result.remaining));
    reply.header('x-ratelimit-reset-requests', formatResetDuration(result.resetMs));
    if (!result.allowed) {
      const seconds = Math.max(1, Math.ceil(result.retryAfterMs / 1000));
      throw new ApiError(
        'rate_limited',
        `rate limit of ${result.limit} requests per minute reached for this key; retry after ${seconds}s with jitter`,
        { headers: { 'retry-after': String(seconds) } },
      );
    }
  };
}
