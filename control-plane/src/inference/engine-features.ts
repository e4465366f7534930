// Which chat fields each engine honours. vLLM takes the whole OpenAI chat surface; the
// project's CPU engine (llama.cpp) honours most of it, but a request that relies on what it
// cannot do (logprobs, or a schema keyword its grammar cannot enforce) would get an answer
// that silently breaks its contract. Such requests are refused here with a 400 naming the
// field; the neutral values (logprobs false) are accepted, since SDKs send them by default.
import type { Engine } from '../models/catalog.js';
import type { ChatCompletionRequest } from './chat-request.js';
import { grammarAmbiguityProblem } from '@svc/shared/grammar-ambiguity';
import { isRecord, walkSchema } from './json-schema-walk.js';
import { MAX_SCHEMA_NESTING, MAX_SCHEMA_NODES } from './response-format.js';

export interface EngineFeatures {
  penalties: boolean;
  logprobs: boolean;
  logitBias: boolean;
  /** Makes tool calls, so tool_choice "required" or a named function can be honoured. */
  toolCalls: boolean;
  /**
   * How schemas (response_format, forced tool calls) are enforced: 'full' takes every
   * keyword (vLLM's guided decoding), 'grammar' only what a llama.cpp grammar can express.
   */
  schemas: 'full' | 'grammar';
}

export const ENGINE_FEATURES: Record<Engine, EngineFeatures> = {
  vllm: { penalties: true, logprobs: true, logitBias: true, toolCalls: true, schemas: 'full' },
  cpu: { penalties: true, logprobs: false, logitBias: true, toolCalls: true, schemas: 'grammar' },
};

/** The field `body` relies on that `engine` does not honour, with why; undefined when none. */
export function engineFeatureProblem(body: ChatCompletionRequest, engine: Engine): { param: string; message: string } | undefined {
  const features = ENGINE_FEATURES[engine];
  const lacks = (what: string) => `this model's engine (${engine}) does not support ${what}`;
  if (!features.penalties) {
    for (const param of ['frequency_penalty', 'presence_penalty'] as const) {
      if ((body[param] ?? 0) !== 0) return { param, message: `${lacks(param)}; send 0 or leave it out` };
    }
  }
  if (!features.logprobs && body.logprobs === true) return { param: 'logprobs', message: lacks('logprobs') };
  if (!features.logitBias && Object.keys(body.logit_bias ?? {}).length > 0) return { param: 'logit_bias', message: lacks('logit_bias') };
  const choice = body.tool_choice;
  const forcesCall = choice !== undefined && choice !== 'auto' && choice !== 'none';
  if (!features.toolCalls && forcesCall) {
    return { param: 'tool_choice', message: `${lacks('forced tool calls')}: it makes none; use tool_choice "auto" or "none"` };
  }
  if (features.schemas === 'grammar') {
    const format = body.response_format;
    if (format?.type === 'json_schema') {
      const problem = grammarSchemaProblem(format.json_schema.schema, 'response_format.json_schema.schema', engine);
      if (problem) return problem;
    }
    if (forcesCall) {
      for (const [i, tool] of (body.tools ?? []).entries()) {
        if (typeof choice === 'object' && choice.function.name !== tool.function.name) continue;
        const problem = grammarSchemaProblem(tool.function.parameters ?? { type: 'object' }, `tools[${i}].function.parameters`, engine);
        if (problem) return problem;
      }
    }
  }
  return undefined;
}

/** Largest integer magnitude a grammar-constrained engine writes: 15 digits, inside JavaScript's safe range. */
export const GRAMMAR_INTEGER_LIMIT = 999_999_999_999_999;

/** Keywords a llama.cpp grammar enforces (with the CPU engine's translation); annotations pass. */
const GRAMMAR_KEYWORDS = new Set([
  'type', 'enum', 'const', 'anyOf', '$ref', '$defs', 'definitions',
  'properties', 'required', 'additionalProperties',
  'items', 'prefixItems', 'minItems', 'maxItems',
  'minLength', 'maxLength', 'format',
  'minimum', 'maximum',
  'title', 'description', '$schema', '$comment', 'examples', 'default',
]);
export const GRAMMAR_FORMATS = ['date-time', 'date', 'time'];

/**
 * The keyword in `schema` that a llama.cpp grammar cannot enforce, so the engine could
 * produce a value the schema rejects; undefined when every keyword is enforceable.
 */
export function grammarSchemaProblem(schema: Record<string, unknown>, param: string, engine: Engine): { param: string; message: string } | undefined {
  const nodes = walkSchema(schema, MAX_SCHEMA_NODES, MAX_SCHEMA_NESTING);
  if (typeof nodes === 'string') return { param, message: nodes };
  const lacks = (path: string, what: string) => ({ param: path === '' ? param : `${param}.${path}`, message: `this model's engine (${engine}) cannot enforce ${what}` });
  for (const { schema: s, path } of nodes) {
    const key = (k: string) => (path === '' ? k : `${path}.${k}`);
    for (const k of Object.keys(s)) {
      if (!GRAMMAR_KEYWORDS.has(k)) return lacks(key(k), `${k}${k === 'oneOf' ? ' (anyOf is supported)' : ''}`);
    }
    if (!['type', 'enum', 'const', 'anyOf', '$ref', 'properties'].some((k) => k in s)) return lacks(path, 'a value of any type (give the subschema a type)');
    if (s.format !== undefined && !GRAMMAR_FORMATS.includes(s.format as string)) {
      return lacks(key('format'), `format ${String(s.format)}; it enforces ${GRAMMAR_FORMATS.join(', ')}`);
    }
    for (const k of ['enum', 'const'] as const) {
      const values = k === 'enum' ? (Array.isArray(s.enum) ? s.enum : []) : 'const' in s ? [s.const] : [];
      if (values.some((v) => isRecord(v) || Array.isArray(v))) return lacks(key(k), `${k} values that are objects or arrays`);
    }
    if (s.minimum !== undefined || s.maximum !== undefined) {
      // The one bound it honours is the one its integers never leave (zod's safe-integer bounds).
      const wide = s.type === 'integer' && (s.minimum === undefined || (s.minimum as number) <= -GRAMMAR_INTEGER_LIMIT) &&
        (s.maximum === undefined || (s.maximum as number) >= GRAMMAR_INTEGER_LIMIT);
      if (!wide) return lacks(key(s.minimum !== undefined ? 'minimum' : 'maximum'), `numeric bounds (only integer bounds of at least ±${GRAMMAR_INTEGER_LIMIT})`);
    }
  }
  // Keywords the grammar takes, but unions its sampler would follow in exponentially many
  // parses at once: one such schema stalled a replica, every tenant's requests with it.
  const ambiguous = grammarAmbiguityProblem(schema);
  if (ambiguous) return { param: `${param}.${ambiguous.path}`, message: `this model's engine (${engine}) refuses it: ${ambiguous.message}` };
  return undefined;
}
