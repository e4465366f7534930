// Tokens per minute per key, by org tier, next to requests per minute. A request is
// admitted against an estimate (its prompt from the body's size, plus the output it may
// ask for) and settled once the served usage is recorded, the way OpenAI's limits work:
// the estimate keeps a burst from overshooting the cap, the settlement keeps the count
// honest. Like the request buckets, they live in this process on SQLite and in one shared
// GCRA row per key on PostgreSQL (see docs/scaling.md), and settlements are summed per key
// and written together, a few times a second. On PostgreSQL a key this replica admits
// often is served from a lease of its allowance (allowance-lease.ts): no round trip at all.
//
// A token-limited route takes its request slot here too, with its estimate, as one step
// (`Admission`): in memory the two takes, on PostgreSQL one statement for both, so such a
// request costs one round trip for its limits, not two. The order stays what it was: the
// request slot first, then (only if that is admitted) the tokens. The step runs once the
// body is parsed and before it is validated (preValidation), so a request with an invalid
// body still spends its slot; what it answers waits for validation where the answer came
// after validation before (the token 429, the balance's 402), so a request gets the same
// answer as when the slot was taken in onRequest and the tokens in preHandler.
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { ApiError, type Clock } from '@svc/shared';
import type { LimitCredit, LimitKind, RateLimitStore } from '../store/rate-limit-store.js';
import { admitFromLease, grant, LEASE_HEADROOM_MS, LEASE_MS, LEASE_RETRY_MS, leaseSize, warm, type Heat, type Lease } from './allowance-lease.js';
import { gcraResult } from './gcra.js';
import { credit, formatResetDuration, peek, take, type Bucket, type TakeResult } from './token-bucket.js';
import { answerRequests, limitsUnavailable, rateLimit, type RateLimiter, type TierLimits } from './rate-limit.js';

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

/** A token-spending request's two admissions; `tokens` is null when the request was refused (nothing taken). */
export interface RequestAndTokens {
  request: TakeResult;
  tokens: TakeResult | null;
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

  /** Shared limits: this replica's leases of hot keys' allowances, and what makes a key hot. */
  private readonly leases = new Map<string, Lease>();
  private readonly heat = new Map<string, Heat>();
  private readonly leasing = new Set<string>();
  private readonly leaseRefusedUntil = new Map<string, number>();
  private leaseTimer: NodeJS.Timeout | null = null;
  private closed = false;

  /** `shared`: the store's rows when several processes share the limits; in memory without. */
  constructor(
    private readonly limits: TierLimits,
    private readonly clock: Clock,
    private readonly shared?: RateLimitStore,
  ) {}

  /**
   * A request's slot in `requests` and, only if it is admitted, its token estimate: one
   * store statement when shared, two in-memory takes without. `requests` works on the same
   * store as this limiter (app.ts builds both on `store.rateLimits`).
   */
  takeWithRequest(requests: RateLimiter, keyId: string, requestId: string, tier: 2 | 3, estimate: number): RequestAndTokens | Promise<RequestAndTokens> {
    if (!this.shared) {
      const request = requests.take(keyId, tier);
      if (request instanceof Promise) return request.then((result) => this.admitAfter(result, keyId, requestId, tier, estimate));
      return this.admitAfter(request, keyId, requestId, tier, estimate);
    }
    const requestLimit = requests.limitFor(tier);
    const limit = this.limits[tier];
    const now = this.clock.now();
    const leased = admitFromLease(this.leases.get(keyId), requestLimit, limit, estimate, now);
    if (leased) {
      this.reservations.set(`${keyId} ${requestId}`, estimate);
      if (leased.refill) this.askLease(keyId, requestLimit, limit, estimate, now);
      return { request: leased.request, tokens: leased.tokens };
    }
    const exact = this.shared.takeRequestAndTokens(keyId, requestLimit, limit, now, estimate).then((steps) => {
      const request = gcraResult(steps.requests.tat, steps.requests.admitted, requestLimit, now, 1);
      if (!steps.tokens) return { request, tokens: null };
      this.sharedLimits.set(keyId, limit);
      if (steps.tokens.admitted) this.reservations.set(`${keyId} ${requestId}`, estimate);
      return { request, tokens: gcraResult(steps.tokens.tat, steps.tokens.admitted, limit, now, estimate) };
    });
    // Asked for after the admission, so both go in one statement and the lease comes after it.
    const { heat, hot } = warm(this.heat.get(keyId), now);
    this.heat.set(keyId, heat);
    if (hot) this.askLease(keyId, requestLimit, limit, estimate, now);
    return exact;
  }

