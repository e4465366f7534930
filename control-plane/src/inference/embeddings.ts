// POST /v1/embeddings behind the route: splits the inputs into batches of about 64 (the
// spec's flat-latency size), sends them to replicas of one pool and quantization in
// parallel, and reassembles the vectors in input order, truncated for Matryoshka models
// and encoded as the client asked. Sandbox keys get deterministic unit vectors instead.
import { ApiError, type Clock } from '@svc/shared';
import { quantizationsByPrice, type CatalogModel } from '../models/catalog.js';
import type { CallContext, InferenceDeps } from './chat-completions.js';
import { batches, encodeBase64Float32, truncateAndNormalise, type EmbeddingPlan, type EmbeddingsRequest } from './embeddings-request.js';
import { callReplica } from './replica-call.js';
import type { Lease, RouteRequest } from './router.js';
import { SANDBOX_DAILY_TOKEN_CAP, sandboxEmbeddings } from './sandbox.js';
import { takeSandboxTokens } from './sandbox-cap.js';
import { ReplicaFailure } from './upstream.js';
import { normaliseUsage, type TokenUsage } from './usage.js';

export interface EmbeddingsCall {
  ctx: CallContext;
  model: CatalogModel;
  body: EmbeddingsRequest;
  plan: EmbeddingPlan;
}

interface UpstreamEmbeddings {
  data?: Array<{ index?: number; embedding?: unknown }>;
  usage?: unknown;
}

interface BatchResult {
  vectors: number[][];
  usage: TokenUsage;
}

export class EmbeddingsService {
  constructor(private readonly deps: InferenceDeps & { clock: Clock }) {}

  async create(call: EmbeddingsCall): Promise<Record<string, unknown>> {
    const { ctx, model, body, plan } = call;
    if (ctx.sandbox) return this.sandbox(call);
    const parts = batches(plan.inputs);
    // The first batch picks the pool and quantization; the others follow it there, so one
    // response never mixes vectors of two variants.
    const first = await this.runBatch(call, parts[0]!, { tenant: ctx.orgId, model, quantization: body.quantization, pool: ctx.pool });
    const { pool, quantization } = first.lease.replica;
    const results: BatchResult[] = new Array(parts.length);
    results[0] = first.value;
    const bill = () => {
      const usage = sumUsage(results);
      this.deps.recorder.record(ctx, { kind: 'embeddings', model: model.id, quantization, pool, usage, card: this.deps.rateCard(model) });
      return usage;
    };
    try {
      await inTurn(parts.length - 1, MAX_BATCHES_IN_FLIGHT, async (i) => {
        results[i + 1] = (await this.runBatch(call, parts[i + 1]!, { tenant: ctx.orgId, model, quantization, pool })).value;
      });
    } catch (err) {
      // What the replicas embedded before one batch was refused is work done for the
      // request: billed, or a refused last input would make the rest free.
      bill();
      throw err;
    }
    const usage = bill();
    return this.response(model, pool, results.flatMap((r) => r.vectors), call, usage);
  }

  private async runBatch(call: EmbeddingsCall, part: { offset: number; items: string[] }, route: RouteRequest) {
    const { model } = call;
    const result = await callReplica(this.deps.router, route, this.deps.attempts, async (lease): Promise<BatchResult> => {
      let response;
      try {
        // Not cancelled when the client leaves, so the work is billed (see ChatCompletionService.complete).
        response = await this.deps.upstream.post(lease.replica, '/v1/embeddings', { model: model.id, input: part.items });
      } catch (err) {
        throw renumber(err, part.offset, typeof call.body.input === 'string');
      }
      return readBatch(lease, (await response.body.json().catch(() => ({}))) as UpstreamEmbeddings, part.items.length, model.dimensions!);
    }, this.deps.onReplicaFailure);
    result.lease.release('ok');
    return result;
  }

