import { describe, expect, it } from 'vitest';
import { ApiError } from '@svc/shared';
import type { CatalogModel } from '../models/catalog.js';
import { checkChatRequest, contentText, type ChatCompletionRequest } from './chat-request.js';

const chatModel: CatalogModel = {
  id: 'tiny-chat',
  kind: 'chat',
  created: 0,
  owned_by: 'svc',
  family: 'tiny',
  context_window: 512,
  quantizations: ['fp16', 'int4'],
  rate_card_id: 'rc',
  serving: { engine: 'cpu', image: 'engine:1', gpus: 0, weights: {} },
};
const gpuModel: CatalogModel = { ...chatModel, id: 'llama', serving: { engine: 'vllm', image: 'vllm:1', gpus: 1, weights: {} } };
const embeddingModel: CatalogModel = { ...chatModel, id: 'tiny-embed', kind: 'embedding', dimensions: 128 };

const user = { role: 'user' as const, content: 'hi' };
const base: ChatCompletionRequest = { model: 'tiny-chat', messages: [user] };
const weather = { type: 'function' as const, function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };

function problem(body: Partial<ChatCompletionRequest>, model = chatModel): { message: string; param: string | undefined } | null {
  try {
    checkChatRequest({ ...base, ...body }, model);
    return null;
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    expect(err.type).toBe('invalid_request');
    return { message: err.message, param: err.param };
  }
}

