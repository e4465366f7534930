// Step 6: per-key requests per minute by org tier, with OpenAI's headers on every
// keyed response and `retry-after` on 429. One process (SQLite) keeps the buckets in
// memory; replicas on PostgreSQL share one GCRA row per key, each admission one atomic
// step on it (sent in batches, see store/postgres/rate-limit-store.ts), so three replicas
// at 1,200/min admit 1,200 between them, not 3,600.
// Routes that spend model tokens take their request slot later, in token-limit.ts's
// admission (the same statement as their tokens); every other route takes it here, at
// the end of the key checks.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, type Clock } from '@svc/shared';
import type { RateLimitStore } from '../store/rate-limit-store.js';
import { gcraResult } from './gcra.js';
import { formatResetDuration, take, type Bucket, type TakeResult } from './token-bucket.js';

export interface TierLimits {
  2: number;
  3: number;
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  /** `shared`: the store's rows when several processes share the limits; in memory without. */
  constructor(
    private readonly limits: TierLimits,
    private readonly clock: Clock,
    private readonly shared?: RateLimitStore,
  ) {}

  /** The tier's requests per minute. */
  limitFor(tier: 2 | 3): number {
    return this.limits[tier];
  }

  /** Synchronous in memory; one store statement when shared. */
  take(keyId: string, tier: 2 | 3): TakeResult | Promise<TakeResult> {
    const now = this.clock.now();
    const limit = this.limits[tier];
    if (this.shared) return this.shared.take(keyId, 'requests', limit, now, 1).then((step) => gcraResult(step.tat, step.admitted, limit, now, 1));
    const { bucket, result } = take(this.buckets.get(keyId), limit, now);
    this.buckets.set(keyId, bucket);
    return result;
  }

  /** Drops buckets that have refilled completely; they hold nothing a fresh one would not. */
  async sweep(): Promise<void> {
    const now = this.clock.now();
    if (this.shared) {
      await this.shared.purge('requests', now);
      return;
    }
    for (const [keyId, bucket] of this.buckets) {
      if (now - bucket.updatedAt > 60_000) this.buckets.delete(keyId);
    }
  }
}

/** The store could not be asked: refused as retryable, never admitted unchecked nor a 500. */
export function limitsUnavailable(): ApiError {
  return new ApiError('service_unavailable', 'rate limits could not be checked just now; retry with jitter', { headers: { 'retry-after': '1' } });
}

/** Throws the 429 itself when synchronous; a promise (shared limits) rejects with it. */
export function rateLimit(limiter: RateLimiter) {
  return function applyRateLimit(request: FastifyRequest, reply: FastifyReply): void | Promise<void> {
    const { key, org } = request.principal!;
    const taken = limiter.take(key.id, org.tier);
    if (!(taken instanceof Promise)) return answer(reply, taken);
    return taken.then(
      (result) => answer(reply, result),
      (err: unknown) => {
        request.log.error({ err }, 'shared rate limit check failed');
        throw limitsUnavailable();
      },
    );
  };
}

function answer(reply: FastifyReply, result: TakeResult): void {
  const refused = answerRequests(reply, result);
  if (refused) throw refused;
}

/** Sets the requests headers; returns the 429 when the request does not fit. */
export function answerRequests(reply: FastifyReply, result: TakeResult): ApiError | undefined {
  reply.header('x-ratelimit-limit-requests', String(result.limit));
  reply.header('x-ratelimit-remaining-requests', String(result.remaining));
  reply.header('x-ratelimit-reset-requests', formatResetDuration(result.resetMs));
  if (result.allowed) return undefined;
  const seconds = Math.max(1, Math.ceil(result.retryAfterMs / 1000));
  return new ApiError(
    'rate_limited',
    `rate limit of ${result.limit} requests per minute reached for this key; retry after ${seconds}s with jitter`,
    { headers: { 'retry-after': String(seconds) } },
  );
}
