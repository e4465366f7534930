// Sandbox keys (svc_sk_test_): deterministic mock outputs derived from the request, so a
// client can develop against the real API shapes for free without touching a replica.
// The same request always gets the same answer; a request with tools gets a tool call, and
// the follow-up carrying the tool's result gets a text answer about it.
import { createHash } from 'node:crypto';
import type { CatalogModel } from '../models/catalog.js';
import { canonicalJson } from '../pipeline/canonical-json.js';
import { contentText, type ChatCompletionRequest } from './chat-request.js';
import { minimalInstance, TOO_LARGE, UNSATISFIABLE } from './schema-instance.js';
import type { TokenUsage } from './usage.js';

export const SANDBOX_DAILY_TOKEN_CAP = 10_000;

export interface SandboxToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface SandboxChat {
  /** The answer cut into the pieces a stream sends, one token each; empty for a tool call. */
  pieces: string[];
  toolCalls: SandboxToolCall[] | null;
  finishReason: 'stop' | 'length' | 'tool_calls';
  usage: TokenUsage;
}

const WORDS = [
  'sandbox', 'response', 'model', 'token', 'stream', 'answer', 'request', 'example', 'gpu', 'pool',
  'quick', 'steady', 'signal', 'vector', 'prompt', 'deterministic', 'mock', 'output', 'test', 'key',
];

/** Rough token count of text: about four characters a token, as for English. */
export const estimateTokens = (text: string): number => Math.ceil(text.length / 4);

/**
 * The prompt as an engine counts it: every message's text and tool calls, plus the tool
 * definitions and the response schema, which an engine renders into the prompt too. The
 * daily cap is taken from this, so megabytes of tool schemas (echoed, and stored with a
 * stored response) are not free.
 */
export function sandboxPromptTokens(body: ChatCompletionRequest): number {
  let tokens = 0;
  for (const m of body.messages) tokens += 3 + estimateTokens(contentText(m.content)) + (m.tool_calls ? estimateTokens(JSON.stringify(m.tool_calls)) : 0);
  if (body.tools && body.tools.length > 0) tokens += estimateTokens(JSON.stringify(body.tools));
  if (body.response_format?.type === 'json_schema') tokens += estimateTokens(JSON.stringify(body.response_format.json_schema));
  return tokens;
}

function digest(value: unknown): Buffer {
  return createHash('sha256').update(canonicalJson(value)).digest();
}

/** A small deterministic generator (mulberry32) seeded from a digest. */
function generator(seed: Buffer): () => number {
  let state = seed.readUInt32LE(0);
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function sandboxChat(model: CatalogModel, body: ChatCompletionRequest, maxTokens: number | undefined): SandboxChat {
  const seed = digest({
    model: model.id, messages: body.messages, tools: body.tools ?? null, tool_choice: body.tool_choice ?? null, seed: body.seed ?? null, response_format: body.response_format ?? null,
  });
  const promptTokens = sandboxPromptTokens(body);
  const last = body.messages.at(-1)!;
  const tool = pickTool(body);
  if (tool && last.role !== 'tool') {
    const args = JSON.stringify(schemaValue(tool.function.parameters ?? { type: 'object' }));
    const call: SandboxToolCall = { id: `call_${seed.toString('hex').slice(0, 24)}`, type: 'function', function: { name: tool.function.name, arguments: args } };
    const completion = 1 + estimateTokens(args);
    return { pieces: [], toolCalls: [call], finishReason: 'tool_calls', usage: usage(promptTokens, completion) };
  }

  const structured = structuredAnswer(body, seed);
  if (structured !== undefined) return cut(jsonPieces(structured, maxTokens), body, maxTokens, promptTokens);

  const next = generator(seed);
  const opening = last.role === 'tool' ? `The tool returned ${JSON.stringify(contentText(last.content).slice(0, 80))}.` : `Sandbox reply ${seed.toString('hex').slice(0, 8)}:`;
  const pieces = opening.split(/(?=\s)/);
  const extra = 8 + Math.floor(next() * 17);
  for (let i = 0; i < extra; i++) pieces.push(` ${WORDS[Math.floor(next() * WORDS.length)]}`);
  pieces[pieces.length - 1] += '.';
  return cut(pieces, body, maxTokens, promptTokens);
}

/** The answer cut by max_tokens (finish "length") and the first stop sequence (finish "stop"). */
function cut(pieces: string[], body: ChatCompletionRequest, maxTokens: number | undefined, promptTokens: number): SandboxChat {
  let finishReason: SandboxChat['finishReason'] = 'stop';
  let kept = pieces;
  if (maxTokens !== undefined && kept.length > maxTokens) {
    kept = kept.slice(0, maxTokens);
    finishReason = 'length';
  }
  const stops = body.stop === undefined ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop;
  const text = kept.join('');
  const stopAt = Math.min(...stops.map((s) => text.indexOf(s)).filter((i) => i >= 0));
  if (Number.isFinite(stopAt)) {
    kept = cutPieces(kept, stopAt);
    finishReason = 'stop';
  }
  return { pieces: kept, toolCalls: null, finishReason, usage: usage(promptTokens, kept.length) };
}

/**
 * With response_format json_schema: the schema's minimal instance (schema-valid by
 * construction, and at most MAX_INSTANCE_CHARS of JSON); json_object: a small object
 * naming the request. Undefined for text answers.
 */
function structuredAnswer(body: ChatCompletionRequest, seed: Buffer): string | undefined {
  const format = body.response_format;
  if (format === undefined || format.type === 'text') return undefined;
  const value = format.type === 'json_schema' ? schemaValue(format.json_schema.schema) : { sandbox: `reply ${seed.toString('hex').slice(0, 8)}` };
  return JSON.stringify(value);
}

/**
 * JSON text cut into four-character pieces, as tokens of JSON text are short; with
 * max_tokens, no more than one past it (all cut needs to answer "length"), so a short
 * answer of a long value never holds the rest of it.
 */
export function jsonPieces(text: string, maxTokens: number | undefined): string[] {
  const count = Math.min(Math.ceil(text.length / 4), maxTokens === undefined ? Infinity : maxTokens + 1);
  return Array.from({ length: count }, (_, i) => text.slice(4 * i, 4 * i + 4));
}

/**
 * The schema's minimal instance; exampleValue's looser guess for a schema with none, or
 * none within the size bound (not checked for tools: response_format and forced calls
 * were refused for that). The guess takes one value per subschema, so it is no larger
 * than the schema, which the tool limits bound.
 */
function schemaValue(schema: Record<string, unknown>): unknown {
  const value = minimalInstance(schema);
  return value === UNSATISFIABLE || value === TOO_LARGE ? exampleValue(schema, 0) : value;
}

/** Unit vectors of the model's dimension (or `dimensions`), one per input, from its text. */
export function sandboxEmbeddings(model: CatalogModel, inputs: readonly string[], dimensions: number | null): { vectors: number[][]; usage: TokenUsage } {
  const size = dimensions ?? model.dimensions!;
  const vectors = inputs.map((input) => {
    const next = generator(digest({ model: model.id, input }));
    const v = Array.from({ length: size }, () => next() * 2 - 1);
    const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0)) || 1;
    return v.map((x) => x / norm);
  });
  const prompt = inputs.reduce((sum, input) => sum + estimateTokens(input), 0);
  return { vectors, usage: { prompt_tokens: prompt, completion_tokens: 0, total_tokens: prompt } };
}

