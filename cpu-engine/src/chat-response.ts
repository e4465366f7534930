// Chat completion bodies and stream chunks in OpenAI's shapes; the router and
// billing read `usage` and `finish_reason` from exactly these fields.
import { randomBytes } from 'node:crypto';

export type FinishReason = 'stop' | 'length' | 'tool_calls';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function usage(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

export function completionId(): string {
  return `chatcmpl-${randomBytes(12).toString('hex')}`;
}

export interface CompletionMeta {
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/**
 * The tool call in grammar-constrained output `{"name": ..., "arguments": {...}}`, or
 * undefined when the text is not one (cut short by max_tokens or a stop sequence).
 */
export function toolCallFrom(text: string): ToolCall | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const v = value as { name?: unknown; arguments?: unknown };
  if (typeof v?.name !== 'string' || typeof v.arguments !== 'object' || v.arguments === null) return undefined;
  return { id: `call_${randomBytes(12).toString('hex')}`, type: 'function', function: { name: v.name, arguments: JSON.stringify(v.arguments) } };
}

export function chatCompletion(meta: CompletionMeta, content: string, finishReason: FinishReason, u: Usage, toolCall?: ToolCall) {
  const message = toolCall
    ? { role: 'assistant' as const, content: null, tool_calls: [toolCall] }
    : { role: 'assistant' as const, content };
  return {
    id: meta.id,
    object: 'chat.completion' as const,
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, message, finish_reason: toolCall ? 'tool_calls' as const : finishReason }],
    usage: u,
  };
}

type Delta = { role?: 'assistant'; content?: string | null; tool_calls?: Array<ToolCall & { index: number }> };

/**
 * A choice chunk; with `u` (continuous_usage_stats) it also carries the usage so far, as
 * vLLM's chunks do.
 */
function chunk(meta: CompletionMeta, delta: Delta, finishReason: FinishReason | null, u?: Usage) {
  return {
    id: meta.id,
    object: 'chat.completion.chunk' as const,
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
    ...(u ? { usage: u } : {}),
  };
}

/** The first chunk: the role, and empty content as OpenAI sends it. */
export const roleChunk = (meta: CompletionMeta, u?: Usage) => chunk(meta, { role: 'assistant', content: '' }, null, u);
export const contentChunk = (meta: CompletionMeta, content: string, u?: Usage) => chunk(meta, { content }, null, u);
/** A forced tool call is sent whole once generated (its JSON is only a call once complete). */
export const toolCallChunk = (meta: CompletionMeta, call: ToolCall, u?: Usage) => chunk(meta, { tool_calls: [{ index: 0, ...call }] }, null, u);
/** The last choice chunk: empty delta and why generation ended. */
export const finishChunk = (meta: CompletionMeta, finishReason: FinishReason, u?: Usage) => chunk(meta, {}, finishReason, u);
/** With stream_options.include_usage: after the finish chunk, no choices, the usage. */
export function usageChunk(meta: CompletionMeta, u: Usage) {
  return { id: meta.id, object: 'chat.completion.chunk' as const, created: meta.created, model: meta.model, choices: [], usage: u };
}
