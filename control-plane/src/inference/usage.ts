// Inference usage: what one served request costs by its model's rate card, and the record
// that bills it. Prices are USD per million tokens, so a token costs `price` micro-dollars;
// records keep nano-dollars (integers) so sums stay exact.
import { newId, type Clock } from '@svc/shared';
import type { Quantization, RateCard } from '../models/catalog.js';
import type { UsageKind, UsageRecord, UsageStore } from '../store/usage-store.js';

export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function costNanos(card: RateCard, quantization: Quantization, promptTokens: number, completionTokens: number): number {
  const price = card.prices[quantization];
  if (!price) return 0;
  return Math.round(promptTokens * price.input_per_million_tokens * 1000 + completionTokens * price.output_per_million_tokens * 1000);
}

/** A replica's usage object made safe: non-negative integers, total = prompt + completion. */
export function normaliseUsage(raw: unknown): TokenUsage | null {
  if (typeof raw !== 'object' || raw === null) return null;
  const u = raw as Record<string, unknown>;
  const count = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : 0);
  const prompt = count(u.prompt_tokens);
  const completion = count(u.completion_tokens);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

export interface UsageContext {
  orgId: string;
  keyId: string;
  requestId: string;
  sandbox: boolean;
  user: string | undefined;
  /** performance.now() when the request arrived; the record keeps how long it took. */
  startedAt?: number;
}

export interface ServedRequest {
  kind: UsageKind;
  model: string;
  quantization: Quantization;
  pool: string;
  usage: TokenUsage;
  card: RateCard | undefined;
}

/**
 * Writes usage records in small batches: one transaction per batch instead of one per
 * request keeps SQLite off the hot path. A batch waits at most `flushMs` (or until it has
 * `maxBatch` records); reads flush first, and closing flushes what is left, so only a
 * crash of the process can lose the last few milliseconds of records.
 */
export class UsageRecorder {
  private pending: UsageRecord[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: UsageStore,
    private readonly clock: Clock,
    private readonly log: { error(obj: object, msg: string): void },
    private readonly options: { flushMs: number; maxBatch: number } = { flushMs: 20, maxBatch: 256 },
    /** Told each served request's real token count (the tokens-per-minute limit settles on it). */
    private readonly onServed: (ctx: UsageContext, totalTokens: number) => void = () => {},
  ) {}

  private readonly observers: Array<(ctx: UsageContext, served: ServedRequest) => void> = [];

  /** Tells `observer` of every served request as it is recorded (the service metrics). */
  observe(observer: (ctx: UsageContext, served: ServedRequest) => void): void {
    this.observers.push(observer);
  }

  /** Queues the record of a served request; sandbox requests are recorded at no cost. */
  record(ctx: UsageContext, served: ServedRequest): void {
    for (const observer of this.observers) observer(ctx, served);
    this.pending.push({
      id: newId('usage'),
      orgId: ctx.orgId,
      keyId: ctx.keyId,
      requestId: ctx.requestId,
      kind: served.kind,
      model: served.model,
      quantization: served.quantization,
      pool: served.pool,
      promptTokens: served.usage.prompt_tokens,
      completionTokens: served.usage.completion_tokens,
      costNanos: ctx.sandbox || !served.card ? 0 : costNanos(served.card, served.quantization, served.usage.prompt_tokens, served.usage.completion_tokens),
      user: ctx.user ?? null,
      sandbox: ctx.sandbox,
      createdAt: this.clock.now(),
      durationMs: ctx.startedAt === undefined ? null : Math.max(0, Math.round(performance.now() - ctx.startedAt)),
    });
    this.onServed(ctx, served.usage.prompt_tokens + served.usage.completion_tokens);
    if (this.pending.length >= this.options.maxBatch) void this.flush();
    else if (this.timer === null) {
      this.timer = setTimeout(() => void this.flush(), this.options.flushMs);
      this.timer.unref();
    }
  }

  /** Writes what is queued; resolves once every record queued so far is stored (or logged as lost). */
  flush(): Promise<void> {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const batch = this.pending;
    this.pending = [];
    this.writing = this.writing.then(() =>
      this.store.append(batch).catch((err: unknown) => this.log.error({ err, lost_usage: batch }, 'writing usage records failed')),
    );
    return this.writing;
  }
}

/** A usage record on the API (GET /v1/usage). */
export function usageView(r: UsageRecord) {
  return {
    id: r.id,
    object: 'usage_record' as const,
    created: Math.floor(r.createdAt / 1000),
    request_id: r.requestId,
    key_id: r.keyId,
    kind: r.kind,
    model: r.model,
    quantization: r.quantization,
    pool: r.pool,
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    total_tokens: r.promptTokens + r.completionTokens,
    cost_usd: r.costNanos / 1e9,
    user: r.user,
    sandbox: r.sandbox,
  };
}

/** One served request as GET /v1/requests/{id} shows it: what was served and what it cost, never which replica. */
export function requestMetadataView(r: UsageRecord) {
  return {
    id: r.requestId,
    object: 'inference.request' as const,
    created: Math.floor(r.createdAt / 1000),
    status: 'completed' as const,
    kind: r.kind,
    key_id: r.keyId,
    model: r.model,
    quantization: r.quantization,
    pool: r.pool,
    usage: { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens },
    cost_usd: r.costNanos / 1e9,
    cost_nanos: r.costNanos,
    duration_ms: r.durationMs ?? null,
    user: r.user,
    sandbox: r.sandbox,
  };
}
