// POST /v1/chat/completions bodies: validation (every bad field is a 400
// invalid_request naming its `param`) and mapping to what the generator needs.
// Fields this engine has no use for (user, parallel_tool_calls, ...) are accepted
// and ignored, as vLLM does. Tools are never shown to the model (its chat template
// gets messages only): it calls one only when tool_choice forces a call, which a
// grammar then constrains (json-grammar.ts), as it does response_format.
import { ApiError } from '../../shared/src/errors.js';
import type { Constraint } from './json-grammar.js';

export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';

/** A message as the chat template sees it: content flattened to one string. */
export interface ChatMessage {
  role: ChatRole;
  content: string;
  name?: string;
  tool_call_id?: string;
  tool_calls?: unknown[];
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  /** undefined: up to the end of the context. */
  maxTokens: number | undefined;
  temperature: number;
  topP: number;
  /** 0: off. */
  topK: number;
  seed: number | undefined;
  stop: string[];
  stream: boolean;
  includeUsage: boolean;
  /**
   * stream_options.continuous_usage_stats (vLLM's extension, with include_usage): every
   * chunk carries the usage so far, so a stream cut short can still be billed.
   */
  continuousUsage: boolean;
  /** OpenAI's -2..2, applied by llama.cpp's penalty sampler over the generated tokens. */
  frequencyPenalty: number;
  presencePenalty: number;
  /** Token id -> logit bias (-100..100; -100 bans the token). */
  logitBias: Map<number, number>;
  constraint: Constraint;
}

/** The service's documented defaults (spec 2.1). */
export const DEFAULT_TEMPERATURE = 0.7;
export const MAX_STOP_SEQUENCES = 4;
const ROLES: readonly ChatRole[] = ['system', 'user', 'assistant', 'tool'];

function invalid(message: string, param: string): ApiError {
  return new ApiError('invalid_request', message, { param });
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An optional field: absent and null both mean "use the default". */
function optional(body: Record<string, unknown>, key: string): unknown {
  const v = body[key];
  return v === null ? undefined : v;
}

export function requireModel(body: Record<string, unknown>): string {
  const model = body.model;
  if (typeof model !== 'string' || model.length === 0) throw invalid('model is required and must be a non-empty string', 'model');
  return model;
}

function numberIn(body: Record<string, unknown>, key: string, min: number, max: number, fallback: number): number {
  const v = optional(body, key);
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    throw invalid(`${key} must be a number between ${min} and ${max}`, key);
  }
  return v;
}

function integerIn(body: Record<string, unknown>, key: string, min: number, max: number): number | undefined {
  const v = optional(body, key);
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw invalid(`${key} must be an integer between ${min} and ${max}`, key);
  }
  return v;
}

function parseContent(value: unknown, param: string, role: ChatRole, hasToolCalls: boolean): string {
  if (typeof value === 'string') return value;
  if (value === null || value === undefined) {
    // OpenAI: an assistant message that only calls tools has no content.
    if (role === 'assistant' && hasToolCalls) return '';
    throw invalid(`${param} is required`, param);
  }
  if (!Array.isArray(value)) throw invalid(`${param} must be a string or an array of text parts`, param);
  return value
    .map((part, j) => {
      if (!isObject(part)) throw invalid(`${param}[${j}] must be an object`, `${param}[${j}]`);
      if (part.type !== 'text') {
        throw invalid(`${param}[${j}].type ${JSON.stringify(part.type)} is not supported; this model takes text parts only`, `${param}[${j}].type`);
      }
      if (typeof part.text !== 'string') throw invalid(`${param}[${j}].text must be a string`, `${param}[${j}].text`);
      return part.text;
    })
    .join('');
}

function parseMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) throw invalid('messages must be a non-empty array', 'messages');
  return value.map((m, i): ChatMessage => {
    const at = `messages[${i}]`;
    if (!isObject(m)) throw invalid(`${at} must be an object with role and content`, at);
    if (typeof m.role !== 'string' || !ROLES.includes(m.role as ChatRole)) {
      throw invalid(`${at}.role must be one of ${ROLES.join(', ')}`, `${at}.role`);
    }
    const role = m.role as ChatRole;
    const toolCalls = m.tool_calls ?? undefined;
    if (toolCalls !== undefined && !Array.isArray(toolCalls)) throw invalid(`${at}.tool_calls must be an array`, `${at}.tool_calls`);
    const message: ChatMessage = { role, content: parseContent(m.content, `${at}.content`, role, Array.isArray(toolCalls) && toolCalls.length > 0) };
    if (m.name != null) {
      if (typeof m.name !== 'string') throw invalid(`${at}.name must be a string`, `${at}.name`);
      message.name = m.name;
    }
    if (m.tool_call_id != null) {
      if (typeof m.tool_call_id !== 'string') throw invalid(`${at}.tool_call_id must be a string`, `${at}.tool_call_id`);
      message.tool_call_id = m.tool_call_id;
    }
    if (toolCalls) message.tool_calls = toolCalls;
    return message;
  });
}

function parseStop(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length > MAX_STOP_SEQUENCES || !list.every((s) => typeof s === 'string' && s.length > 0)) {
    throw invalid(`stop must be a non-empty string or an array of up to ${MAX_STOP_SEQUENCES} non-empty strings`, 'stop');
  }
  return list as string[];
}