  /** Takes a block of the key's allowance in the background, unless one is on its way or was just refused. */
  private askLease(keyId: string, requestLimit: number, tokenLimit: number, estimate: number, now: number): void {
    if (this.leasing.has(keyId) || (this.leaseRefusedUntil.get(keyId) ?? 0) > now) return;
    const size = leaseSize(requestLimit, tokenLimit, estimate);
    if (!size) return;
    const held = this.leases.get(keyId);
    if (held && (held.requestLimit !== requestLimit || held.tokenLimit !== tokenLimit)) this.giveBack(keyId, held);
    this.leasing.add(keyId);
    const refused = () => this.leaseRefusedUntil.set(keyId, this.clock.now() + LEASE_RETRY_MS);
    this.shared!.takeRequestAndTokens(keyId, requestLimit, tokenLimit, now, size.tokens, { requests: size.requests, headroomMs: LEASE_HEADROOM_MS })
      .then((steps) => {
        if (steps.requests.admitted && steps.tokens?.admitted && this.closed) {
          // Granted as the process closed: straight back.
          this.credit(keyId, 'requests', requestLimit, size.requests);
          this.credit(keyId, 'tokens', tokenLimit, size.tokens);
          void this.flush();
          return;
        }
        if (steps.requests.admitted && steps.tokens?.admitted) {
          const limits = { requestLimit, tokenLimit };
          this.leases.set(keyId, grant(this.leases.get(keyId), size, limits, { requestTat: steps.requests.tat, tokenTat: steps.tokens.tat }, this.clock.now()));
          this.sharedLimits.set(keyId, tokenLimit);
          this.leaseTimer ??= setInterval(() => this.returnExpiredLeases(), LEASE_MS / 2);
          this.leaseTimer.unref();
          return;
        }
        // The slots fitted and the tokens did not: the slots go back.
        if (steps.requests.admitted) this.credit(keyId, 'requests', requestLimit, size.requests);
        refused();
      }, refused)
      .finally(() => this.leasing.delete(keyId));
  }

  private returnExpiredLeases(): void {
    const now = this.clock.now();
    for (const [keyId, lease] of this.leases) if (lease.expiresAt <= now) this.giveBack(keyId, lease);
    if (this.leases.size === 0 && this.leaseTimer) {
      clearInterval(this.leaseTimer);
      this.leaseTimer = null;
    }
  }

  /** What a lease still holds goes back to the rows (with the next settlements). */
  private giveBack(keyId: string, lease: Lease): void {
    this.leases.delete(keyId);
    if (lease.requests > 0) this.credit(keyId, 'requests', lease.requestLimit, lease.requests);
    this.credit(keyId, 'tokens', lease.tokenLimit, lease.tokens);
  }

  private admitAfter(request: TakeResult, keyId: string, requestId: string, tier: 2 | 3, estimate: number): RequestAndTokens {
    return { request, tokens: request.allowed ? this.admit(keyId, requestId, tier, estimate) : null };
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
    // A live lease takes it: it goes back to the rows with the lease, or serves this replica's next requests.
    const lease = this.leases.get(keyId);
    if (lease && lease.expiresAt > this.clock.now()) {
      lease.tokens += amount;
      return;
    }
    const limit = this.sharedLimits.get(keyId);
    if (limit !== undefined) this.credit(keyId, 'tokens', limit, amount);
  }