  private async sandbox(call: EmbeddingsCall): Promise<Record<string, unknown>> {
    const { ctx, model, plan } = call;
    const { vectors, usage } = sandboxEmbeddings(model, plan.inputs, plan.dimensions);
    await takeSandboxTokens(this.deps.usageStore, this.deps.clock, ctx.keyId, usage.total_tokens, this.deps.sandboxDailyTokenCap ?? SANDBOX_DAILY_TOKEN_CAP);
    const pool = ctx.pool ?? this.deps.defaultPool;
    this.deps.recorder.record(ctx, { kind: 'embeddings', model: model.id, quantization: call.body.quantization ?? quantizationsByPrice(model, this.deps.rateCard(model))[0]!, pool, usage, card: undefined });
    // Already cut to size: no truncation below.
    return this.response(model, pool, vectors, { ...call, plan: { ...plan, dimensions: null } }, usage);
  }

  private response(model: CatalogModel, pool: string, vectors: number[][], call: EmbeddingsCall, usage: TokenUsage) {
    const base64 = call.body.encoding_format === 'base64';
    const dims = call.plan.dimensions;
    return {
      object: 'list',
      model: model.id,
      pool,
      data: vectors.map((vector, index) => {
        const v = dims === null ? vector : truncateAndNormalise(vector, dims);
        // Embeddings are float32 (as OpenAI's): the float format carries the very values
        // the base64 format packs, so both decode to the same vector.
        return { object: 'embedding', index, embedding: base64 ? encodeBase64Float32(v) : v.map(Math.fround) };
      }),
      usage: { prompt_tokens: usage.prompt_tokens, total_tokens: usage.prompt_tokens },
    };
  }
}

/**
 * Batches of one request a replica works on at once. One request may carry 2,048 inputs
 * (32 batches): all at once they took as many slots, and a batch refused late left the
 * others computed for nothing. In turns, a refusal starts no further batch.
 */
export const MAX_BATCHES_IN_FLIGHT = 4;

/** Runs `run(0..count-1)`, at most `width` at once; after the first failure starts none, waits for those running, and throws it. */
async function inTurn(count: number, width: number, run: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { err: unknown } | undefined;
  const lane = async () => {
    while (!failure && next < count) {
      const i = next++;
      try {
        await run(i);
      } catch (err) {
        failure ??= { err };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, count) }, lane));
  if (failure) throw failure.err;
}

function sumUsage(results: ReadonlyArray<BatchResult | undefined>): TokenUsage {
  let tokens = 0;
  for (const r of results) tokens += r?.usage.prompt_tokens ?? 0;
  return { prompt_tokens: tokens, completion_tokens: 0, total_tokens: tokens };
}

/** The replica's vectors in input order, checked: one per input, each of the model's dimension. */
function readBatch(lease: Lease, body: UpstreamEmbeddings, count: number, dimension: number): BatchResult {
  const data = body.data ?? [];
  const vectors: number[][] = new Array(count);
  data.forEach((item, i) => {
    const index = item.index ?? i;
    if (index >= 0 && index < count && Array.isArray(item.embedding)) vectors[index] = item.embedding as number[];
  });
  for (let i = 0; i < count; i++) {
    if (!vectors[i] || vectors[i]!.length !== dimension) {
      throw new ReplicaFailure(`replica ${lease.replica.baseUrl} returned ${vectors[i] ? `a vector of ${vectors[i]!.length} dimensions` : 'no vector'} for input ${i}; the catalog says ${dimension}`, true, 'replica');
    }
  }
  const usage = normaliseUsage(body.usage) ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  return { vectors, usage };
}

/** A replica names inputs of its batch (`input[3]`); the client sent them at `offset + 3`. */
function renumber(err: unknown, offset: number, single: boolean): unknown {
  if (!(err instanceof ApiError) || err.param === undefined) return err;
  const match = /^input\[(\d+)\]$/.exec(err.param);
  if (!match && err.param !== 'input') return err;
  const index = match ? offset + Number(match[1]) : offset;
  const param = single ? 'input' : `input[${index}]`;
  return new ApiError(err.type, err.message.replace(/input\[\d+\]/g, param), { param });
}