function pickTool(body: ChatCompletionRequest) {
  const tools = body.tools ?? [];
  if (tools.length === 0 || body.tool_choice === 'none') return undefined;
  const choice = body.tool_choice;
  if (typeof choice === 'object') return tools.find((t) => t.function.name === choice.function.name);
  return tools[0];
}

/** A value that satisfies the common parts of a JSON Schema: types, enums, required properties. */
export function exampleValue(schema: unknown, depth: number): unknown {
  if (typeof schema !== 'object' || schema === null || depth > 6) return null;
  const s = schema as Record<string, unknown>;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  if ('const' in s) return s.const;
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'string':
      return 'example';
    case 'integer':
    case 'number':
      return typeof s.minimum === 'number' ? s.minimum : 1;
    case 'boolean':
      return true;
    case 'array':
      return s.items ? [exampleValue(s.items, depth + 1)] : [];
    case 'object': {
      const properties = (s.properties ?? {}) as Record<string, unknown>;
      const required = Array.isArray(s.required) ? (s.required as string[]) : Object.keys(properties);
      return Object.fromEntries(required.map((name) => [name, exampleValue(properties[name], depth + 1)]));
    }
    default:
      return null;
  }
}

function cutPieces(pieces: string[], at: number): string[] {
  const out: string[] = [];
  let used = 0;
  for (const piece of pieces) {
    if (used + piece.length <= at) {
      out.push(piece);
      used += piece.length;
      continue;
    }
    if (at > used) out.push(piece.slice(0, at - used));
    break;
  }
  return out;
}

const usage = (prompt: number, completion: number): TokenUsage => ({ prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion });

export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}

/**
 * Log probabilities for the sandbox's pieces in OpenAI's shape, made up but deterministic:
 * each piece is the likeliest token, followed by `top` alternatives (the piece first) that
 * are ever less likely, so a client's parsing of `logprobs.content` can be developed here.
 */
export function sandboxLogprobs(pieces: readonly string[], top: number): TokenLogprob[] {
  const entry = (token: string, logprob: number) => ({ token, logprob, bytes: [...Buffer.from(token, 'utf8')] });
  return pieces.map((piece, i) => {
    const logprob = -0.01 - (i % 7) * 0.05;
    const alternatives = WORDS.filter((w) => ` ${w}` !== piece).slice(0, Math.max(0, top - 1)).map((w, j) => entry(` ${w}`, logprob - 1 - j));
    return { ...entry(piece, logprob), top_logprobs: top > 0 ? [entry(piece, logprob), ...alternatives] : [] };
  });
}
