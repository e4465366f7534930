// The Responses API end to end with the clients people bring, unmodified: the official
// `openai` SDK (responses.create, responses.stream with its helpers, previous_response_id
// chaining, a function tool round trip) and the Vercel AI SDK's default OpenAI provider
// (which speaks the Responses API: generateText, streamText, a tool with zod). The real
// control plane routes to a real agent running the CPU engine image with the tiny model,
// which continues the alphabet from the prompt's last letter (cpu-engine/README.md), so
// every answer and every token count is exact. Tool calls come from the sandbox (test
// key): the tiny model makes none.
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startReplicaStack, type ReplicaStack } from './support/replica-stack.js';

const ALPHABET_AFTER_C = 'defghijklmnopqrstuvwxyz';
let stack: ReplicaStack;
let cp: ReplicaStack['cp'];
let liveKey: string;
let testKey: string;
let client: OpenAI;

const sdk = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${cp.baseUrl}/v1`, maxRetries: 0, timeout: 20_000 });
const aiSdk = (apiKey: string) => createOpenAI({ baseURL: `${cp.baseUrl}/v1`, apiKey });

beforeAll(async () => {
  stack = await startReplicaStack({ name: 'responses-e2e', replicas: 'tiny-chat:int4:na=1', ready: 1, enrollTimeoutMs: 60_000, readyTimeoutMs: 90_000 });
  ({ cp } = stack);
  liveKey = (await cp.app.services.keys.create({ orgId: stack.orgId })).value;
  testKey = (await cp.app.services.keys.create({ orgId: stack.orgId, kind: 'test' })).value;
  client = sdk(liveKey);
}, 120_000);

afterAll(() => stack?.close());

/** The usage record of a request, by the request id the control plane answered with. */
async function usageOf(requestId: string): Promise<{ prompt_tokens: number; completion_tokens: number; cost_usd: number }> {
  await cp.app.services.inference.recorder.flush();
  const page = (await fetch(`${cp.baseUrl}/v1/usage?limit=100`, { headers: { authorization: `Bearer ${liveKey}` } }).then((r) => r.json())) as { data: unknown[] };
  return (page.data as Array<{ request_id: string; prompt_tokens: number; completion_tokens: number; cost_usd: number }>).find((r) => r.request_id === requestId)!;
}

describe('the official openai SDK', () => {
  it('responses.create answers the exact text with exact usage, billed as the same chat completion is', async () => {
    const { data: response, response: raw } = await client.responses.create({ model: 'tiny-chat', input: 'abc' }).withResponse();
    expect(response.output_text).toBe(ALPHABET_AFTER_C);
    expect(response).toMatchObject({ object: 'response', status: 'completed', model: 'tiny-chat', pool: 'na' });
    // BOS plus one token per character of the prompt; one per letter of the answer.
    expect(response.usage).toEqual({ input_tokens: 4, input_tokens_details: { cached_tokens: 0 }, output_tokens: 23, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 27 });
    const chat = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }] }).withResponse();
    const [mine, theirs] = [await usageOf(raw.headers.get('x-request-id')!), await usageOf(chat.response.headers.get('x-request-id')!)];
    expect(mine).toMatchObject({ prompt_tokens: 4, completion_tokens: 23 });
    expect(mine.cost_usd).toBeGreaterThan(0);
    expect(mine.cost_usd).toBe(theirs.cost_usd);
  });

  it('instructions are a system message the engine reads (and counts) first', async () => {
    const response = await client.responses.create({ model: 'tiny-chat', instructions: 'Be brief.', input: [{ role: 'user', content: [{ type: 'input_text', text: 'abc' }] }] });
    expect(response.output_text).toBe(ALPHABET_AFTER_C);
    expect(response.usage!.input_tokens).toBe(1 + 'Be brief.'.length + 3);
    expect(response.instructions).toBe('Be brief.');
  });

  it('responses.stream: the helpers see every delta and finalResponse() is the stored response', async () => {
    const stream = client.responses.stream({ model: 'tiny-chat', input: 'uvw' });
    const deltas: string[] = [];
    stream.on('response.output_text.delta', (event) => deltas.push(event.delta));
    const final = await stream.finalResponse();
    expect(deltas.join('')).toBe('xyz');
    expect(deltas.length).toBe(3);
    expect(final.output_text).toBe('xyz');
    expect(final.usage).toMatchObject({ input_tokens: 4, output_tokens: 3, total_tokens: 7 });
    const stored = await client.responses.retrieve(final.id);
    expect(stored.output_text).toBe('xyz');
    expect(stored.usage).toEqual(final.usage);
  });

  it('max_output_tokens cuts the answer: status incomplete, streamed or not', async () => {
    const response = await client.responses.create({ model: 'tiny-chat', input: 'abc', max_output_tokens: 5 });
    expect(response).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output_text: 'defgh' });
    const streamed = await client.responses.stream({ model: 'tiny-chat', input: 'abc', max_output_tokens: 5 }).finalResponse();
    expect(streamed).toMatchObject({ status: 'incomplete', output_text: 'defgh' });
  });

  it('previous_response_id continues the conversation, and the whole conversation is billed as input', async () => {
    const first = await client.responses.create({ model: 'tiny-chat', input: 'abc' });
    const { data: second, response: raw } = await client.responses.create({ model: 'tiny-chat', previous_response_id: first.id, input: 'XY' }).withResponse();
    expect(second.output_text).toBe('Z');
    expect(second.previous_response_id).toBe(first.id);
    // BOS + "abc" + the first answer + "XY": a chain cannot carry tokens past the bill.
    const input = 1 + 3 + ALPHABET_AFTER_C.length + 2;
    expect(second.usage).toMatchObject({ input_tokens: input, output_tokens: 1 });
    expect(await usageOf(raw.headers.get('x-request-id')!)).toMatchObject({ prompt_tokens: input, completion_tokens: 1 });
  });

  it('a function tool round trip (sandbox key): the call, then its output chained on previous_response_id', async () => {
    const sandbox = sdk(testKey);
    const tools: OpenAI.Responses.FunctionTool[] = [
      { type: 'function', name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }, strict: true },
    ];
    const first = await sandbox.responses.create({ model: 'tiny-chat', input: 'Weather in Oslo?', tools, tool_choice: 'auto' });
    const call = first.output.find((item): item is OpenAI.Responses.ResponseFunctionToolCall => item.type === 'function_call')!;
    expect(call).toMatchObject({ name: 'get_weather', arguments: '{"city":"example"}', status: 'completed' });
    const second = await sandbox.responses.create({
      model: 'tiny-chat',
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"celsius":3}' }],
      tools,
    });
    expect(second.output_text).toMatch(/^The tool returned "\{\\"celsius\\":3\}"\./);
  });
});

describe("the Vercel AI SDK's default OpenAI provider (Responses API)", () => {
  it('generateText', async () => {
    const result = await generateText({ model: aiSdk(liveKey)('tiny-chat'), prompt: 'abc' });
    expect(result.text).toBe(ALPHABET_AFTER_C);
    expect(result.finishReason).toBe('stop');
    expect(result.usage).toMatchObject({ inputTokens: 4, outputTokens: 23, totalTokens: 27 });
  });

  it("a conversation continued from the previous result's messages (sent as item references to the stored response)", async () => {
    const model = aiSdk(liveKey)('tiny-chat');
    const first = await generateText({ model, prompt: 'abc' });
    const second = await generateText({ model, messages: [{ role: 'user', content: 'abc' }, ...first.response.messages, { role: 'user', content: 'XY' }] });
    expect(second.text).toBe('Z');
    // BOS + "abc" + the first answer + "XY": the referenced answer reached the engine.
    expect(second.usage.inputTokens).toBe(1 + 3 + ALPHABET_AFTER_C.length + 2);
  });

  it('streamText', async () => {
    const result = streamText({ model: aiSdk(liveKey)('tiny-chat'), prompt: 'uvw' });
    const pieces: string[] = [];
    for await (const piece of result.textStream) pieces.push(piece);
    expect(pieces.join('')).toBe('xyz');
    expect(await result.finishReason).toBe('stop');
    expect(await result.usage).toMatchObject({ inputTokens: 4, outputTokens: 3 });
  });

  it('a tool() with a zod schema: called, executed, and its result answered in the next step (sandbox key)', async () => {
    const seen: Array<{ city: string }> = [];
    const result = await generateText({
      model: aiSdk(testKey)('tiny-chat'),
      prompt: 'Weather in Oslo?',
      tools: {
        get_weather: tool({
          description: 'Weather in a city',
          inputSchema: z.object({ city: z.string() }),
          execute: async (input) => {
            seen.push(input);
            return { celsius: 3 };
          },
        }),
      },
      stopWhen: stepCountIs(2),
    });
    expect(seen).toEqual([{ city: 'example' }]);
    expect(result.steps).toHaveLength(2);
    expect(result.steps[0]!.toolCalls[0]).toMatchObject({ toolName: 'get_weather', input: { city: 'example' } });
    expect(result.text).toMatch(/^The tool returned .*celsius.*3/);
  });

  it('generateObject with a zod schema: text.format json_schema, enforced by the engine, so the object parses', async () => {
    const schema = z.object({ answer: z.enum(['yes', 'no']), confidence: z.number().int() });
    const { object, usage } = await generateObject({ model: aiSdk(liveKey)('tiny-chat'), schema, prompt: 'Is the sky blue?' });
    expect(schema.parse(object)).toEqual(object);
    expect(usage.outputTokens).toBeGreaterThan(0);
  });
});
