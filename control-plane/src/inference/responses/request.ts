// The Responses API request (POST /v1/responses): its JSON schema, which bounds every
// field at the edge and feeds the OpenAPI document, and the refusals a schema cannot word
// well. Input items and tools are typed loosely in the schema (an object with a `type`)
// and checked item by item in to-chat.ts, so a bad item is named exactly (`input[3].type`)
// instead of "has an invalid type or value" from a union that failed every branch.
import { Type, type Static } from '@sinclair/typebox';
import { ApiError } from '@svc/shared';
import { neutralRules, Refusable, refuseNonNeutral } from '../neutral-fields.js';
import { StringEnum } from '../../http/schemas.js';
import { QUANTIZATIONS } from '../../models/catalog.js';

/** As many items as a chat request has messages. */
export const MAX_INPUT_ITEMS = 2048;
/** OpenAI's bounds on metadata. */
export const MAX_METADATA_KEYS = 16;

/** Loosely typed objects: their other fields are checked in to-chat.ts. */
type Loose<T> = T & Record<string, unknown>;

const Item = Type.Unsafe<Loose<{ type?: string; role?: string }>>(Type.Object(
  { type: Type.Optional(Type.String({ maxLength: 64 })), role: Type.Optional(Type.String({ maxLength: 32 })) },
  {
    additionalProperties: true,
    description:
      'A message ({role, content}, content a string or input_text/output_text parts), a function_call, a function_call_output, or an item_reference to an output item of a stored response.',
  },
));

const ToolItem = Type.Unsafe<Loose<{ type: string }>>(Type.Object(
  { type: Type.String({ maxLength: 64 }) },
  { additionalProperties: true, description: 'A function tool: {type: "function", name, description?, parameters?, strict?}. Built-in tools are refused.' },
));

const ToolChoice = Type.Union([
  StringEnum(['none', 'auto', 'required'] as const),
  Type.Unsafe<Loose<{ type: string; name?: string }>>(
    Type.Object({ type: Type.String({ maxLength: 64 }), name: Type.Optional(Type.String({ maxLength: 64 })) }, { additionalProperties: true }),
  ),
]);

const TextFormat = Type.Object(
  {
    type: StringEnum(['text', 'json_object', 'json_schema'] as const),
    name: Type.Optional(Type.String({ pattern: '^[a-zA-Z0-9_-]{1,64}$' })),
    schema: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    strict: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    description: Type.Optional(Type.String({ maxLength: 4096 })),
  },
  { additionalProperties: false },
);


export const ResponsesRequest = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 128 }),
    input: Type.Union([Type.String(), Type.Array(Item, { maxItems: MAX_INPUT_ITEMS })]),
    instructions: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'A system message put first; not carried to responses that chain on this one.' })),
    previous_response_id: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Type.Null()])),
    store: Type.Optional(Type.Boolean({ description: 'Default true: the response can be read back and chained on until the retention period ends.' })),
    tools: Type.Optional(Type.Array(ToolItem, { maxItems: 128 })),
    tool_choice: Type.Optional(ToolChoice),
    parallel_tool_calls: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    text: Type.Optional(Type.Object({ format: Type.Optional(TextFormat), verbosity: Refusable('"medium" or null') }, { additionalProperties: false })),
    max_output_tokens: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
    temperature: Type.Optional(Type.Union([Type.Number({ minimum: 0, maximum: 2 }), Type.Null()], { description: 'Default 0.7.' })),
    top_p: Type.Optional(Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()], { description: 'Default 1.' })),
    metadata: Type.Optional(
      Type.Union([
        Type.Record(Type.String({ maxLength: 64 }), Type.String({ maxLength: 512 }), { maxProperties: MAX_METADATA_KEYS, additionalProperties: false }),
        Type.Null(),
      ]),
    ),
    user: Type.Optional(Type.String({ maxLength: 256 })),
    stream: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    quantization: Type.Optional(StringEnum(QUANTIZATIONS, { description: 'Service extension; default the cheapest variant the model exposes.' })),
    background: Refusable('false'),
    reasoning: Refusable('null (no catalog model reasons)'),
    include: Refusable('an empty list'),
    conversation: Refusable('null (chain with previous_response_id)'),
    truncation: Refusable('"disabled"'),
    service_tier: Refusable('"auto" or "default"'),
    prompt: Refusable('null'),
    top_logprobs: Refusable('0'),
    max_tool_calls: Refusable('null'),
    stream_options: Refusable('null'),
    prompt_cache_key: Refusable('null'),
    safety_identifier: Refusable('null'),
  },
  { additionalProperties: false },
);

export type ResponsesRequest = Static<typeof ResponsesRequest>;

/** Each field we refuse: the values that mean "not used" (SDKs send some by default) and why it is refused. */
/** An object whose every field is null or absent (what a Response echoes as `reasoning`). */
const allNull = (v: unknown): boolean => v === null || (typeof v === 'object' && !Array.isArray(v) && Object.values(v as object).every((x) => x === null));

const REFUSED = neutralRules({
  background: { neutral: (v) => v === false || v === null, why: 'background responses are not supported; send the request and wait, or stream it' },
  reasoning: { neutral: allNull, why: 'no model in the catalog is a reasoning model' },
  include: { neutral: (v) => v === null || (Array.isArray(v) && v.length === 0), why: 'no extra output (logprobs, encrypted reasoning, tool results) can be included' },
  conversation: { neutral: (v) => v === null, why: 'conversation objects are not supported; chain responses with previous_response_id' },
  truncation: { neutral: (v) => v === null || v === 'disabled', why: 'only "disabled": a conversation longer than the context window is refused, never cut' },
  service_tier: { neutral: (v) => v === null || v === 'auto' || v === 'default', why: 'there is one service tier; pin a pool with X-Service-Pool instead' },
  prompt: { neutral: (v) => v === null, why: 'stored prompt templates are not supported' },
  top_logprobs: { neutral: (v) => v === null || v === 0, why: 'log probabilities are not reported by the Responses API here; use /v1/chat/completions with logprobs' },
  max_tool_calls: { neutral: (v) => v === null, why: 'built-in tools are not supported, so there are no tool calls to bound' },
  stream_options: { neutral: (v) => v === null, why: 'stream options are not supported; usage always arrives in response.completed' },
  prompt_cache_key: { neutral: (v) => v === null, why: 'prompt caching is not offered' },
  safety_identifier: { neutral: (v) => v === null, why: 'use `user` to attribute requests to your end users' },
});

/** Refuses, naming the field, every request field we accept in the schema but do not serve. */
export function refuseUnsupported(body: ResponsesRequest): void {
  refuseNonNeutral(body, REFUSED);
  const verbosity = body.text?.verbosity;
  if (verbosity !== undefined && verbosity !== null && verbosity !== 'medium') {
    throw new ApiError('invalid_request', 'text.verbosity is not supported: the models take no verbosity setting', { param: 'text.verbosity' });
  }
}
