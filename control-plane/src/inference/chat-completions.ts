// POST /v1/chat/completions behind the route: routes to a replica (or, for sandbox keys,
// answers with the deterministic mock), relays the engine's answer in the OpenAI wire
// format with our `pool` and `system_fingerprint`, always asks the engine for usage on every
// chunk (it is what we bill, also for a stream cut short) and passes on only what OpenAI
// sends: usage in the final chunk, and only to clients that asked for it.
import type { SchemaMeter } from './schema-budget.js';
import { randomBase62, type Clock } from '@svc/shared';
import { quantizationsByPrice, type CatalogModel, type Pool, type Quantization, type RateCard } from '../models/catalog.js';
import type { UsageStore } from '../store/usage-store.js';
import { SAMPLING_DEFAULTS, type ChatCompletionRequest } from './chat-request.js';
import { ClientDeparture } from './client-departure.js';
import { systemFingerprint } from './fingerprint.js';
import { callReplica, type FailureListener } from './replica-call.js';
import type { Lease, ReleaseOutcome, Router } from './router.js';
import { SANDBOX_DAILY_TOKEN_CAP, sandboxChat, sandboxLogprobs, sandboxPromptTokens, type SandboxChat } from './sandbox.js';
import { SSE_DONE, SseParser, sseFrame } from './sse.js';
import { ReplicaFailure, type UpstreamClient } from './upstream.js';
import { normaliseUsage, type TokenUsage, type UsageContext, type UsageRecorder } from './usage.js';
import { checkSandboxTokens, takeSandboxTokens } from './sandbox-cap.js';

export interface InferenceDeps {
  router: Router;
  upstream: UpstreamClient;
  recorder: UsageRecorder;
  usageStore: UsageStore;
  clock: Clock;
  rateCard(model: CatalogModel): RateCard | undefined;
  /** Replicas one request may try before giving up. */
  attempts: number;
  onReplicaFailure: FailureListener;
  /** Pool a sandbox answer names when the request pins none. */
  defaultPool: Pool;
  sandboxDailyTokenCap?: number;
}

export interface CallContext extends UsageContext {
  pool: Pool | undefined;
  /** Counts the schemas the request has checked for the first time against its org's budget (schema-budget.ts). */
  schemaMeter?: SchemaMeter | undefined;
  /** Aborted when the client goes away: a stream's replica request is cancelled with it. */
  signal: ClientDeparture;
}

export interface ChatCall {
  ctx: CallContext;
  model: CatalogModel;
  body: ChatCompletionRequest;
  maxTokens: number | undefined;
}

interface UpstreamChoice {
  index?: number;
  logprobs?: unknown;
  message?: { content?: string | null; tool_calls?: unknown[] };
  delta?: Record<string, unknown>;
  finish_reason?: string | null;
}

interface UpstreamCompletion {
  choices?: UpstreamChoice[];
  usage?: unknown;
  /** vLLM reports in the stream what it refuses after its 200 (an out-of-vocabulary logit_bias, a grammar it cannot build), with the HTTP code it would have answered. */
  error?: { message?: string; code?: number | string };
}

/** A streamed request the engine refused once it had answered 200 (an error event with a 4xx code). */
class StreamRefusal extends Error {
  override readonly name = 'StreamRefusal';
}

export class ChatCompletionService {
  constructor(private readonly deps: InferenceDeps) {}