  private credit(keyId: string, kind: LimitKind, limit: number, amount: number): void {
    if (amount === 0) return;
    const id = `${keyId} ${kind}`;
    const pending = this.unwritten.get(id);
    this.unwritten.set(id, { keyId, kind, limit, amount: (pending?.amount ?? 0) + amount });
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

  /** Returns every lease and writes what is owed: the process is closing. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.leaseTimer) clearInterval(this.leaseTimer);
    this.leaseTimer = null;
    for (const [keyId, lease] of this.leases) this.giveBack(keyId, lease);
    await this.flush();
  }

  /** Drops full buckets of keys idle for a minute; they hold nothing a fresh one would not. */
  async sweep(): Promise<void> {
    const now = this.clock.now();
    if (this.shared) {
      // A settlement arriving after this only misses its key's limit and is dropped.
      this.sharedLimits.clear();
      this.heat.clear();
      this.leaseRefusedUntil.clear();
      await this.shared.purge('tokens', now);
      return;
    }
    for (const [keyId, { bucket, limit }] of this.budgets) {
      if (now - bucket.updatedAt > 60_000 && peek(bucket, limit, now).remaining >= limit) this.budgets.delete(keyId);
    }
  }
}

/** Marks a request whose key checks passed and whose limits are still to be taken. */
const AWAITING = Symbol('awaiting admission');

/** What preHandler answers once the body is valid: the token headers and verdict, or a deferred refusal. */
type Verdict = { estimate: number; tokens: TakeResult } | Error;

/**
 * The limits of one token-limited route, as hooks: `keyChecked` at the end of the key
 * checks (onRequest), `preValidation` takes the limits, `preHandler` answers what waited
 * for validation, `onError` spends the slot of a request that failed before
 * preValidation (a body that is not JSON, too large, of another media type), which would
 * otherwise cost nothing.
 */
export class Admission {
  private readonly state = new WeakMap<FastifyRequest, Verdict | typeof AWAITING>();
  private readonly takeRequestOnly: ReturnType<typeof rateLimit>;

  /** `checkBalance`: the billable route's balance check, before anything is taken. */
  constructor(
    private readonly requests: RateLimiter,
    private readonly tokens: TokenLimiter,
    private readonly route: TokenLimitedRoute,
    private readonly checkBalance?: (request: FastifyRequest) => Promise<void> | undefined,
  ) {
    this.takeRequestOnly = rateLimit(requests);
  }

  keyChecked(request: FastifyRequest): void {
    this.state.set(request, AWAITING);
  }

  readonly preValidation = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    this.state.delete(request);
    let balance: Promise<void> | undefined;
    try {
      balance = this.checkBalance?.(request);
    } catch (err) {
      return this.refusedByBalance(request, reply, err as Error, done);
    }
    if (!balance) return this.take(request, reply, done);
    balance.then(
      () => this.take(request, reply, done),
      (err: Error) => this.refusedByBalance(request, reply, err, done),
    );
  };

  readonly preHandler = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const verdict = this.state.get(request);
    this.state.delete(request);
    if (verdict === undefined || verdict === AWAITING) return done();
    if (verdict instanceof Error) return done(verdict);
    done(answer(reply, verdict.estimate, verdict.tokens));
  };

  readonly onError = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (this.state.get(request) !== AWAITING) return;
    this.state.delete(request);
    try {
      await this.takeRequestOnly(request, reply);
    } catch {
      // Refused or not checkable: the request is answered with its own error either way.
    }
  };

  /** The request slot and the estimate, in one step; the request's 429 (or 503) now, the tokens' verdict after validation. */
  private take(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    const { key, org } = request.principal!;
    // The body as sent: a chunked upload has no Content-Length, and had counted as empty.
    const bytes = Math.max(Number(request.headers['content-length']) || 0, request.bodyChars);
    // The body is parsed but not validated: estimateTokens reads only numbers it finds there.
    const estimate = estimateTokens(this.route, bytes, request.body as OutputBounds | undefined);
    let taken: RequestAndTokens | Promise<RequestAndTokens>;
    try {
      taken = this.tokens.takeWithRequest(this.requests, key.id, request.id, org.tier, estimate);
    } catch (err) {
      return done(err as Error);
    }
    if (!(taken instanceof Promise)) return this.admitted(request, reply, estimate, taken, done);
    taken.then(
      (result) => this.admitted(request, reply, estimate, result, done),
      (err: unknown) => {
        request.log.error({ err }, 'shared rate limit check failed');
        done(limitsUnavailable());
      },
    );
  }

  private admitted(request: FastifyRequest, reply: FastifyReply, estimate: number, result: RequestAndTokens, done: HookHandlerDoneFunction): void {
    const refused = answerRequests(reply, result.request);
    if (refused || !result.tokens) return done(refused);
    this.state.set(request, { estimate, tokens: result.tokens });
    done();
  }

  /** An org that may not spend takes no tokens; its request slot is spent as before, and its refusal waits for validation. */
  private refusedByBalance(request: FastifyRequest, reply: FastifyReply, refusal: Error, done: HookHandlerDoneFunction): void {
    const deferred = () => {
      this.state.set(request, refusal);
      done();
    };
    let pending: void | Promise<void>;
    try {
      pending = this.takeRequestOnly(request, reply);
    } catch (err) {
      return done(err as Error);
    }
    if (pending) pending.then(deferred, done);
    else deferred();
  }
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