describe('checkChatRequest', () => {
  it.each<[string, Partial<ChatCompletionRequest>, CatalogModel, string]>([
    ['an embedding model', {}, embeddingModel, 'model'],
    ['a quantization the model lacks', { quantization: 'fp8' }, chatModel, 'quantization'],
    ['temperature and top_p together', { temperature: 0.5, top_p: 0.9 }, chatModel, 'top_p'],
    ['max_tokens filling the whole context', { max_tokens: 512 }, chatModel, 'max_tokens'],
    ['max_completion_tokens past the context', { max_completion_tokens: 10_000 }, chatModel, 'max_completion_tokens'],
    ['both token caps', { max_tokens: 5, max_completion_tokens: 5 }, chatModel, 'max_completion_tokens'],
    ['stream_options without stream', { stream_options: { include_usage: true } }, chatModel, 'stream_options'],
    ['a user message without content', { messages: [{ role: 'user', content: null }] }, chatModel, 'messages[0].content'],
    ['an assistant message with neither content nor tool calls', { messages: [user, { role: 'assistant' }] }, chatModel, 'messages[1].content'],
    ['tool_calls on a user message', { messages: [{ ...user, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }] }, chatModel, 'messages[0].tool_calls'],
    ['a tool message without tool_call_id', { messages: [user, { role: 'tool', content: 'x' }] }, chatModel, 'messages[1].tool_call_id'],
    ['a tool message answering no call', { messages: [user, { role: 'tool', content: 'x', tool_call_id: 'nope' }] }, chatModel, 'messages[1].tool_call_id'],
    ['tool_call_id on a user message', { messages: [{ ...user, tool_call_id: 'c1' }] }, chatModel, 'messages[0].tool_call_id'],
    ['parameters that are not an object schema', { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string' } } }] }, chatModel, 'tools[0].function.parameters'],
    ['parameters that are not a JSON Schema', { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: 3 } } }] }, chatModel, 'tools[0].function.parameters'],
    ['parameters declaring an unknown $schema', { tools: [{ type: 'function', function: { name: 'f', parameters: { $schema: 'https://example.com/s', type: 'object' } } }] }, chatModel, 'tools[0].function.parameters'],
    ['an invalid 2020-12 schema in the second tool', { tools: [weather, { type: 'function', function: { name: 'g', parameters: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', required: 'x' } } }] }, chatModel, 'tools[1].function.parameters'],
    ['a tool defined twice', { tools: [weather, weather] }, chatModel, 'tools[1].function.name'],
    ['tool_choice without tools', { tool_choice: 'auto' }, chatModel, 'tool_choice'],
    ['tool_choice naming an unknown tool', { tools: [weather], tool_choice: { type: 'function', function: { name: 'other' } } }, chatModel, 'tool_choice'],
    ['n above 1', { n: 2 }, gpuModel, 'n'],
    ['top_logprobs without logprobs', { top_logprobs: 3 }, gpuModel, 'top_logprobs'],
    ['top_logprobs with logprobs false', { logprobs: false, top_logprobs: 3 }, gpuModel, 'top_logprobs'],
    ['parallel_tool_calls without tools', { parallel_tool_calls: false }, gpuModel, 'parallel_tool_calls'],
    ['logprobs on the CPU engine', { logprobs: true }, chatModel, 'logprobs'],
    ['a schema keyword the CPU engine cannot enforce', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'string', pattern: '^a' } } } } } }, chatModel, 'response_format.json_schema.schema.properties.a.pattern'],
    ['a forced call of a tool whose schema the CPU engine cannot enforce', { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { n: { type: 'number', multipleOf: 3 } } } } }], tool_choice: 'required' }, chatModel, 'tools[0].function.parameters.properties.n.multipleOf'],
    ['a response_format schema that is not an object', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string' } } } }, gpuModel, 'response_format.json_schema.schema.type'],
  ])('refuses %s', (_name, body, model, param) => {
    expect(problem(body, model)?.param).toBe(param);
  });

  it('refuses, for the CPU engine only, a schema whose nested unions its grammar sampler would follow in exponentially many parses', () => {
    // The auditor's 2.5 KB schema: ten levels of anyOf of three arrays, one token took minutes and stalled the replica.
    const $defs: Record<string, unknown> = { l0: { type: 'string', maxLength: 4 } };
    for (let i = 1; i <= 10; i++) $defs[`l${i}`] = { anyOf: [2, 3, 4].map((maxItems) => ({ type: 'array', items: { $ref: `#/$defs/l${i - 1}` }, minItems: 1, maxItems })) };
    const schema = { type: 'object', properties: { a: { $ref: '#/$defs/l10' } }, required: ['a'], additionalProperties: false, $defs };
    const asFormat = { response_format: { type: 'json_schema' as const, json_schema: { name: 'x', schema } } };
    expect(problem(asFormat)).toEqual({ param: 'response_format.json_schema.schema.$defs.l10.anyOf', message: expect.stringMatching(/too ambiguous.*59049 parses.*more than 64/) });
    const tools = [weather, { type: 'function' as const, function: { name: 'f', parameters: schema } }];
    for (const tool_choice of ['required', { type: 'function', function: { name: 'f' } }] as const) {
      expect(problem({ tools, tool_choice })).toEqual({ param: 'tools[1].function.parameters.$defs.l10.anyOf', message: expect.stringContaining('too ambiguous') });
    }
    // Not forced: nothing is compiled from it. vLLM's guidance backend has no such blow-up.
    expect(problem({ tools })).toBeNull();
    expect(problem(asFormat, gpuModel)).toBeNull();
    // Three levels (27 parses) and the usual shapes (nullable fields, discriminated unions) pass.
    expect(problem({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { ...schema, properties: { a: { $ref: '#/$defs/l3' } } } } } })).toBeNull();
  });

  it('refuses, before any replica sees them, messages with more bytes of text than 16 per token of the context window', () => {
    const limit = chatModel.context_window * 16;
    const refused = (content: string) => {
      try {
        checkChatRequest({ ...base, messages: [{ role: 'system', content: 'x' }, { role: 'user', content }] }, chatModel);
        return null;
      } catch (err) {
        return { param: (err as ApiError).param, code: (err as ApiError).code, message: (err as ApiError).message };
      }
    };
    expect(refused('y'.repeat(limit - 1))).toBeNull();
    expect(refused('y'.repeat(limit))).toEqual({ param: 'messages', code: 'context_length_exceeded', message: expect.stringContaining(`at most ${limit}`) });
    // Bytes, not characters: three-byte characters count three times.
    expect(refused('€'.repeat(Math.ceil(limit / 3)))?.code).toBe('context_length_exceeded');
  });

  it('accepts a tool round trip: assistant tool call, then the tool result', () => {
    const messages: ChatCompletionRequest['messages'] = [
      user,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp":3}' },
    ];
    expect(problem({ messages, tools: [weather], tool_choice: 'auto' })).toBeNull();
  });

  it("checks a forced call's parameters as a response_format's schema is (the engine compiles them), and only a forced call's", () => {
    // What had failed on every CPU-engine replica, each failure ejecting one: a reference to itself, and a cycle through required properties.
    const selfRef = { type: 'object', properties: { x: { $ref: '#/$defs/a' } }, required: ['x'], $defs: { a: { $ref: '#/$defs/a' } } };
    const requiredCycle = { type: 'object', properties: { x: { $ref: '#/$defs/a' } }, required: ['x'], $defs: { a: { type: 'object', properties: { y: { $ref: '#/$defs/a' } }, required: ['y'] } } };
    for (const [cycle, expected] of [
      [selfRef, { param: 'tools[1].function.parameters.$defs.a', message: expect.stringContaining('refers to itself') }],
      [requiredCycle, { param: 'tools[1].function.parameters', message: expect.stringContaining('no finite JSON value satisfies the schema') }],
    ] as const) {
      const looping = { type: 'function' as const, function: { name: 'f', parameters: cycle } };
      for (const model of [chatModel, gpuModel]) {
        for (const tool_choice of ['required', { type: 'function', function: { name: 'f' } }] as const) {
          expect(problem({ tools: [weather, looping], tool_choice }, model)).toEqual(expected);
        }
      }
    }
    const looping = { type: 'function' as const, function: { name: 'f', parameters: selfRef } };
    for (const model of [chatModel, gpuModel]) {
      // Not forced, or another tool forced: the engine compiles nothing from it.
      expect(problem({ tools: [weather, looping] }, model)).toBeNull();
      expect(problem({ tools: [weather, looping], tool_choice: { type: 'function', function: { name: 'weather' } } }, model)).toBeNull();
    }
    const wide = { type: 'object', properties: Object.fromEntries(Array.from({ length: 6_000 }, (_, i) => [`p${i}`, { type: 'string' }])) };
    expect(problem({ tools: [{ type: 'function', function: { name: 'w', parameters: wide } }], tool_choice: 'required' }, gpuModel)?.param).toBe('tools[0].function.parameters');
  });

  it('accepts tool schemas that declare a JSON Schema draft (LangChain with zod v4 sends 2020-12)', () => {
    const tool = (name: string, $schema: string) => ({ type: 'function' as const, function: { name, parameters: { $schema, type: 'object', properties: { city: { type: 'string' } } } } });
    const tools = [
      tool('a', 'http://json-schema.org/draft-04/schema#'),
      tool('b', 'http://json-schema.org/draft-06/schema#'),
      tool('c', 'http://json-schema.org/draft-07/schema#'),
      tool('d', 'https://json-schema.org/draft/2019-09/schema'),
      tool('e', 'https://json-schema.org/draft/2020-12/schema'),
    ];
    expect(problem({ tools })).toBeNull();
  });

  it('accepts the whole chat surface on vLLM, and the neutral values SDKs send by default on the CPU engine', () => {
    const full: Partial<ChatCompletionRequest> = {
      tools: [weather],
      tool_choice: 'required',
      parallel_tool_calls: false,
      frequency_penalty: 0.5,
      presence_penalty: -0.5,
      seed: 7,
      logprobs: true,
      top_logprobs: 20,
      logit_bias: { '1234': -100, '7': 100 },
      n: 1,
    };
    expect(problem(full, gpuModel)).toBeNull();
    expect(problem({ tools: [weather], tool_choice: { type: 'function', function: { name: 'weather' } } }, gpuModel)).toBeNull();
    const neutral: Partial<ChatCompletionRequest> = { frequency_penalty: 0, presence_penalty: 0, logprobs: false, logit_bias: {}, n: 1, seed: 3, tools: [weather], tool_choice: 'auto', parallel_tool_calls: true };
    expect(problem(neutral, chatModel)).toBeNull();
    expect(problem({ tools: [weather], tool_choice: 'none' }, chatModel)).toBeNull();
  });

  it('names the engine and what it cannot do when it refuses a field for the engine', () => {
    expect(problem({ logprobs: true })?.message).toBe("this model's engine (cpu) does not support logprobs");
  });

  it('accepts on the CPU engine what its grammar and sampler honour', () => {
    const honoured: Partial<ChatCompletionRequest> = {
      frequency_penalty: 0.5, presence_penalty: -1, logit_bias: { '42': 5 }, tools: [weather], tool_choice: 'required',
      response_format: { type: 'json_schema', json_schema: { name: 'x', strict: true, schema: { type: 'object', properties: { n: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 } }, required: ['n'], additionalProperties: false } } },
    };
    expect(problem(honoured, chatModel)).toBeNull();
    expect(problem({ tools: [weather], tool_choice: { type: 'function', function: { name: 'weather' } } }, chatModel)).toBeNull();
  });

  it('returns the effective token cap, from either name', () => {
    expect(checkChatRequest({ ...base, max_tokens: 7 }, chatModel).maxTokens).toBe(7);
    expect(checkChatRequest({ ...base, max_completion_tokens: 9 }, chatModel).maxTokens).toBe(9);
    expect(checkChatRequest(base, chatModel).maxTokens).toBeUndefined();
  });

  it('accepts temperature alone, top_p alone, and the largest max_tokens that leaves room for a prompt', () => {
    expect(problem({ temperature: 2 })).toBeNull();
    expect(problem({ top_p: 0 })).toBeNull();
    expect(problem({ max_tokens: 511 })).toBeNull();
  });
});

describe('contentText', () => {
  it('joins text parts and treats null as empty', () => {
    expect(contentText('abc')).toBe('abc');
    expect(contentText([{ type: 'text', text: 'ab' }, { type: 'text', text: 'c' }])).toBe('abc');
    expect(contentText(null)).toBe('');
  });
});