  /** A whole completion (stream: false). */
  async complete(call: ChatCall): Promise<Record<string, unknown>> {
    const { ctx, model } = call;
    if (ctx.sandbox) return this.sandboxResponse(call);
    // Not cancelled when the client leaves (no signal): the replica finishes, the request is
    // billed, as OpenAI bills it, and a retry with the same X-Service-Idempotency-Key gets
    // the answer. Cancelled, the replica's work would go unbilled (the replica reports no
    // usage for a request it did not finish).
    const { value: completion, lease } = await callReplica(this.deps.router, this.route(call), this.deps.attempts, async (lease) => {
      const response = await this.deps.upstream.post(lease.replica, '/v1/chat/completions', upstreamBody(call, false));
      try {
        return (await response.body.json()) as UpstreamCompletion;
      } catch (err) {
        throw new ReplicaFailure(`replica ${lease.replica.baseUrl} sent an unreadable completion: ${(err as Error).message}`, true);
      }
    }, this.deps.onReplicaFailure);
    lease.release('ok');
    const { replica } = lease;
    const usage = normaliseUsage(completion.usage) ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    this.deps.recorder.record(ctx, { kind: 'chat', model: model.id, quantization: replica.quantization, pool: replica.pool, usage, card: this.deps.rateCard(model) });
    return {
      id: completionId(),
      object: 'chat.completion',
      created: this.nowSeconds(),
      model: model.id,
      pool: replica.pool,
      system_fingerprint: systemFingerprint(model.id, replica.quantization, replica.image),
      choices: (completion.choices ?? []).map((c, i) => ({
        index: c.index ?? i,
        message: {
          role: 'assistant',
          content: c.message?.content ?? null,
          refusal: null,
          annotations: [],
          ...(c.message?.tool_calls?.length ? { tool_calls: c.message.tool_calls } : {}),
        },
        logprobs: c.logprobs ?? null,
        finish_reason: c.finish_reason ?? 'stop',
      })),
      usage,
    };
  }

  /**
   * A streamed completion: resolves with the SSE frames once a replica accepted the
   * request (so a refusal is still an ordinary JSON error), then relays its chunks.
   */
  async stream(call: ChatCall): Promise<Iterable<string> | AsyncIterable<string>> {
    const { ctx } = call;
    if (ctx.sandbox) return this.sandboxStream(call);
    // The replica's request is cancelled by this, not by the client's departure itself: until
    // the replica answers, a departure cancels it at once; once it streams, the relay decides.
    const replicaCall = new ClientDeparture();
    const cancel = () => replicaCall.depart();
    if (ctx.signal.aborted) cancel();
    ctx.signal.once('abort', cancel);
    try {
      const { value: response, lease } = await callReplica(this.deps.router, this.route(call), this.deps.attempts, (lease) =>
        this.deps.upstream.post(lease.replica, '/v1/chat/completions', upstreamBody(call, true), replicaCall),
      this.deps.onReplicaFailure);
      return this.relay(call, lease, response.body, replicaCall);
    } finally {
      ctx.signal.off('abort', cancel);
    }
  }

  private route(call: ChatCall) {
    return { tenant: call.ctx.orgId, model: call.model, quantization: call.body.quantization, pool: call.ctx.pool };
  }

