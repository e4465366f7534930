// The chat-completion request (spec 2.1): its JSON schema, which validates the shape of
// every field at the edge and feeds the OpenAPI document, and the checks a schema cannot
// say (field combinations, references between messages and tools, the model's limits).
import type { SchemaMeter } from './schema-budget.js';
import { Type, type Static } from '@sinclair/typebox';
import { engineFeatureProblem } from './engine-features.js';
import { compiledSchemaProblem, MAX_SCHEMA_BYTES, MAX_TOOLS_SCHEMA_BYTES, ResponseFormat, responseFormatProblem, toolParametersProblem } from './response-format.js';
import { neutralRules, Refusable, refuseNonNeutral } from './neutral-fields.js';
import { ApiError } from '@svc/shared';
import { StringEnum } from '../http/schemas.js';
import { QUANTIZATIONS, type CatalogModel } from '../models/catalog.js';

export const MAX_STOP_SEQUENCES = 4;
/** OpenAI's bound, and vLLM's default --max-logprobs. */
export const MAX_TOP_LOGPROBS = 20;
/** OpenAI refuses larger maps; a bias per token id is meant for a handful of tokens. */
export const MAX_LOGIT_BIAS_ENTRIES = 300;

/** The spec's sampling defaults (2.1), sent on every request so every engine behaves alike. */
export const SAMPLING_DEFAULTS = { temperature: 0.7, top_p: 1, top_k: 0 } as const;

const TextPart = Type.Object({ type: Type.Literal('text'), text: Type.String() }, { additionalProperties: false });
/** OpenAI's other content parts: taken by the schema only to be refused saying why (checkMessages). */
const OtherPart = Type.Object({ type: StringEnum(['image_url', 'input_audio', 'file', 'refusal'] as const) });

const ToolCall = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 256 }),
    type: Type.Literal('function'),
    function: Type.Object(
      {
        name: Type.String({ minLength: 1, maxLength: 64 }),
        arguments: Type.String(),
        parsed_arguments: Type.Optional(Type.Unknown({ description: "What the official SDK's parse helpers add to a call it hands back; dropped." })),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

const Message = Type.Object(
  {
    role: StringEnum(['system', 'user', 'assistant', 'tool', 'developer'] as const, {
      description: 'developer is taken as system (OpenAI sends it for system instructions to some models).',
    }),
    content: Type.Optional(Type.Union([Type.String(), Type.Array(Type.Union([TextPart, OtherPart]), { minItems: 1 }), Type.Null()])),
    refusal: Type.Optional(
      Type.Union([Type.String(), Type.Null()], { description: "Assistant messages only, as OpenAI's answers carry it: a refusal is read as the message's content." }),
    ),
    // What an OpenAI answer, or the official SDK's helpers, put on an assistant message a
    // client sends back as it got it: taken and dropped (assistant messages only).
    annotations: Type.Optional(Type.Array(Type.Unknown(), { maxItems: 1024 })),
    audio: Type.Optional(Type.Null()),
    function_call: Type.Optional(Type.Null()),
    parsed: Type.Optional(Type.Unknown()),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    tool_calls: Type.Optional(Type.Array(ToolCall, { minItems: 1, maxItems: 128 })),
    tool_call_id: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  },
  { additionalProperties: false },
);

const FunctionName = Type.String({ pattern: '^[a-zA-Z0-9_-]{1,64}$' });

const Tool = Type.Object(
  {
    type: Type.Literal('function'),
    function: Type.Object(
      {
        name: FunctionName,
        description: Type.Optional(Type.String({ maxLength: 4096 })),
        parameters: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
        strict: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

const ToolChoice = Type.Union([
  StringEnum(['none', 'auto', 'required'] as const),
  Type.Object({ type: Type.Literal('function'), function: Type.Object({ name: FunctionName }, { additionalProperties: false }) }, { additionalProperties: false }),
]);

export const ChatCompletionRequest = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 128 }),
    messages: Type.Array(Message, { minItems: 1, maxItems: 2048 }),
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 2, description: 'Default 0.7. Use this or top_p, not both.' })),
    top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: 'Default 1. Use this or temperature, not both.' })),
    top_k: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, description: 'Service extension; 0 is off.' })),
    max_tokens: Type.Optional(Type.Integer({ minimum: 1, description: 'Hard cap on completion tokens; default the model maximum.' })),
    max_completion_tokens: Type.Optional(Type.Integer({ minimum: 1, description: "OpenAI's newer name for max_tokens; give one of them." })),
    stream: Type.Optional(Type.Boolean()),
    stream_options: Type.Optional(
      Type.Object(
        {
          include_usage: Type.Optional(Type.Boolean()),
          include_obfuscation: Type.Optional(Type.Boolean({ description: 'Accepted and ignored: no obfuscation padding is added to chunks.' })),
        },
        { additionalProperties: false },
      ),
    ),
    quantization: Type.Optional(StringEnum(QUANTIZATIONS, { description: 'Service extension; default the cheapest variant the model exposes.' })),
    stop: Type.Optional(
      Type.Union([Type.String({ minLength: 1, maxLength: 256 }), Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: MAX_STOP_SEQUENCES })]),
    ),
    tools: Type.Optional(Type.Array(Tool, { maxItems: 128 })),
    tool_choice: Type.Optional(ToolChoice),
    parallel_tool_calls: Type.Optional(Type.Boolean()),
    seed: Type.Optional(Type.Integer({ minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER })),
    frequency_penalty: Type.Optional(Type.Number({ minimum: -2, maximum: 2, description: 'Default 0.' })),
    presence_penalty: Type.Optional(Type.Number({ minimum: -2, maximum: 2, description: 'Default 0.' })),
    logprobs: Type.Optional(Type.Boolean()),
    top_logprobs: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_TOP_LOGPROBS, description: 'Needs logprobs: true.' })),
    logit_bias: Type.Optional(
      Type.Record(Type.String({ pattern: '^[0-9]{1,9}$' }), Type.Number({ minimum: -100, maximum: 100 }), {
        additionalProperties: false,
        maxProperties: MAX_LOGIT_BIAS_ENTRIES,
        description: 'Token id (a decimal string) to a bias from -100 to 100.',
      }),
    ),
    n: Type.Optional(Type.Integer({ minimum: 1, maximum: 128, description: 'Only 1: one choice per request.' })),
    response_format: Type.Optional(ResponseFormat),
    user: Type.Optional(Type.String({ maxLength: 256 })),
    store: Refusable('false (chat completions are not stored for reading back; the Responses API stores responses)'),
    metadata: Refusable('an empty object (kept only with stored completions)'),
    service_tier: Refusable('"auto" or "default" (one service tier)'),
    modalities: Refusable('["text"]'),
    reasoning_effort: Refusable('absent (no catalog model reasons)'),
    verbosity: Refusable('"medium"'),
    prediction: Refusable('absent (no predicted outputs)'),
    audio: Refusable('absent (no audio output)'),
    web_search_options: Refusable('absent (no built-in tools)'),
    prompt_cache_key: Refusable('absent (no prompt cache)'),
    safety_identifier: Refusable('absent (use user)'),
    functions: Refusable('absent (use tools)'),
    function_call: Refusable('absent (use tool_choice)'),
  },
  { additionalProperties: false },
);

