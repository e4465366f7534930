// Structured outputs and forced tool calls through the clients people use, unmodified: the
// official `openai` SDK, LangChain JS and the Vercel AI SDK's chat provider, against the
// real CPU engine (live key: a llama.cpp grammar makes the tiny model's output valid) and
// the sandbox (test key: the schema's minimal instance). Every answer is checked by
// parsing it with the zod schema the client was given, not only by its status.
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { ChatOpenAI } from '@langchain/openai';
import { tool as langchainTool } from '@langchain/core/tools';
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, tool as aiTool } from 'ai';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReplicaStack, type ReplicaStack } from './support/replica-stack.js';

let stack: ReplicaStack;
const keys: Record<'live' | 'sandbox', string> = { live: '', sandbox: '' };
let baseURL: string;

/** Enums and bounded strings: the tiny model only ever continues the alphabet, so free text would run to the token cap. */
const City = z.object({
  city: z.enum(['Paris', 'Lima', 'Oslo']),
  population: z.number().int(),
  capital: z.boolean(),
  nicknames: z.array(z.string().max(12)).max(3),
  founded: z.union([z.number().int(), z.null()]),
});
const Weather = z.object({ city: z.enum(['Paris', 'Lima', 'Oslo']), unit: z.enum(['c', 'f']) });
const ask = 'Describe a city as JSON.';

beforeAll(async () => {
  stack = await startReplicaStack({ name: 'chat-clients', replicas: 'tiny-chat:int4:na=1', ready: 1, enrollTimeoutMs: 60_000, readyTimeoutMs: 90_000 });
  baseURL = `${stack.cp.baseUrl}/v1`;
  keys.live = (await stack.cp.app.services.keys.create({ orgId: stack.orgId })).value;
  keys.sandbox = (await stack.cp.app.services.keys.create({ orgId: stack.orgId, kind: 'test' })).value;
}, 120_000);

afterAll(() => stack?.close());

const openai = (kind: keyof typeof keys) => new OpenAI({ apiKey: keys[kind], baseURL, maxRetries: 0, timeout: 60_000 });

describe.each(['live', 'sandbox'] as const)('%s key', (kind) => {
  it('openai chat.completions.parse with a zod schema returns a parsed, schema-valid object', async () => {
    const completion = await openai(kind).chat.completions.parse({
      model: 'tiny-chat',
      messages: [{ role: 'user', content: ask }],
      response_format: zodResponseFormat(City, 'city'),
      seed: 7,
    });
    const message = completion.choices[0]!.message;
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    expect(City.parse(message.parsed)).toEqual(message.parsed);
    expect(JSON.parse(message.content!)).toEqual(message.parsed);
  });

  it('openai json_object mode answers one JSON object', async () => {
    // Seeded: unseeded sampling through the JSON grammar can wander into a string that runs
    // to the token limit (finish_reason "length", cut-off JSON), as it can with OpenAI.
    const completion = await openai(kind).chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'JSON please' }], response_format: { type: 'json_object' }, seed: 7 });
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    const value: unknown = JSON.parse(completion.choices[0]!.message.content!);
    expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(true);
  });

  it('openai tools with tool_choice "required" make a call of a defined function, with arguments that parse', async () => {
    const tools: OpenAI.ChatCompletionTool[] = [
      { type: 'function', function: { name: 'get_weather', parameters: z.toJSONSchema(Weather) as Record<string, unknown> } },
      { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false } } },
    ];
    const completion = await openai(kind).chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools, tool_choice: 'required', seed: 3 });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    const call = choice.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    const args: unknown = JSON.parse(call.function.arguments);
    if (call.function.name === 'get_weather') Weather.parse(args);
    else expect(call.function.name === 'get_time' && ['UTC', 'CET'].includes((args as { zone: string }).zone)).toBe(true);

    // Streamed: the same call arrives as a tool_calls delta.
    const stream = await openai(kind).chat.completions.create({
      model: 'tiny-chat', messages: [{ role: 'user', content: 'Weather?' }], tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, stream: true,
    });
    let name = '';
    let argText = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const delta of chunk.choices[0]?.delta.tool_calls ?? []) {
        name += delta.function?.name ?? '';
        argText += delta.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(name).toBe('get_weather');
    expect(finish).toBe('tool_calls');
    Weather.parse(JSON.parse(argText));
  });

  it('LangChain withStructuredOutput (its default method: json_schema response_format) returns a schema-valid object', async () => {
    const model = new ChatOpenAI({ configuration: { baseURL }, apiKey: keys[kind], model: 'tiny-chat', maxRetries: 0 });
    const value = await model.withStructuredOutput(City).invoke(ask);
    expect(City.parse(value)).toEqual(value);
  });

  it('LangChain bindTools + invoke yields a tool call with schema-valid arguments', async () => {
    const getWeather = langchainTool(async () => 'sunny', { name: 'get_weather', description: 'Weather in a city', schema: Weather });
    const model = new ChatOpenAI({ configuration: { baseURL }, apiKey: keys[kind], model: 'tiny-chat', maxRetries: 0 });
    const message = await model.bindTools([getWeather], { tool_choice: 'get_weather' }).invoke('Weather in Lima?');
    expect(message.tool_calls).toHaveLength(1);
    expect(message.tool_calls![0]!.name).toBe('get_weather');
    Weather.parse(message.tool_calls![0]!.args);
  });

  it('AI SDK chat provider: generateObject with a zod schema, and generateText with a required tool', async () => {
    const provider = createOpenAI({ baseURL, apiKey: keys[kind] });
    const { object } = await generateObject({ model: provider.chat('tiny-chat'), schema: City, prompt: ask, maxRetries: 0, seed: 11 });
    expect(City.parse(object)).toEqual(object);

    const { toolCalls } = await generateText({
      model: provider.chat('tiny-chat'),
      tools: { get_weather: aiTool({ description: 'Weather in a city', inputSchema: Weather }) },
      toolChoice: 'required',
      prompt: 'Weather in Paris?',
      maxRetries: 0,
    });
    expect(toolCalls).toHaveLength(1);
    expect(toolCalls[0]!.toolName).toBe('get_weather');
    Weather.parse(toolCalls[0]!.input);
  });
});

