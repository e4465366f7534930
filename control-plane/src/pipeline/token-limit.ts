// Tokens per minute per key, by org tier, next to requests per minute. A request is
// admitted against an estimate (its prompt from the body's size, plus the output it may
// ask for) and settled once the served usage is recorded, the way OpenAI's limits work:
// the estimate keeps a burst from overshooting the cap, the settlement keeps the count
// honest. Like the request buckets, they live in this process on SQLite and in one shared
// GCRA row per key on PostgreSQL (see docs/scaling.md): admission is one statement there,
// and settlements are summed per key and written together, a few times a second.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, type Clock } from '@svc/shared';
import type { LimitCredit, RateLimitStore } from '../store/rate-limit-store.js';
import { gcraResult } from './gcra.js';
import { credit, formatResetDuration, peek, take, type Bucket, type TakeResult } from './token-bucket.js';
import { limitsUnavailable, type TierLimits } from './rate-limit.js';

/** Output tokens assumed when a request does not bound its output. */
export const DEFAULT_OUTPUT_ESTIMATE = 256;
/** JSON text runs about four characters per token; the body's size over-counts a little (keys, quotes), which the settlement gives back. */
const BYTES_PER_TOKEN = 4;
/** How long shared settlements gather before one statement writes them. */
const SETTLE_FLUSH_MS = 100;

export type TokenLimitedRoute = 'chat' | 'embeddings' | 'responses';

interface OutputBounds {
  max_tokens?: unknown;
  max_completion_tokens?: unknown;
  max_output_tokens?: unknown;
}

/** The tokens a request is admitted against: prompt from `bodyBytes`, output from its own bound. */
export function estimateTokens(route: TokenLimitedRoute, bodyBytes: number, body: OutputBounds | undefined): number {
  const prompt = Math.ceil(Math.max(0, bodyBytes) / BYTES_PER_TOKEN);
  if (route === 'embeddings') return prompt;
  const bound = [body?.max_completion_tokens, body?.max_tokens, body?.max_output_tokens].find(
    (v): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0,
  );
  return prompt + (bound ?? DEFAULT_OUTPUT_ESTIMATE);
}

interface KeyBudget {
  bucket: Bucket;
  /** The key's limit when it last spent: its org's tier may change between requests. */
  limit: number;
}

export class TokenLimiter {
  private readonly budgets = new Map<string, KeyBudget>();
  /** Estimates of admitted requests not yet settled, by `${keyId} ${requestId}`. */
  private readonly reservations = new Map<string, number>();

  /** Shared limits: each key's limit when it last spent, and settlements not yet written. */
  private readonly sharedLimits = new Map<string, number>();
  private readonly unwritten = new Map<string, LimitCredit>();
  private flushTimer: NodeJS.Timeout | null = null;

  /** `shared`: the store's rows when several processes share the limits; in memory without. */
  constructor(
    private readonly limits: TierLimits,
    private readonly clock: Clock,
    private readonly shared?: RateLimitStore,
  ) {}

  /** Admission against the shared rows (one statement) or, without, in memory. */
  take(keyId: string, requestId: string, tier: 2 | 3, estimate: number): TakeResult | Promise<TakeResult> {
    if (!this.shared) return this.admit(keyId, requestId, tier, estimate);
    const limit = this.limits[tier];
    const now = this.clock.now();
    return this.shared.take(keyId, 'tokens', limit, now, estimate).then((step) => {
      this.sharedLimits.set(keyId, limit);
      if (step.admitted) this.reservations.set(`${keyId} ${requestId}`, estimate);
      return gcraResult(step.tat, step.admitted, limit, now, estimate);
    });
  }

  /** In-memory admission (one process). */
  admit(keyId: string, requestId: string, tier: 2 | 3, estimate: number): TakeResult {
    const limit = this.limits[tier];
    const { bucket, result } = take(this.budgets.get(keyId)?.bucket, limit, this.clock.now(), estimate);
    this.budgets.set(keyId, { bucket, limit });
    if (result.allowed) this.reservations.set(`${keyId} ${requestId}`, estimate);
    return result;
  }

