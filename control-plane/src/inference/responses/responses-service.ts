// POST/GET/DELETE /v1/responses behind the routes. A Responses request is translated into
// one chat completion and served by the ChatCompletionService, so it gets exactly what a
// chat completion gets: the same router and replicas, retries, pools, sandbox answers for
// test keys, and usage records billed from the engine's own token counts (a chained
// conversation is sent whole to the engine, so its history is billed as prompt tokens).
// The answer is translated back into a Response object or the semantic event stream, and
// stored per organization when `store` is not false.
import { ApiError, randomBase62, type Clock } from '@svc/shared';
import type { CatalogModel } from '../../models/catalog.js';
import type { ResponseStore } from '../../store/response-store.js';
import { SAMPLING_DEFAULTS, checkChatRequest, type ChatMessage } from '../chat-request.js';
import type { CallContext, ChatCall, ChatCompletionService } from '../chat-completions.js';
import { normaliseUsage } from '../usage.js';
import { refuseUnsupported, type ResponsesRequest } from './request.js';
import { eventFrame, ResponseEventStream, type ChatChunk } from './stream-events.js';
import { inputItemsOf, pageOfItems, type InputItemList, type InputItemQuery } from './input-items.js';
import { referencedItemIds, responsesParam, toChatRequest } from './to-chat.js';
import {
  finishedResponse,
  outputItems,
  outputMessages,
  responseBase,
  responseId,
  responseOfItem,
  type ResponseBase,
  type ResponseObject,
} from './to-response.js';

const DAY_MS = 86_400_000;
/** A chained conversation is stored whole with each response; past this it must start afresh. */
export const MAX_HISTORY_BYTES = 8 * 1024 * 1024;

export interface ResponsesDeps {
  chat: ChatCompletionService;
  store: ResponseStore;
  clock: Clock;
  retentionDays: number;
}

export interface ResponsesCall {
  ctx: CallContext;
  model: CatalogModel;
  body: ResponsesRequest;
}

interface Prepared {
  chatCall: ChatCall;
  id: string;
  history: ChatMessage[];
  /** The request minus the pool, known once a replica answered. */
  base: (pool: string) => ResponseBase;
}

interface ChatAnswer {
  pool?: string;
  choices?: Array<{ message?: { content?: string | null; tool_calls?: Array<{ id?: string; function?: { name?: string; arguments?: string } }> }; finish_reason?: string | null }>;
  usage?: unknown;
}


export class ResponsesService {
  constructor(private readonly deps: ResponsesDeps) {}

  async create(call: ResponsesCall): Promise<ResponseObject> {
    const prepared = await this.prepare(call);
    const completion = (await this.deps.chat.complete(prepared.chatCall)) as ChatAnswer;
    const choice = completion.choices?.[0];
    const output = outputItems(prepared.id, {
      content: choice?.message?.content,
      tool_calls: choice?.message?.tool_calls,
      finish_reason: choice?.finish_reason,
    });
    const usage = normaliseUsage(completion.usage) ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    const response = finishedResponse(prepared.base(completion.pool ?? ''), output, choice?.finish_reason, usage);
    await this.save(call, prepared, response);
    return response;
  }

  /**
   * The event stream: resolves once a replica accepted the request (a refusal is still an
   * ordinary JSON error), then translates the chat stream as it arrives.
   */
  async stream(call: ResponsesCall): Promise<AsyncIterable<string>> {
    const prepared = await this.prepare(call);
    const frames = await this.deps.chat.stream(prepared.chatCall);
    return this.translate(call, prepared, frames);
  }

  async get(orgId: string, id: string): Promise<Record<string, unknown>> {
    const stored = await this.deps.store.getResponse(orgId, id, this.deps.clock.now());
    if (!stored) throw notFound(id, 'response_id');
    return stored;
  }

  /** A page of the items stored response `id` was generated from (input-items.ts). */
  async inputItems(orgId: string, id: string, query: InputItemQuery): Promise<InputItemList> {
    const stored = await this.deps.store.get(orgId, id, this.deps.clock.now());
    if (!stored) throw notFound(id, 'response_id');
    // The stored conversation ends with what this response added.
    const added = outputMessages((stored.response as unknown as ResponseObject).output ?? []).length;
    const conversation = (stored.history as ChatMessage[]).slice(0, stored.history.length - added);
    return pageOfItems(inputItemsOf(id, conversation), query);
  }

  async delete(orgId: string, id: string): Promise<{ id: string; object: 'response'; deleted: true }> {
    if (!(await this.deps.store.delete(orgId, id, this.deps.clock.now()))) throw notFound(id, 'response_id');
    return { id, object: 'response', deleted: true };
  }

  purgeExpired(): Promise<number> {
    return this.deps.store.purgeExpired(this.deps.clock.now());
  }

