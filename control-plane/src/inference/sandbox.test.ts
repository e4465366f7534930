import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import type { CatalogModel } from '../models/catalog.js';
import { exampleValue, jsonPieces, sandboxChat, sandboxEmbeddings, sandboxPromptTokens } from './sandbox.js';

const chat: CatalogModel = { id: 'tiny-chat', kind: 'chat', created: 0, owned_by: 'x', family: 'f', context_window: 512, quantizations: ['int4'], rate_card_id: 'rc', serving: { engine: 'cpu', image: 'engine:1', gpus: 0, weights: {} } };
const embed: CatalogModel = { ...chat, id: 'tiny-embed', kind: 'embedding', dimensions: 16, matryoshka: true };
const hello = [{ role: 'user' as const, content: 'hello' }];
const weather = { type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 }, unit: { type: 'string', enum: ['c', 'f'] } }, required: ['city', 'unit'] } } };

describe('sandboxChat', () => {
  it('answers the same request the same way, and different requests differently', () => {
    const a = sandboxChat(chat, { model: 'tiny-chat', messages: hello }, undefined);
    expect(sandboxChat(chat, { model: 'tiny-chat', messages: hello }, undefined)).toEqual(a);
    expect(sandboxChat(chat, { model: 'tiny-chat', messages: [{ role: 'user', content: 'bye' }] }, undefined).pieces).not.toEqual(a.pieces);
    expect(a.finishReason).toBe('stop');
    expect(a.usage.completion_tokens).toBe(a.pieces.length);
    expect(a.usage.total_tokens).toBe(a.usage.prompt_tokens + a.usage.completion_tokens);
  });

  it('honours max_tokens (length) and stop sequences (cut before the stop)', () => {
    const full = sandboxChat(chat, { model: 'tiny-chat', messages: hello }, undefined).pieces.join('');
    const short = sandboxChat(chat, { model: 'tiny-chat', messages: hello }, 2);
    expect(short.pieces).toHaveLength(2);
    expect(short.finishReason).toBe('length');
    const stop = full.slice(10, 13);
    const stopped = sandboxChat(chat, { model: 'tiny-chat', messages: hello, stop: [stop] }, undefined);
    expect(stopped.pieces.join('')).toBe(full.slice(0, full.indexOf(stop)));
    expect(stopped.finishReason).toBe('stop');
  });

  it('calls the first tool with arguments that fit its schema, then answers the tool result in text', () => {
    const first = sandboxChat(chat, { model: 'tiny-chat', messages: hello, tools: [weather] }, undefined);
    expect(first.finishReason).toBe('tool_calls');
    expect(first.toolCalls).toHaveLength(1);
    const call = first.toolCalls![0]!;
    expect(call.function.name).toBe('get_weather');
    expect(JSON.parse(call.function.arguments)).toEqual({ city: 'example', unit: 'c' });
    const followUp = sandboxChat(
      chat,
      { model: 'tiny-chat', tools: [weather], messages: [...hello, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: '{"temp":3}' }] },
      undefined,
    );
    expect(followUp.toolCalls).toBeNull();
    expect(followUp.pieces.join('')).toContain('{\\"temp\\":3}');
  });

  it('answers response_format json_schema with a value valid against the schema, json_object with an object', () => {
    const schema = {
      type: 'object',
      properties: {
        city: { type: 'string', enum: ['Paris', 'Lima'] },
        when: { type: 'string', format: 'date-time' },
        tags: { type: 'array', items: { type: 'string', minLength: 9 }, minItems: 2 },
        next: { anyOf: [{ $ref: '#' }, { type: 'null' }] },
      },
      required: ['city', 'when', 'tags', 'next'],
      additionalProperties: false,
    };
    const answer = sandboxChat(chat, { model: 'x', messages: hello, response_format: { type: 'json_schema', json_schema: { name: 's', schema, strict: true } } }, undefined);
    expect(answer.finishReason).toBe('stop');
    const ajv = new Ajv2020({ strict: false });
    expect(ajv.validate(schema, JSON.parse(answer.pieces.join('')))).toBe(true);
    const object = sandboxChat(chat, { model: 'x', messages: hello, response_format: { type: 'json_object' } }, undefined);
    expect(JSON.parse(object.pieces.join(''))).toMatchObject({ sandbox: expect.any(String) });
  });

  it('tool_choice none answers in text; a named tool_choice calls that tool', () => {
    const other = { type: 'function' as const, function: { name: 'other' } };
    expect(sandboxChat(chat, { model: 'x', messages: hello, tools: [weather], tool_choice: 'none' }, undefined).toolCalls).toBeNull();
    const named = sandboxChat(chat, { model: 'x', messages: hello, tools: [weather, other], tool_choice: { type: 'function', function: { name: 'other' } } }, undefined);
    expect(named.toolCalls![0]!.function).toEqual({ name: 'other', arguments: '{}' });
  });
});