  /**
   * The request's real token count is known: give back what the estimate over-counted
   * (or take what it missed). Usage recorded after the request was released (a stream
   * the client cut) is taken in full.
   */
  settle(keyId: string, requestId: string, actual: number): void {
    const id = `${keyId} ${requestId}`;
    const estimate = this.reservations.get(id) ?? 0;
    this.reservations.delete(id);
    this.give(keyId, estimate - actual);
  }

  /** The request ended without usage (refused, failed upstream): its estimate comes back whole. */
  release(keyId: string, requestId: string): void {
    const id = `${keyId} ${requestId}`;
    const estimate = this.reservations.get(id);
    if (estimate === undefined) return;
    this.reservations.delete(id);
    this.give(keyId, estimate);
  }

  private give(keyId: string, amount: number): void {
    if (this.shared) return this.giveShared(keyId, amount);
    const budget = this.budgets.get(keyId);
    if (!budget || amount === 0) return;
    this.budgets.set(keyId, { bucket: credit(budget.bucket, budget.limit, this.clock.now(), amount), limit: budget.limit });
  }

  private giveShared(keyId: string, amount: number): void {
    const limit = this.sharedLimits.get(keyId);
    if (limit === undefined || amount === 0) return;
    const pending = this.unwritten.get(keyId);
    this.unwritten.set(keyId, { keyId, kind: 'tokens', limit, amount: (pending?.amount ?? 0) + amount });
    this.flushTimer ??= setTimeout(() => void this.flush(), SETTLE_FLUSH_MS);
    this.flushTimer.unref();
  }

  /** Writes the gathered shared settlements (a failure loses them: the limit errs towards the tenant). */
  async flush(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    if (!this.shared || this.unwritten.size === 0) return;
    const credits = [...this.unwritten.values()];
    this.unwritten.clear();
    await this.shared.credit(credits, this.clock.now()).catch(() => {});
  }

  /** Drops full buckets of keys idle for a minute; they hold nothing a fresh one would not. */
  async sweep(): Promise<void> {
    const now = this.clock.now();
    if (this.shared) {
      // A settlement arriving after this only misses its key's limit and is dropped.
      this.sharedLimits.clear();
      await this.shared.purge('tokens', now);
      return;
    }
    for (const [keyId, { bucket, limit }] of this.budgets) {
      if (now - bucket.updatedAt > 60_000 && peek(bucket, limit, now).remaining >= limit) this.budgets.delete(keyId);
    }
  }
}

/** Admission: a preHandler of the token-limited routes, after the body is validated. */
export function tokenLimit(limiter: TokenLimiter, route: TokenLimitedRoute) {
  return function applyTokenLimit(request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void {
    const { key, org } = request.principal!;
    const bytes = Number(request.headers['content-length']) || 0;
    const estimate = estimateTokens(route, bytes, request.body as OutputBounds | undefined);
    const taken = limiter.take(key.id, request.id, org.tier, estimate);
    if (!(taken instanceof Promise)) return done(answer(reply, estimate, taken));
    taken.then(
      (result) => done(answer(reply, estimate, result)),
      (err: unknown) => {
        request.log.error({ err }, 'shared token limit check failed');
        done(limitsUnavailable());
      },
    );
  };
}

/** Sets the headers; the 429 when the estimate does not fit. */
function answer(reply: FastifyReply, estimate: number, result: TakeResult): ApiError | undefined {
  reply.header('x-ratelimit-limit-tokens', String(result.limit));
  reply.header('x-ratelimit-remaining-tokens', String(result.remaining));
  reply.header('x-ratelimit-reset-tokens', formatResetDuration(result.resetMs));
  if (result.allowed) return undefined;
  const seconds = Math.max(1, Math.ceil(result.retryAfterMs / 1000));
  const message =
    estimate > result.limit
      ? `this request needs about ${estimate} tokens (prompt plus max_tokens), more than this key's limit of ${result.limit} tokens per minute; send a shorter prompt or a lower max_tokens`
      : `rate limit of ${result.limit} tokens per minute reached for this key (this request needs about ${estimate}); retry after ${seconds}s with jitter`;
  return new ApiError('rate_limited', message, {
    headers: { 'retry-after': String(seconds), 'retry-after-ms': String(Math.max(0, result.retryAfterMs)) },
  });
}