export function parseChatRequest(body: unknown): ChatRequest {
  if (!isObject(body)) throw new ApiError('invalid_request', 'the request body must be a JSON object');
  const model = requireModel(body);
  const messages = parseMessages(body.messages);

  const maxTokens = integerIn(body, 'max_tokens', 1, Number.MAX_SAFE_INTEGER) ??
    integerIn(body, 'max_completion_tokens', 1, Number.MAX_SAFE_INTEGER);
  const temperature = numberIn(body, 'temperature', 0, 2, DEFAULT_TEMPERATURE);
  const topP = numberIn(body, 'top_p', 0, 1, 1);
  // -1 is vLLM's spelling of "off".
  const rawTopK = integerIn(body, 'top_k', -1, Number.MAX_SAFE_INTEGER);
  const topK = rawTopK === undefined || rawTopK === -1 ? 0 : rawTopK;
  const seed = integerIn(body, 'seed', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
  const n = integerIn(body, 'n', 1, Number.MAX_SAFE_INTEGER);
  if (n !== undefined && n !== 1) throw invalid('n must be 1: this engine returns one choice per request', 'n');
  const stop = parseStop(body.stop);

  const stream = optional(body, 'stream') ?? false;
  if (typeof stream !== 'boolean') throw invalid('stream must be a boolean', 'stream');
  const streamOptions = optional(body, 'stream_options');
  let includeUsage = false;
  let continuousUsage = false;
  if (streamOptions !== undefined) {
    if (!stream) throw invalid('stream_options is only allowed when stream is true', 'stream_options');
    if (!isObject(streamOptions)) throw invalid('stream_options must be an object', 'stream_options');
    const iu = streamOptions.include_usage ?? false;
    if (typeof iu !== 'boolean') throw invalid('stream_options.include_usage must be a boolean', 'stream_options.include_usage');
    includeUsage = iu;
    const cu = streamOptions.continuous_usage_stats ?? false;
    if (typeof cu !== 'boolean') throw invalid('stream_options.continuous_usage_stats must be a boolean', 'stream_options.continuous_usage_stats');
    // As vLLM: usage on every chunk only when usage was asked for at all.
    continuousUsage = iu && cu;
  }
  const frequencyPenalty = numberIn(body, 'frequency_penalty', -2, 2, 0);
  const presencePenalty = numberIn(body, 'presence_penalty', -2, 2, 0);
  if (optional(body, 'logprobs') === true) throw invalid('this engine does not report logprobs', 'logprobs');
  const logitBias = parseLogitBias(optional(body, 'logit_bias'));
  const constraint = parseConstraint(body);

  return {
    model, messages, maxTokens, temperature, topP, topK, seed, stop, stream, includeUsage, continuousUsage,
    frequencyPenalty, presencePenalty, logitBias, constraint,
  };
}

function parseLogitBias(value: unknown): Map<number, number> {
  const out = new Map<number, number>();
  if (value === undefined) return out;
  if (!isObject(value)) throw invalid('logit_bias must be an object of token ids to numbers', 'logit_bias');
  for (const [key, bias] of Object.entries(value)) {
    if (!/^[0-9]{1,9}$/.test(key)) throw invalid(`logit_bias key ${JSON.stringify(key)} is not a token id`, `logit_bias.${key}`);
    if (typeof bias !== 'number' || !Number.isFinite(bias) || bias < -100 || bias > 100) throw invalid('a logit bias is a number from -100 to 100', `logit_bias[${key}]`);
    out.set(Number(key), bias);
  }
  return out;
}

interface ToolSpec {
  name: string;
  parameters: Record<string, unknown>;
}

function parseTools(value: unknown): ToolSpec[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw invalid('tools must be an array', 'tools');
  return value.map((tool, i) => {
    const fn = isObject(tool) ? tool.function : undefined;
    if (!isObject(tool) || tool.type !== 'function' || !isObject(fn) || typeof fn.name !== 'string' || fn.name.length === 0) {
      throw invalid(`tools[${i}] must be {type: "function", function: {name, parameters}}`, `tools[${i}]`);
    }
    const parameters = fn.parameters ?? { type: 'object' };
    if (!isObject(parameters)) throw invalid(`tools[${i}].function.parameters must be a JSON Schema object`, `tools[${i}].function.parameters`);
    return { name: fn.name, parameters };
  });
}

/** What generation must produce: a forced tool call wins over response_format, as with OpenAI. */
function parseConstraint(body: Record<string, unknown>): Constraint {
  const tools = parseTools(optional(body, 'tools'));
  const choice = optional(body, 'tool_choice');
  if (choice !== undefined && choice !== 'none' && choice !== 'auto') {
    if (choice === 'required') {
      if (tools.length === 0) throw invalid('tool_choice "required" needs tools', 'tool_choice');
      return { kind: 'tool_call', tools };
    }
    const name = isObject(choice) && isObject(choice.function) ? choice.function.name : undefined;
    const tool = tools.find((t) => t.name === name);
    if (!tool) throw invalid('tool_choice must be none, auto, required or {type: "function", function: {name}} naming a tool', 'tool_choice');
    return { kind: 'tool_call', tools: [tool] };
  }
  const format = optional(body, 'response_format');
  if (format === undefined) return { kind: 'none' };
  if (!isObject(format)) throw invalid('response_format must be an object', 'response_format');
  if (format.type === 'text') return { kind: 'none' };
  if (format.type === 'json_object') return { kind: 'json_object' };
  if (format.type === 'json_schema') {
    const spec = format.json_schema;
    if (!isObject(spec) || !isObject(spec.schema)) throw invalid('response_format.json_schema.schema must be a JSON Schema object', 'response_format.json_schema.schema');
    return { kind: 'json_schema', schema: spec.schema };
  }
  throw invalid('response_format.type must be text, json_object or json_schema', 'response_format.type');
}

/**
 * How many tokens may be generated: max_tokens, or what is left of the
 * context. A prompt that leaves no room is a 400 on `messages`; a max_tokens
 * that does not fit after the prompt is a 400 on `max_tokens`.
 */
export function completionBudget(promptTokens: number, maxTokens: number | undefined, contextSize: number): number {
  const room = contextSize - promptTokens;
  if (room < 1) {
    throw invalid(
      `the prompt is ${promptTokens} tokens; this model's context is ${contextSize} tokens, which leaves no room for a completion`,
      'messages',
    );
  }
  if (maxTokens === undefined) return room;
  if (maxTokens > room) {
    throw invalid(
      `max_tokens is ${maxTokens} but the prompt is ${promptTokens} tokens and the context ${contextSize}: at most ${room} completion tokens fit`,
      'max_tokens',
    );
  }
  return maxTokens;
}