/** OpenAI's chat fields this API does not serve: their neutral values, which SDKs send by default, and why any other is refused. */
const NOT_SERVED = neutralRules({
  store: { neutral: (v) => v === false, why: 'chat completions are not stored for reading back here; the Responses API (POST /v1/responses) stores responses' },
  metadata: { neutral: (v) => typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0, why: 'metadata is kept only with stored completions, which are not offered' },
  service_tier: { neutral: (v) => v === 'auto' || v === 'default', why: 'there is one service tier; pin a pool with X-Service-Pool instead' },
  modalities: { neutral: (v) => Array.isArray(v) && v.length === 1 && v[0] === 'text', why: 'the models answer in text only' },
  reasoning_effort: { neutral: () => false, why: 'no model in the catalog is a reasoning model' },
  verbosity: { neutral: (v) => v === 'medium', why: 'the models take no verbosity setting' },
  prediction: { neutral: () => false, why: 'predicted outputs are not supported' },
  audio: { neutral: () => false, why: 'the models answer in text only' },
  web_search_options: { neutral: () => false, why: 'built-in tools run on OpenAI\'s own servers; define function tools instead' },
  prompt_cache_key: { neutral: () => false, why: 'prompt caching is not offered' },
  safety_identifier: { neutral: () => false, why: 'use `user` to attribute requests to your end users' },
  functions: { neutral: () => false, why: 'the deprecated functions parameter is not supported; send tools' },
  function_call: { neutral: () => false, why: 'the deprecated function_call parameter is not supported; send tool_choice' },
});

export type ChatCompletionRequest = Static<typeof ChatCompletionRequest>;
export type ChatMessage = ChatCompletionRequest['messages'][number];

/**
 * What is wrong with a request whose shape already validated, for `model`; throws the
 * API error naming the field. Returns the effective completion-token cap (or undefined).
 * `meter` is told each schema checked for the first time (schema-budget.ts).
 */
