// Response translation, pure: a chat completion's answer becomes a Response object in
// OpenAI's shape (output items, status, usage with its details objects), and a response's
// output becomes the assistant message a chained request continues from.
import type { ChatMessage } from '../chat-request.js';
import type { TokenUsage } from '../usage.js';
import type { ResponsesRequest } from './request.js';

type Obj = Record<string, unknown>;

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface MessageItem {
  id: string;
  type: 'message';
  status: 'in_progress' | 'completed' | 'incomplete';
  role: 'assistant';
  content: Array<{ type: 'output_text'; text: string; annotations: []; logprobs: [] }>;
}

export interface FunctionCallItem {
  id: string;
  type: 'function_call';
  status: 'in_progress' | 'completed' | 'incomplete';
  call_id: string;
  name: string;
  arguments: string;
}

export type OutputItem = MessageItem | FunctionCallItem;

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed';

/** Everything of a Response but its outcome: known before the first token. */
export interface ResponseBase {
  id: string;
  object: 'response';
  created_at: number;
  model: string;
  /** Service extension, as on chat completions. */
  pool: string;
  instructions: string | null;
  max_output_tokens: number | null;
  metadata: Record<string, string>;
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  reasoning: { effort: null; summary: null };
  store: boolean;
  temperature: number;
  top_p: number;
  text: { format: Obj };
  tool_choice: unknown;
  tools: unknown[];
  truncation: 'disabled';
  user: string | null;
  background: false;
  service_tier: 'default';
}

export interface ResponseObject extends ResponseBase {
  status: ResponseStatus;
  error: { code: string; message: string } | null;
  incomplete_details: { reason: 'max_output_tokens' } | null;
  output: OutputItem[];
  usage: ResponseUsage | null;
}

/** Ids: the response's random part in every item id, so an item_reference finds its response. */
export const responseId = (random: string): string => `resp_${random}`;
export const itemId = (response: string, kind: 'msg' | 'fc', index: number): string => `${kind}_${response.slice('resp_'.length)}_${index}`;
/** The response an item id belongs to (undefined for an id we never made). */
export function responseOfItem(id: string): string | undefined {
  const match = /^(?:msg|fc)_([0-9A-Za-z]{1,64})_\d{1,4}$/.exec(id);
  return match ? responseId(match[1]!) : undefined;
}

export function responseBase(args: {
  id: string;
  createdAt: number;
  body: ResponsesRequest;
  pool: string;
  sampling: { temperature: number; top_p: number };
}): ResponseBase {
  const { body } = args;
  return {
    id: args.id,
    object: 'response',
    created_at: args.createdAt,
    model: body.model,
    pool: args.pool,
    instructions: typeof body.instructions === 'string' ? body.instructions : null,
    max_output_tokens: body.max_output_tokens ?? null,
    metadata: body.metadata ?? {},
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    store: body.store !== false,
    temperature: body.temperature ?? args.sampling.temperature,
    top_p: body.top_p ?? args.sampling.top_p,
    text: { format: body.text?.format ?? { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: (body.tools ?? []).map((t) => ({ strict: null, description: null, parameters: null, ...t })),
    truncation: 'disabled',
    user: body.user ?? null,
    background: false,
    service_tier: 'default',
  };
}

export function responseUsage(usage: TokenUsage): ResponseUsage {
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.prompt_tokens + usage.completion_tokens,
  };
}

export const messageItem = (id: string, text: string, status: MessageItem['status']): MessageItem => ({
  id,
  type: 'message',
  status,
  role: 'assistant',
  content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
});

interface ChatAnswer {
  content: string | null | undefined;
  tool_calls?: Array<{ id?: string; function?: { name?: string; arguments?: string } }> | undefined;
  finish_reason: string | null | undefined;
}

/** The output items of one chat answer: its text (if any, or if there is nothing else), then one item per tool call. */
export function outputItems(responseId: string, answer: ChatAnswer): OutputItem[] {
  const calls = answer.tool_calls ?? [];
  const text = answer.content ?? '';
  const status = answer.finish_reason === 'length' ? 'incomplete' : 'completed';
  const items: OutputItem[] = [];
  if (text !== '' || calls.length === 0) items.push(messageItem(itemId(responseId, 'msg', 0), text, status));
  calls.forEach((call, i) => {
    items.push({
      id: itemId(responseId, 'fc', items.length),
      type: 'function_call',
      status: 'completed',
      call_id: call.id ?? `call_${responseId.slice(5)}_${i}`,
      name: call.function?.name ?? '',
      arguments: call.function?.arguments ?? '',
    });
  });
  return items;
}

/**
 * The Response object: every field written out in OpenAI's order. (Spreading the base into
 * a literal with the outcome fields cost V8 a slow dictionary copy, about 10x this.)
 */
export function responseObject(
  base: ResponseBase,
  outcome: Pick<ResponseObject, 'status' | 'error' | 'incomplete_details' | 'output' | 'usage'>,
): ResponseObject {
  return {
    id: base.id,
    object: base.object,
    created_at: base.created_at,
    status: outcome.status,
    background: base.background,
    error: outcome.error,
    incomplete_details: outcome.incomplete_details,
    instructions: base.instructions,
    max_output_tokens: base.max_output_tokens,
    metadata: base.metadata,
    model: base.model,
    output: outcome.output,
    parallel_tool_calls: base.parallel_tool_calls,
    pool: base.pool,
    previous_response_id: base.previous_response_id,
    reasoning: base.reasoning,
    service_tier: base.service_tier,
    store: base.store,
    temperature: base.temperature,
    text: base.text,
    tool_choice: base.tool_choice,
    tools: base.tools,
    top_p: base.top_p,
    truncation: base.truncation,
    usage: outcome.usage,
    user: base.user,
  };
}

export function finishedResponse(base: ResponseBase, output: OutputItem[], finishReason: string | null | undefined, usage: TokenUsage): ResponseObject {
  const incomplete = finishReason === 'length';
  return responseObject(base, {
    status: incomplete ? 'incomplete' : 'completed',
    error: null,
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    output,
    usage: responseUsage(usage),
  });
}

/** The assistant message a response's output adds to its conversation (none for an empty answer). */
export function outputMessages(output: readonly OutputItem[]): ChatMessage[] {
  const text = output.filter((i): i is MessageItem => i.type === 'message').map((i) => i.content.map((c) => c.text).join('')).join('');
  const calls = output
    .filter((i): i is FunctionCallItem => i.type === 'function_call')
    .map((i) => ({ id: i.call_id, type: 'function' as const, function: { name: i.name, arguments: i.arguments } }));
  if (text === '' && calls.length === 0) return [];
  return [{ role: 'assistant', content: text === '' ? null : text, ...(calls.length > 0 ? { tool_calls: calls } : {}) }];
}