describe('schemas a tenant could use against the engine', () => {
  const closed = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false, ...extra });
  /** 11 levels: one past OpenAI's limit, well inside the body parser's own nesting bound. */
  let deep: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < 11; i++) deep = closed({ c: deep });

  it.each<[string, Record<string, unknown>, string]>([
    ['objects nested 11 deep', deep, `response_format.json_schema.schema${'.properties.c'.repeat(10)}`],
    ['5,000 enum values', closed({ a: { type: 'integer', enum: Array.from({ length: 5000 }, (_, i) => i) } }), 'response_format.json_schema.schema'],
    ['a $ref cycle with no way out', closed({ a: { $ref: '#/$defs/n' } }, { $defs: { n: closed({ next: { $ref: '#/$defs/n' } }) } }), 'response_format.json_schema.schema'],
    ['a 1 MB schema', closed({ a: { type: 'string', description: 'x'.repeat(1024 * 1024) } }), 'response_format.json_schema.schema'],
    ['a pattern the grammar cannot enforce', closed({ a: { type: 'string', pattern: '^(a+)+$' } }), 'response_format.json_schema.schema.properties.a.pattern'],
  ])('%s: 400 naming the schema, before any engine sees it', async (_label, schema, param) => {
    const err = await openai('live').chat.completions.create({
      model: 'tiny-chat', messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 'x', schema, strict: true } },
    }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err).toMatchObject({ status: 400, type: 'invalid_request', param });
  });

  it('the largest schema accepted compiles and answers while another tenant is served', async () => {
    // 1,000 enum values (the limit) of 14 characters, just under 15,000 characters in all.
    const big = closed({ pick: { type: 'string', enum: Array.from({ length: 1000 }, (_, i) => `option-${String(i).padStart(4, '0')}-xyz`) } });
    const other = (await stack.cp.app.services.keys.create({ orgId: stack.orgId })).value;
    const [structured, plain] = await Promise.all([
      openai('live').chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 'big', schema: big, strict: true } } }),
      new OpenAI({ apiKey: other, baseURL, maxRetries: 0, timeout: 60_000 }).chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }] }),
    ]);
    expect((big.properties.pick as { enum: string[] }).enum).toContain(JSON.parse(structured.choices[0]!.message.content!).pick);
    expect(plain.choices[0]!.message.content).toBe('defghijklmnopqrstuvwxyz');
  });
});