  private async *relay(call: ChatCall, lease: Lease, body: AsyncIterable<Buffer>, replicaCall: ClientDeparture): AsyncGenerator<string> {
    const { ctx, model } = call;
    const { replica } = lease;
    const includeUsage = call.body.stream_options?.include_usage === true;
    const id = completionId();
    const created = this.nowSeconds();
    const fingerprint = systemFingerprint(model.id, replica.quantization, replica.image);
    const envelope = { id, object: 'chat.completion.chunk', created, model: model.id, pool: replica.pool, system_fingerprint: fingerprint };
    const parser = new SseParser();
    let usage: TokenUsage | null = null;
    let deltas = 0;
    let outcome: ReleaseOutcome = 'ok';
    // A client that leaves once the replica has its prompt is billed that prompt: the replica
    // goes on until it reports it (its first chunk, once the prompt is processed), then is
    // cancelled. Cancelled at once, a stream left during its prefill was free, however long
    // the prompt: a tenant could have replicas process prompts at no cost. A replica that
    // reports nothing within PREFILL_GRACE_MS is cancelled all the same.
    let grace: NodeJS.Timeout | undefined;
    const left = () => {
      if (usage !== null) replicaCall.depart();
      else grace ??= setTimeout(() => replicaCall.depart(), PREFILL_GRACE_MS);
    };
    if (ctx.signal.aborted) left();
    ctx.signal.once('abort', left);
    try {
      let done = false;
      for await (const bytes of body) {
        for (const data of parser.push(bytes)) {
          if (data === '[DONE]') {
            done = true;
            continue;
          }
          const chunk = JSON.parse(data) as UpstreamCompletion;
          if (chunk.error) {
            const code = Number(chunk.error.code);
            // The request's fault, found late: the replica is fine and stays in service.
            if (code >= 400 && code < 500) throw new StreamRefusal(chunk.error.message ?? 'the model server refused the request');
            throw new ReplicaFailure(`replica ${replica.baseUrl} reported: ${chunk.error.message ?? 'an error'}`, true);
          }
          usage = normaliseUsage(chunk.usage) ?? usage;
          if (chunk.choices && chunk.choices.length > 0) {
            deltas += chunk.choices.filter((c) => c.delta?.content || c.delta?.tool_calls).length;
            const choices = chunk.choices.map((c, i) => ({
              index: c.index ?? i,
              delta: c.delta ?? {},
              ...(c.logprobs != null ? { logprobs: c.logprobs } : {}),
              finish_reason: c.finish_reason ?? null,
            }));
            yield sseFrame(JSON.stringify(includeUsage ? { ...envelope, choices, usage: null } : { ...envelope, choices }));
          }
          // A usage-only chunk is kept, not relayed: an engine may send several (the CPU
          // engine reports progress so while it holds output back), and OpenAI's clients
          // expect one, the last chunk before [DONE].
        }
        if (ctx.signal.aborted && usage !== null) return; // the prompt is known: the replica can stop
      }
      if (!done) throw new ReplicaFailure(`replica ${replica.baseUrl} ended the stream early`, true);
      if (usage && includeUsage) yield sseFrame(JSON.stringify({ ...envelope, choices: [], usage }));
      yield SSE_DONE;
    } catch (err) {
      if (ctx.signal.aborted) return; // the client left: nothing to tell it
      if (err instanceof StreamRefusal) {
        yield sseFrame(JSON.stringify({ error: { type: 'invalid_request', message: `the model server refused the request: ${err.message.slice(0, 400)}` } }));
        return;
      }
      outcome = err instanceof ReplicaFailure && err.blame === 'replica' ? 'failed' : 'suspect';
      this.deps.onReplicaFailure(replica, err as Error);
      const error = { type: 'pool_degraded', message: `the model server in pool ${replica.pool} broke off the stream; retry the request` };
      yield sseFrame(JSON.stringify({ error }));
    } finally {
      ctx.signal.off('abort', left);
      clearTimeout(grace);
      replicaCall.depart();
      lease.release(outcome);
      // A stream cut short (client gone, replica broke) is billed by the last usage the
      // replica reported: the prompt it processed and the tokens generated until then. Only
      // a replica that never sent usage leaves the count to the content chunks relayed.
      const billed = usage ?? { prompt_tokens: 0, completion_tokens: deltas, total_tokens: deltas };
      this.deps.recorder.record(ctx, { kind: 'chat', model: model.id, quantization: replica.quantization, pool: replica.pool, usage: billed, card: this.deps.rateCard(model) });
    }
  }

  private async sandboxAnswer(call: ChatCall): Promise<{ answer: SandboxChat; pool: Pool; quantization: Quantization }> {
    const cap = this.deps.sandboxDailyTokenCap ?? SANDBOX_DAILY_TOKEN_CAP;
    // Every answer takes at least its prompt: a key that cannot afford that is refused
    // before the answer is built.
    await checkSandboxTokens(this.deps.usageStore, this.deps.clock, call.ctx.keyId, sandboxPromptTokens(call.body), cap);
    const answer = sandboxChat(call.model, call.body, call.maxTokens);
    await takeSandboxTokens(this.deps.usageStore, this.deps.clock, call.ctx.keyId, answer.usage.total_tokens, cap);
    const pool = call.ctx.pool ?? this.deps.defaultPool;
    const quantization = call.body.quantization ?? quantizationsByPrice(call.model, this.deps.rateCard(call.model))[0]!;
    this.deps.recorder.record(call.ctx, { kind: 'chat', model: call.model.id, quantization, pool, usage: answer.usage, card: undefined });
    return { answer, pool, quantization };
  }