export function checkChatRequest(body: ChatCompletionRequest, model: CatalogModel, meter?: SchemaMeter): { maxTokens: number | undefined } {
  const fail = (message: string, param: string): never => {
    throw new ApiError('invalid_request', message, { param });
  };
  if (model.kind !== 'chat') fail(`model ${model.id} is an embedding model; use /v1/embeddings`, 'model');
  refuseNonNeutral(body, NOT_SERVED);
  // A new array only when a message changed: the chat path runs this on every request.
  let plain: ChatMessage[] | undefined;
  body.messages.forEach((m, i) => {
    const p = plainMessage(m, `messages[${i}]`, fail);
    if (p !== m) (plain ??= [...body.messages])[i] = p;
  });
  if (plain) body.messages = plain;
  if (body.quantization !== undefined && !model.quantizations.includes(body.quantization)) {
    fail(`model ${model.id} is offered in ${model.quantizations.join(', ')}, not ${body.quantization}`, 'quantization');
  }
  if (body.temperature !== undefined && body.top_p !== undefined) {
    fail('use temperature or top_p, not both', 'top_p');
  }
  if (body.max_tokens !== undefined && body.max_completion_tokens !== undefined) {
    fail('give max_tokens or max_completion_tokens, not both', 'max_completion_tokens');
  }
  const maxTokens = body.max_tokens ?? body.max_completion_tokens;
  if (maxTokens !== undefined && maxTokens >= model.context_window) {
    // OpenAI's code for it, by which LangChain raises its ContextOverflowError.
    throw new ApiError('invalid_request', `max_tokens ${maxTokens} does not fit the context window of ${model.id} (${model.context_window} tokens, prompt included)`, {
      param: body.max_tokens !== undefined ? 'max_tokens' : 'max_completion_tokens',
      code: 'context_length_exceeded',
    });
  }
  if (body.stream_options !== undefined && body.stream !== true) fail('stream_options is only allowed with stream: true', 'stream_options');
  // One choice per request: the relay, the billing and the sandbox are built on one; a
  // client that wants several sends several requests (with different seeds).
  if (body.n !== undefined && body.n !== 1) fail('n must be 1: each request returns one choice; send parallel requests for more', 'n');
  if (body.top_logprobs !== undefined && body.logprobs !== true) fail('top_logprobs needs logprobs: true', 'top_logprobs');
  if (body.parallel_tool_calls !== undefined && body.tools === undefined) fail('parallel_tool_calls is only allowed with tools', 'parallel_tool_calls');
  checkMessages(body.messages, fail);
  checkPromptBytes(body.messages, model);
  checkTools(body, fail, meter);
  const format = body.response_format === undefined ? undefined : responseFormatProblem(body.response_format, meter);
  if (format) fail(format.message, format.param);
  const unsupported = engineFeatureProblem(body, model.serving.engine);
  if (unsupported) fail(unsupported.message, unsupported.param);
  return { maxTokens };
}

type Fail = (message: string, param: string) => never;

/** What OpenAI's answers and the official SDK's helpers put on an assistant message. */
const ECHOED_FIELDS = ['refusal', 'annotations', 'audio', 'function_call', 'parsed'] as const;

/**
 * A message as every engine reads it: OpenAI's `developer` role is a system message, and
 * the `refusal` its answers carry (null, or the refusal text in place of content) is
 * dropped or made the content, so a client sending an earlier answer back as it got it is
 * not refused.
 */
export function plainMessage(m: ChatMessage, at: string, fail: Fail): ChatMessage {
  const echoed = ECHOED_FIELDS.find((f) => m[f] !== undefined);
  const parsedCalls = m.tool_calls?.some((c) => c.function.parsed_arguments !== undefined) ?? false;
  if (m.role !== 'developer' && echoed === undefined && !parsedCalls) return m;
  const { refusal, annotations: _a, audio: _b, function_call: _c, parsed: _d, ...rest } = m;
  if (echoed !== undefined && m.role !== 'assistant') fail(`only assistant messages carry ${echoed}`, `${at}.${echoed}`);
  const plain: ChatMessage = { ...rest, role: m.role === 'developer' ? 'system' : m.role };
  if (parsedCalls) plain.tool_calls = m.tool_calls!.map((c) => ({ ...c, function: { name: c.function.name, arguments: c.function.arguments } }));
  if (typeof refusal === 'string' && (plain.content === undefined || plain.content === null)) plain.content = refusal;
  return plain;
}

