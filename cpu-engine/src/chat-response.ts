// Chat completion bodies and stream chunks in OpenAI's shapes; the router and
// billing read `usage` and `finish_reason` from exactly these fields.
import { randomBytes } from 'node:crypto';

export type FinishReason = 'stop' | 'length';

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

export function chatCompletion(meta: CompletionMeta, content: string, finishReason: FinishReason, u: Usage) {
  return {
    id: meta.id,
    object: 'chat.completion' as const,
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, message: { role: 'assistant' as const, content }, finish_reason: finishReason }],
    usage: u,
  };
}

type Delta = { role?: 'assistant'; content?: string };

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
/** The last choice chunk: empty delta and why generation ended. */
export const finishChunk = (meta: CompletionMeta, finishReason: FinishReason, u?: Usage) => chunk(meta, {}, finishReason, u);
/** With stream_options.include_usage: after the finish chunk, no choices, the usage. */
export function usageChunk(meta: CompletionMeta, u: Usage) {
  return { id: meta.id, object: 'chat.completion.chunk' as const, created: meta.created, model: meta.model, choices: [], usage: u };
}
