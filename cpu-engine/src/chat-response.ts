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

function chunk(meta: CompletionMeta, delta: Delta, finishReason: FinishReason | null) {
  return {
    id: meta.id,
    object: 'chat.completion.chunk' as const,
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  };
}

/** The first chunk: the role, and empty content as OpenAI sends it. */
export const roleChunk = (meta: CompletionMeta) => chunk(meta, { role: 'assistant', content: '' }, null);
export const contentChunk = (meta: CompletionMeta, content: string) => chunk(meta, { content }, null);
/** The last choice chunk: empty delta and why generation ended. */
export const finishChunk = (meta: CompletionMeta, finishReason: FinishReason) => chunk(meta, {}, finishReason);
/** With stream_options.include_usage: after the finish chunk, no choices, the usage. */
export function usageChunk(meta: CompletionMeta, u: Usage) {
  return { id: meta.id, object: 'chat.completion.chunk' as const, created: meta.created, model: meta.model, choices: [], usage: u };
}