  private async prepare(call: ResponsesCall): Promise<Prepared> {
    const { body, model, ctx } = call;
    refuseUnsupported(body);
    const now = this.deps.clock.now();
    let previous: ChatMessage[] = [];
    if (body.previous_response_id) {
      const stored = await this.deps.store.get(ctx.orgId, body.previous_response_id, now);
      if (!stored) throw notFound(body.previous_response_id, 'previous_response_id');
      previous = stored.history as ChatMessage[];
    }
    // Each response read once, however many of its items are referenced.
    const referenced = new Map<string, Record<string, unknown>>();
    const owners = new Map<string, Record<string, unknown> | undefined>();
    for (const itemId of new Set(referencedItemIds(body.input))) {
      const owner = responseOfItem(itemId);
      if (owner === undefined) continue;
      if (!owners.has(owner)) owners.set(owner, await this.deps.store.getResponse(ctx.orgId, owner, now));
      const item = (owners.get(owner)?.output as Array<Record<string, unknown>> | undefined)?.find((i) => i.id === itemId);
      if (item) referenced.set(itemId, item);
    }
    refuseOversizedExpansion(body.input, previous, referenced);
    const translation = toChatRequest(body, previous, (id) => referenced.get(id));
    const { chat, sources, history } = translation;
    // The request body alone is bounded by the body limit; a chain or references can grow past it.
    const grown = previous.length > 0 || referenced.size > 0;
    if (body.store !== false && grown && JSON.stringify(history).length > MAX_HISTORY_BYTES) {
      throw new ApiError('invalid_request', `the conversation is larger than ${MAX_HISTORY_BYTES / 1024 / 1024} MiB; start a new one (without previous_response_id)`, {
        param: previous.length > 0 ? 'previous_response_id' : 'input',
      });
    }
    let maxTokens: number | undefined;
    try {
      ({ maxTokens } = checkChatRequest(chat, model, call.ctx.schemaMeter));
    } catch (err) {
      if (err instanceof ApiError && err.param !== undefined) throw new ApiError(err.type, err.message, { param: responsesParam(err.param, sources), ...(err.code !== undefined ? { code: err.code } : {}) });
      throw err;
    }
    const id = responseId(randomBase62(32));
    const createdAt = Math.floor(now / 1000);
    const sampling = { temperature: SAMPLING_DEFAULTS.temperature, top_p: SAMPLING_DEFAULTS.top_p };
    // Usage on the final chunk of a stream is what response.completed reports.
    if (chat.stream) chat.stream_options = { include_usage: true };
    return {
      chatCall: { ctx, model, body: chat, maxTokens },
      id,
      history,
      base: (pool) => responseBase({ id, createdAt, body, pool, sampling }),
    };
  }

  private async *translate(call: ResponsesCall, prepared: Prepared, frames: Iterable<string> | AsyncIterable<string>): AsyncGenerator<string> {
    let events: ResponseEventStream | null = null;
    for await (const frame of frames) {
      const data = frame.startsWith('data: ') ? frame.slice(6).trimEnd() : '';
      if (data === '' || data === '[DONE]') continue;
      const chunk = JSON.parse(data) as ChatChunk & { pool?: string; error?: { message?: string } };
      if (events === null) {
        events = new ResponseEventStream(prepared.base(chunk.pool ?? call.ctx.pool ?? ''));
        yield* events.start().map(eventFrame);
      }
      if (chunk.error) {
        yield* events.fail(chunk.error.message ?? 'the model server broke off the stream').map(eventFrame);
        return;
      }
      yield* events.push(chunk).map(eventFrame);
    }
    if (events === null || call.ctx.signal.aborted) return;
    const { events: last, response } = events.finish();
    // Stored before the client hears it is complete, so it can chain on it at once.
    await this.save(call, prepared, response);
    yield* last.map(eventFrame);
  }

  private async save(call: ResponsesCall, prepared: Prepared, response: ResponseObject): Promise<void> {
    if (call.body.store === false) return;
    const now = this.deps.clock.now();
    await this.deps.store.put({
      id: response.id,
      orgId: call.ctx.orgId,
      response: response as unknown as Record<string, unknown>,
      history: [...prepared.history, ...outputMessages(response.output)],
      createdAt: now,
      expiresAt: now + this.deps.retentionDays * DAY_MS,
    });
  }
}

/**
 * Refuses, before anything is copied, a request whose chain and references would make a
 * conversation past MAX_HISTORY_BYTES, stored or not. Each `item_reference` is a copy of
 * the item it names: 2,000 of them naming one long stored answer (a few KB of request)
 * had the control plane build and send a chat request of over half a gigabyte per
 * request, stalling every tenant's requests behind it.
 */
function refuseOversizedExpansion(input: ResponsesCall['body']['input'], previous: ChatMessage[], referenced: ReadonlyMap<string, Record<string, unknown>>): void {
  let bytes = previous.length > 0 ? JSON.stringify(previous).length : 0;
  if (referenced.size > 0) {
    const sizes = new Map<string, number>();
    for (const id of referencedItemIds(input)) {
      const item = referenced.get(id);
      if (!item) continue;
      let size = sizes.get(id);
      if (size === undefined) sizes.set(id, (size = JSON.stringify(item).length));
      bytes += size;
      if (bytes > MAX_HISTORY_BYTES) break;
    }
  }
  if (bytes > MAX_HISTORY_BYTES) {
    throw new ApiError('invalid_request', `the conversation is larger than ${MAX_HISTORY_BYTES / 1024 / 1024} MiB; start a new one (without previous_response_id), or reference fewer stored items`, {
      param: referenced.size > 0 ? 'input' : 'previous_response_id',
    });
  }
}

const notFound = (id: string, param: string) => new ApiError('not_found', `no response ${JSON.stringify(id)} in your organization (it may have expired, been deleted, or been created with store: false)`, { param });