function checkMessages(messages: ChatMessage[], fail: Fail): void {
  const callIds = new Set<string>();
  messages.forEach((m, i) => {
    const at = `messages[${i}]`;
    if (Array.isArray(m.content)) {
      const other = m.content.findIndex((part) => part.type !== 'text');
      if (other >= 0) fail(`content part type ${m.content[other]!.type} is not supported: the models here read text only`, `${at}.content[${other}].type`);
    }
    if (m.role !== 'assistant' && m.tool_calls !== undefined) fail(`only assistant messages carry tool_calls`, `${at}.tool_calls`);
    if (m.role !== 'tool' && m.tool_call_id !== undefined) fail(`only tool messages carry tool_call_id`, `${at}.tool_call_id`);
    const empty = m.content === undefined || m.content === null;
    if (m.role === 'assistant') {
      if (empty && m.tool_calls === undefined) fail('an assistant message needs content or tool_calls', `${at}.content`);
      for (const call of m.tool_calls ?? []) callIds.add(call.id);
    } else if (empty) {
      fail(`a ${m.role} message needs content`, `${at}.content`);
    }
    if (m.role === 'tool') {
      if (m.tool_call_id === undefined) fail('a tool message needs tool_call_id', `${at}.tool_call_id`);
      if (!callIds.has(m.tool_call_id!)) {
        fail(`tool_call_id ${m.tool_call_id} answers no tool call of an earlier assistant message`, `${at}.tool_call_id`);
      }
    }
  });
}

function checkTools(body: ChatCompletionRequest, fail: Fail, meter: SchemaMeter | undefined): void {
  const names = new Set<string>();
  let schemaBytes = 0;
  (body.tools ?? []).forEach((tool, i) => {
    const at = `tools[${i}].function`;
    if (names.has(tool.function.name)) fail(`tool ${tool.function.name} is defined twice`, `${at}.name`);
    names.add(tool.function.name);
    const parameters = tool.function.parameters;
    if (parameters === undefined) return;
    if (parameters.type !== 'object') fail('function parameters must be a JSON Schema of type "object"', `${at}.parameters`);
    const text = JSON.stringify(parameters);
    const size = Buffer.byteLength(text);
    // A tool past its own bound is told so below; the others count towards the request's.
    schemaBytes += Math.min(size, MAX_SCHEMA_BYTES);
    if (size <= MAX_SCHEMA_BYTES && schemaBytes > MAX_TOOLS_SCHEMA_BYTES) {
      fail(`the tools' parameters add up to more than ${MAX_TOOLS_SCHEMA_BYTES} bytes with this one; send fewer or smaller tools`, `${at}.parameters`);
    }
    const problem = toolParametersProblem(parameters, `${at}.parameters`, text, meter);
    if (problem) fail(problem.message, problem.param);
  });
  const choice = body.tool_choice;
  if (choice === undefined) return;
  if (names.size === 0 && choice !== 'none') fail('tool_choice needs tools', 'tool_choice');
  if (typeof choice === 'object' && !names.has(choice.function.name)) fail(`tool_choice names unknown tool ${choice.function.name}`, 'tool_choice');
  // A forced call's parameters become the engine's grammar: checked as a response_format's schema is.
  if (choice !== 'required' && typeof choice !== 'object') return;
  (body.tools ?? []).forEach((tool, i) => {
    if (typeof choice === 'object' && choice.function.name !== tool.function.name) return;
    const problem = compiledSchemaProblem(tool.function.parameters ?? { type: 'object' }, `tools[${i}].function.parameters`, meter);
    if (problem) fail(problem.message, problem.param);
  });
}

/**
 * Bytes of prompt text one token of context may stand for. Text runs about 4 bytes a token
 * (English; fewer for code and most other scripts), so a prompt past 16 bytes per token of
 * the model's context cannot fit: it is refused here, before any replica renders and
 * tokenizes it (megabytes had cost an engine over a second each, then were refused unbilled).
 */
export const MAX_PROMPT_BYTES_PER_TOKEN = 16;

/** Refuses messages whose text is too long for the model's context by its size alone. */
function checkPromptBytes(messages: ChatMessage[], model: CatalogModel): void {
  const limit = model.context_window * MAX_PROMPT_BYTES_PER_TOKEN;
  let bytes = 0;
  for (const m of messages) {
    bytes += Buffer.byteLength(contentText(m.content));
    for (const call of m.tool_calls ?? []) bytes += Buffer.byteLength(call.function.arguments);
  }
  if (bytes > limit) {
    throw new ApiError('invalid_request', `the messages are ${bytes} bytes of text; ${model.id}'s context window of ${model.context_window} tokens holds at most ${limit} (${MAX_PROMPT_BYTES_PER_TOKEN} bytes a token)`, {
      param: 'messages',
      code: 'context_length_exceeded',
    });
  }
}

/** The text of a message's content, whether a string or text parts. */
export function contentText(content: ChatMessage['content']): string {
  if (content === undefined || content === null) return '';
  // Other parts are refused by checkMessages before anything reads the text.
  return typeof content === 'string' ? content : content.map((p) => ('text' in p ? p.text : '')).join('');
}