describe('jsonPieces', () => {
  it.each<[string, number | undefined, string[]]>([
    ['{"a":"example"}', undefined, ['{"a"', ':"ex', 'ampl', 'e"}']],
    ['{"a":"example"}', 2, ['{"a"', ':"ex', 'ampl']],
    ['{"a":"example"}', 3, ['{"a"', ':"ex', 'ampl', 'e"}']],
    ['{}', 1, ['{}']],
    ['', undefined, []],
  ])('%j with max_tokens %s', (text, maxTokens, pieces) => {
    expect(jsonPieces(text, maxTokens)).toEqual(pieces);
  });

  it('makes no more than one piece past max_tokens, however long the text', () => {
    expect(jsonPieces('x'.repeat(64 * 1024), 1)).toEqual(['xxxx', 'xxxx']);
  });
});

describe('sandboxPromptTokens', () => {
  it('counts what an engine renders into the prompt: messages, their tool calls, tool definitions and the response schema', () => {
    const call = { id: 'call_1', type: 'function' as const, function: { name: 'get_weather', arguments: JSON.stringify({ city: 'x'.repeat(400) }) } };
    const schema = { name: 'big', schema: { type: 'object', description: 'y'.repeat(800) } };
    const table: Array<[string, Parameters<typeof sandboxPromptTokens>[0], number]> = [
      ['one short message', { model: 'm', messages: hello }, 3 + 2],
      ['a tool call in the history', { model: 'm', messages: [...hello, { role: 'assistant', tool_calls: [call] }, { role: 'tool', tool_call_id: 'call_1', content: 'sunny' }] }, 5 + 3 + Math.ceil(JSON.stringify([call]).length / 4) + 3 + 2],
      ['tool definitions', { model: 'm', messages: hello, tools: [weather] }, 5 + Math.ceil(JSON.stringify([weather]).length / 4)],
      ['a response schema', { model: 'm', messages: hello, response_format: { type: 'json_schema', json_schema: schema } }, 5 + Math.ceil(JSON.stringify(schema).length / 4)],
      ['json_object has no schema', { model: 'm', messages: hello, response_format: { type: 'json_object' } }, 5],
    ];
    for (const [name, body, tokens] of table) expect(sandboxPromptTokens(body), name).toBe(tokens);
  });
});

describe('sandboxEmbeddings', () => {
  it('gives deterministic unit vectors of the model dimension or the override', () => {
    const { vectors, usage } = sandboxEmbeddings(embed, ['a', 'b'], null);
    expect(vectors).toHaveLength(2);
    for (const v of vectors) {
      expect(v).toHaveLength(16);
      expect(Math.hypot(...v)).toBeCloseTo(1, 6);
    }
    expect(vectors[0]).not.toEqual(vectors[1]);
    expect(sandboxEmbeddings(embed, ['a'], null).vectors[0]).toEqual(vectors[0]);
    expect(sandboxEmbeddings(embed, ['a'], 4).vectors[0]).toHaveLength(4);
    expect(usage.prompt_tokens).toBe(2);
  });
});

describe('exampleValue', () => {
  it('fills types, enums, minimums, arrays and nested objects', () => {
    expect(exampleValue({ type: 'object', properties: { a: { type: 'array', items: { type: 'number' } }, b: { type: 'object', properties: { c: { type: 'boolean' } } } } }, 0)).toEqual({ a: [1], b: { c: true } });
    expect(exampleValue({ type: 'integer', minimum: 5 }, 0)).toBe(5);
    expect(exampleValue({ const: 'x' }, 0)).toBe('x');
  });
});