  private async sandboxResponse(call: ChatCall): Promise<Record<string, unknown>> {
    const { answer, pool, quantization } = await this.sandboxAnswer(call);
    return {
      id: completionId(),
      object: 'chat.completion',
      created: this.nowSeconds(),
      model: call.model.id,
      pool,
      system_fingerprint: systemFingerprint(call.model.id, quantization, 'sandbox'),
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: answer.toolCalls ? null : answer.pieces.join(''), refusal: null, annotations: [], ...(answer.toolCalls ? { tool_calls: answer.toolCalls } : {}) },
          logprobs: call.body.logprobs ? { content: sandboxLogprobs(answer.pieces, call.body.top_logprobs ?? 0) } : null,
          finish_reason: answer.finishReason,
        },
      ],
      usage: answer.usage,
    };
  }

  private async sandboxStream(call: ChatCall): Promise<Iterable<string>> {
    const { answer, pool, quantization } = await this.sandboxAnswer(call);
    const includeUsage = call.body.stream_options?.include_usage === true;
    const envelope = {
      id: completionId(),
      object: 'chat.completion.chunk',
      created: this.nowSeconds(),
      model: call.model.id,
      pool,
      system_fingerprint: systemFingerprint(call.model.id, quantization, 'sandbox'),
    };
    const frame = (delta: Record<string, unknown>, finish: string | null, logprobs?: unknown) =>
      sseFrame(JSON.stringify({ ...envelope, choices: [{ index: 0, delta, ...(logprobs ? { logprobs } : {}), finish_reason: finish }], ...(includeUsage ? { usage: null } : {}) }));
    const frames = [frame({ role: 'assistant', content: answer.toolCalls ? null : '' }, null)];
    if (answer.toolCalls) frames.push(frame({ tool_calls: answer.toolCalls.map((c, index) => ({ index, ...c })) }, null));
    const logprobs = call.body.logprobs ? sandboxLogprobs(answer.pieces, call.body.top_logprobs ?? 0) : undefined;
    answer.pieces.forEach((piece, i) => frames.push(frame({ content: piece }, null, logprobs && { content: [logprobs[i]] })));
    frames.push(frame({}, answer.finishReason));
    if (includeUsage) frames.push(sseFrame(JSON.stringify({ ...envelope, choices: [], usage: answer.usage })));
    frames.push(SSE_DONE);
    return frames;
  }

  private nowSeconds(): number {
    return Math.floor(this.deps.clock.now() / 1000);
  }
}

/** How long a stream whose client left may run on for the replica to report the prompt it processed. */
export const PREFILL_GRACE_MS = 60_000;

const completionId = (): string => `chatcmpl-${randomBase62(24)}`;

/**
 * What the replica gets: the client's request minus our extensions, the spec's sampling
 * defaults filled in (so vLLM, whose own defaults differ, answers like the CPU engine),
 * usage always asked for on streams. `n` is not sent: only 1 is accepted, the engines' default.
 */
export function upstreamBody(call: Pick<ChatCall, 'model' | 'body' | 'maxTokens'>, stream: boolean): Record<string, unknown> {
  const { body } = call;
  const out: Record<string, unknown> = {
    model: call.model.id,
    messages: body.messages,
    temperature: body.temperature ?? SAMPLING_DEFAULTS.temperature,
    top_p: body.top_p ?? SAMPLING_DEFAULTS.top_p,
    top_k: body.top_k ?? SAMPLING_DEFAULTS.top_k,
  };
  if (call.maxTokens !== undefined) out.max_tokens = call.maxTokens;
  for (const field of PASSED_THROUGH) if (body[field] !== undefined) out[field] = body[field];
  if (stream) {
    out.stream = true;
    // Usage so far on every chunk (vLLM's continuous_usage_stats, which the CPU engine
    // mirrors): a stream cut before its final usage chunk is still billed what the replica
    // processed, the prompt included.
    out.stream_options = { include_usage: true, continuous_usage_stats: true };
  }
  return out;
}

/** Fields the engines take as the client sent them (engine-features.ts keeps each engine to what it honours). */
const PASSED_THROUGH = [
  'stop',
  'seed',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'frequency_penalty',
  'presence_penalty',
  'logprobs',
  'top_logprobs',
  'logit_bias',
  // vLLM (>= 0.10) takes OpenAI's response_format natively and enforces it with the
  // guided-decoding backend it was started with (engine-adapter: --structured-outputs-config).
  'response_format',
] as const satisfies ReadonlyArray<keyof ChatCompletionRequest>;
