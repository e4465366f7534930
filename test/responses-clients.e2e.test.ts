// The Responses API end to end with the clients people bring, unmodified: the official
// `openai` SDK (responses.create, responses.stream with its helpers, previous_response_id
// chaining, function tool round trips with tool_choice "required" and a named function)
// and the Vercel AI SDK's default OpenAI provider (which speaks the Responses API:
// generateText, streamText, generateObject, a tool() with zod). Every test runs twice:
// with a live key, where the real control plane routes to a real agent running the CPU
// engine image with the tiny model, and with a sandbox (test) key, which never reaches a
// replica. The tiny model continues the alphabet from the prompt's last letter
// (cpu-engine/README.md), so live answers and token counts are exact; a forced tool call's
// arguments come from a grammar and are checked against the tool's schema. Sandbox answers
// are deterministic per request. Both are also checked against the chat completion the
// request translates to: the Responses API is that completion, reshaped.
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startReplicaStack, type ReplicaStack } from './support/replica-stack.js';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz';
const ALPHABET_AFTER_C = ALPHABET.slice(3);
const SANDBOX_TEXT = /^Sandbox reply [0-9a-f]{8}:( [a-z]+)+\.$/;
let stack: ReplicaStack;
let cp: ReplicaStack['cp'];
const keys: Record<'live' | 'sandbox', string> = { live: '', sandbox: '' };

const sdk = (kind: keyof typeof keys) => new OpenAI({ apiKey: keys[kind], baseURL: `${cp.baseUrl}/v1`, maxRetries: 0, timeout: 60_000 });
const aiSdk = (kind: keyof typeof keys) => createOpenAI({ baseURL: `${cp.baseUrl}/v1`, apiKey: keys[kind] });

/** Enums only: the tiny model continues the alphabet, so a free string would run to the token cap. */
const Weather = z.object({ city: z.enum(['Paris', 'Lima', 'Oslo']) });
const weatherTool: OpenAI.Responses.FunctionTool = {
  type: 'function', name: 'get_weather', description: 'Weather in a city', parameters: z.toJSONSchema(Weather) as Record<string, unknown>, strict: true,
};
const timeTool: OpenAI.Responses.FunctionTool = {
  type: 'function', name: 'get_time', description: 'Time in a zone', parameters: { type: 'object', properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false }, strict: true,
};

beforeAll(async () => {
  stack = await startReplicaStack({ name: 'responses-e2e', replicas: 'tiny-chat:int4:na=1', ready: 1, enrollTimeoutMs: 60_000, readyTimeoutMs: 90_000 });
  ({ cp } = stack);
  keys.live = (await cp.app.services.keys.create({ orgId: stack.orgId })).value;
  keys.sandbox = (await cp.app.services.keys.create({ orgId: stack.orgId, kind: 'test' })).value;
}, 120_000);

afterAll(() => stack?.close());

/** The usage record of a request, by the request id the control plane answered with. */
async function usageOf(requestId: string): Promise<{ prompt_tokens: number; completion_tokens: number; cost_usd: number; sandbox: boolean }> {
  await cp.app.services.inference.recorder.flush();
  const page = (await fetch(`${cp.baseUrl}/v1/usage?limit=100`, { headers: { authorization: `Bearer ${keys.live}` } }).then((r) => r.json())) as { data: unknown[] };
  return (page.data as Array<{ request_id: string; prompt_tokens: number; completion_tokens: number; cost_usd: number; sandbox: boolean }>).find((r) => r.request_id === requestId)!;
}

/** What the same conversation answers on chat completions with the same key: a Response must carry exactly this. */
async function chatOf(kind: keyof typeof keys, messages: OpenAI.ChatCompletionMessageParam[], extra: { max_tokens?: number } = {}) {
  const { data, response } = await sdk(kind).chat.completions.create({ model: 'tiny-chat', messages, ...extra }).withResponse();
  const usage = data.usage!;
  return {
    text: data.choices[0]!.message.content!,
    requestId: response.headers.get('x-request-id')!,
    usage: { input_tokens: usage.prompt_tokens, input_tokens_details: { cached_tokens: 0 }, output_tokens: usage.completion_tokens, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: usage.total_tokens },
  };
}

describe.each(['live', 'sandbox'] as const)('%s key', (kind) => {
  const live = kind === 'live';

  describe('the official openai SDK', () => {
    it('responses.create answers the exact text with exact usage, billed as the same chat completion is', async () => {
      const { data: response, response: raw } = await sdk(kind).responses.create({ model: 'tiny-chat', input: 'abc' }).withResponse();
      const chat = await chatOf(kind, [{ role: 'user', content: 'abc' }]);
      expect(response.output_text).toBe(chat.text);
      expect(response.usage).toEqual(chat.usage);
      expect(response).toMatchObject({ object: 'response', status: 'completed', model: 'tiny-chat', pool: 'na' });
      if (live) {
        expect(response.output_text).toBe(ALPHABET_AFTER_C);
        // BOS plus one token per character of the prompt; one per letter of the answer.
        expect(response.usage).toEqual({ input_tokens: 4, input_tokens_details: { cached_tokens: 0 }, output_tokens: 23, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 27 });
      } else {
        expect(response.output_text).toMatch(SANDBOX_TEXT);
      }
      const [mine, theirs] = [await usageOf(raw.headers.get('x-request-id')!), await usageOf(chat.requestId)];
      expect(mine).toMatchObject({ prompt_tokens: response.usage!.input_tokens, completion_tokens: response.usage!.output_tokens, sandbox: !live });
      if (live) expect(mine.cost_usd).toBeGreaterThan(0);
      else expect(mine.cost_usd).toBe(0);
      expect(mine.cost_usd).toBe(theirs.cost_usd);
    });

    it('instructions are a system message the engine reads (and counts) first', async () => {
      const response = await sdk(kind).responses.create({ model: 'tiny-chat', instructions: 'Be brief.', input: [{ role: 'user', content: [{ type: 'input_text', text: 'abc' }] }] });
      const chat = await chatOf(kind, [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'abc' }]);
      expect(response.output_text).toBe(chat.text);
      expect(response.usage).toEqual(chat.usage);
      expect(response.instructions).toBe('Be brief.');
      if (live) {
        expect(response.output_text).toBe(ALPHABET_AFTER_C);
        expect(response.usage!.input_tokens).toBe(1 + 'Be brief.'.length + 3);
      }
    });

    it('responses.stream: the helpers see every delta and finalResponse() is the stored response', async () => {
      const stream = sdk(kind).responses.stream({ model: 'tiny-chat', input: 'uvw' });
      const deltas: string[] = [];
      stream.on('response.output_text.delta', (event) => deltas.push(event.delta));
      const final = await stream.finalResponse();
      const chat = await chatOf(kind, [{ role: 'user', content: 'uvw' }]);
      expect(deltas.join('')).toBe(chat.text);
      // One delta per generated token.
      expect(deltas.length).toBe(chat.usage.output_tokens);
      expect(final.output_text).toBe(chat.text);
      expect(final.usage).toEqual(chat.usage);
      if (live) {
        expect(final.output_text).toBe('xyz');
        expect(final.usage).toMatchObject({ input_tokens: 4, output_tokens: 3, total_tokens: 7 });
      }
      const stored = await sdk(kind).responses.retrieve(final.id);
      expect(stored.output_text).toBe(final.output_text);
      expect(stored.usage).toEqual(final.usage);
    });

    it('max_output_tokens cuts the answer: status incomplete, streamed or not', async () => {
      const cut = (await chatOf(kind, [{ role: 'user', content: 'abc' }], { max_tokens: 5 })).text;
      if (live) expect(cut).toBe('defgh');
      const response = await sdk(kind).responses.create({ model: 'tiny-chat', input: 'abc', max_output_tokens: 5 });
      expect(response).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output_text: cut });
      expect(response.usage!.output_tokens).toBe(5);
      const streamed = await sdk(kind).responses.stream({ model: 'tiny-chat', input: 'abc', max_output_tokens: 5 }).finalResponse();
      expect(streamed).toMatchObject({ status: 'incomplete', output_text: cut });
    });

    it('previous_response_id continues the conversation, and the whole conversation is billed as input', async () => {
      const client = sdk(kind);
      const first = await client.responses.create({ model: 'tiny-chat', input: 'abc' });
      const { data: second, response: raw } = await client.responses.create({ model: 'tiny-chat', previous_response_id: first.id, input: 'XY' }).withResponse();
      const chat = await chatOf(kind, [{ role: 'user', content: 'abc' }, { role: 'assistant', content: first.output_text }, { role: 'user', content: 'XY' }]);
      expect(second.output_text).toBe(chat.text);
      expect(second.usage).toEqual(chat.usage);
      expect(second.previous_response_id).toBe(first.id);
      if (live) {
        expect(second.output_text).toBe('Z');
        // BOS + "abc" + the first answer + "XY": a chain cannot carry tokens past the bill.
        expect(second.usage).toMatchObject({ input_tokens: 1 + 3 + ALPHABET_AFTER_C.length + 2, output_tokens: 1 });
      }
      expect(await usageOf(raw.headers.get('x-request-id')!)).toMatchObject({ prompt_tokens: second.usage!.input_tokens, completion_tokens: second.usage!.output_tokens });
    });

    it('a function tool round trip with tool_choice "required": the call, then its output chained on previous_response_id', async () => {
      const client = sdk(kind);
      const tools = [weatherTool, timeTool];
      const first = await client.responses.create({ model: 'tiny-chat', input: 'Weather in Oslo?', tools, tool_choice: 'required' });
      expect(first.status).toBe('completed');
      const calls = first.output.filter((item): item is OpenAI.Responses.ResponseFunctionToolCall => item.type === 'function_call');
      expect(calls).toHaveLength(1);
      const call = calls[0]!;
      expect(call).toMatchObject({ type: 'function_call', status: 'completed', call_id: expect.any(String) });
      // A call of a defined function, with arguments valid against its schema.
      const args: unknown = JSON.parse(call.arguments);
      if (call.name === 'get_weather') Weather.parse(args);
      else expect(call.name === 'get_time' && ['UTC', 'CET'].includes((args as { zone: string }).zone)).toBe(true);
      // The sandbox calls the first tool with the schema's smallest value.
      if (!live) expect(call).toMatchObject({ name: 'get_weather', arguments: '{"city":"Paris"}' });
      expect(first.output_text).toBe('');

      const second = await client.responses.create({
        model: 'tiny-chat',
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"celsius":3}' }],
        tools,
      });
      expect(second.status).toBe('completed');
      // Live: the prompt ends with the tool's output, '}' is no letter, so the whole alphabet follows.
      if (live) expect(second.output_text).toBe(ALPHABET);
      else expect(second.output_text).toMatch(/^The tool returned "\{\\"celsius\\":3\}"\./);
    });

    it('responses.inputItems.list: the items a chained response came from, newest first, paged by the SDK', async () => {
      const client = sdk(kind);
      const first = await client.responses.create({ model: 'tiny-chat', input: 'Weather in Oslo?', tools: [weatherTool], tool_choice: 'required' });
      const call = first.output.find((item): item is OpenAI.Responses.ResponseFunctionToolCall => item.type === 'function_call')!;
      const second = await client.responses.create({ model: 'tiny-chat', previous_response_id: first.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"celsius":3}' }], tools: [weatherTool] });
      const page = await client.responses.inputItems.list(second.id);
      expect(page.data.map((item) => item.type)).toEqual(['function_call_output', 'function_call', 'message']);
      expect(page.data[0]).toMatchObject({ type: 'function_call_output', call_id: call.call_id, output: '{"celsius":3}', status: 'completed' });
      expect(page.data[1]).toMatchObject({ type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments });
      expect(page.data[2]).toMatchObject({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Oslo?' }] });
      // One item a page, oldest first: the SDK follows has_more and last_id.
      const ids: string[] = [];
      for await (const item of client.responses.inputItems.list(second.id, { order: 'asc', limit: 1 })) ids.push(item.id);
      expect(ids).toEqual(page.data.map((item) => item.id).reverse());
      // The first response's own items: its question alone, not its answer.
      expect((await client.responses.inputItems.list(first.id)).data.map((item) => item.type)).toEqual(['message']);
      await expect(client.responses.inputItems.list('resp_doesnotexist')).rejects.toMatchObject({ status: 404 });
    });

    it('responses.stream with a named tool_choice: the arguments stream as function_call_arguments deltas', async () => {
      const stream = sdk(kind).responses.stream({ model: 'tiny-chat', input: 'Weather?', tools: [timeTool, weatherTool], tool_choice: { type: 'function', name: 'get_weather' } });
      const deltas: string[] = [];
      stream.on('response.function_call_arguments.delta', (event) => deltas.push(event.delta));
      const final = await stream.finalResponse();
      const call = final.output.find((item) => item.type === 'function_call');
      if (call?.type !== 'function_call') throw new Error(`no function_call item in ${JSON.stringify(final.output)}`);
      expect(call).toMatchObject({ name: 'get_weather', status: 'completed' });
      expect(deltas.join('')).toBe(call.arguments);
      expect(Weather.parse(JSON.parse(call.arguments))).toEqual(JSON.parse(call.arguments));
      // The stored response is the streamed one (less the SDK's own parsed_arguments, added client-side).
      const { parsed_arguments: _parsed, ...stored } = call;
      expect((await sdk(kind).responses.retrieve(final.id)).output).toEqual([stored]);
    });
  });

  describe("the Vercel AI SDK's default OpenAI provider (Responses API)", () => {
    it('generateText', async () => {
      const result = await generateText({ model: aiSdk(kind)('tiny-chat'), prompt: 'abc', maxRetries: 0 });
      const chat = await chatOf(kind, [{ role: 'user', content: 'abc' }]);
      expect(result.text).toBe(chat.text);
      expect(result.finishReason).toBe('stop');
      expect(result.usage).toMatchObject({ inputTokens: chat.usage.input_tokens, outputTokens: chat.usage.output_tokens, totalTokens: chat.usage.total_tokens });
      if (live) {
        expect(result.text).toBe(ALPHABET_AFTER_C);
        expect(result.usage).toMatchObject({ inputTokens: 4, outputTokens: 23, totalTokens: 27 });
      }
    });

    it("a conversation continued from the previous result's messages (sent as item references to the stored response)", async () => {
      const model = aiSdk(kind)('tiny-chat');
      const first = await generateText({ model, prompt: 'abc', maxRetries: 0 });
      const second = await generateText({ model, messages: [{ role: 'user', content: 'abc' }, ...first.response.messages, { role: 'user', content: 'XY' }], maxRetries: 0 });
      const chat = await chatOf(kind, [{ role: 'user', content: 'abc' }, { role: 'assistant', content: first.text }, { role: 'user', content: 'XY' }]);
      expect(second.text).toBe(chat.text);
      // The referenced answer reached the engine: it is counted as input.
      expect(second.usage.inputTokens).toBe(chat.usage.input_tokens);
      if (live) {
        expect(second.text).toBe('Z');
        // BOS + "abc" + the first answer + "XY".
        expect(second.usage.inputTokens).toBe(1 + 3 + ALPHABET_AFTER_C.length + 2);
      }
    });

    it('streamText', async () => {
      const result = streamText({ model: aiSdk(kind)('tiny-chat'), prompt: 'uvw', maxRetries: 0 });
      const pieces: string[] = [];
      for await (const piece of result.textStream) pieces.push(piece);
      const chat = await chatOf(kind, [{ role: 'user', content: 'uvw' }]);
      expect(pieces.join('')).toBe(chat.text);
      expect(await result.finishReason).toBe('stop');
      expect(await result.usage).toMatchObject({ inputTokens: chat.usage.input_tokens, outputTokens: chat.usage.output_tokens });
      if (live) expect(pieces.join('')).toBe('xyz');
    });

    it('a tool() with a zod schema, toolChoice "required": called, executed, and its result answered in the next step', async () => {
      const seen: Array<z.infer<typeof Weather>> = [];
      const result = await generateText({
        model: aiSdk(kind)('tiny-chat'),
        prompt: 'Weather in Oslo?',
        tools: {
          get_weather: tool({
            description: 'Weather in a city',
            inputSchema: Weather,
            execute: async (input) => {
              seen.push(input);
              return { celsius: 3 };
            },
          }),
        },
        toolChoice: 'required',
        // Forced in the first step only: the second answers the tool's result in text.
        prepareStep: ({ stepNumber }) => (stepNumber > 0 ? { toolChoice: 'auto' } : undefined),
        stopWhen: stepCountIs(2),
        maxRetries: 0,
      });
      expect(seen).toHaveLength(1);
      expect(Weather.parse(seen[0])).toEqual(seen[0]);
      if (!live) expect(seen).toEqual([{ city: 'Paris' }]);
      expect(result.steps).toHaveLength(2);
      expect(result.steps[0]!.finishReason).toBe('tool-calls');
      expect(result.steps[0]!.toolCalls).toHaveLength(1);
      expect(result.steps[0]!.toolCalls[0]).toMatchObject({ toolName: 'get_weather', input: seen[0] });
      expect(result.steps[1]!.toolCalls).toEqual([]);
      // Live: the prompt ends with the tool's JSON result, so the whole alphabet follows.
      if (live) expect(result.text).toBe(ALPHABET);
      else expect(result.text).toMatch(/^The tool returned .*celsius.*3/);
    });

    it('generateObject with a zod schema: text.format json_schema, enforced by the engine, so the object parses', async () => {
      const schema = z.object({ answer: z.enum(['yes', 'no']), confidence: z.number().int() });
      const { object, usage } = await generateObject({ model: aiSdk(kind)('tiny-chat'), schema, prompt: 'Is the sky blue?', maxRetries: 0 });
      expect(schema.parse(object)).toEqual(object);
      if (!live) expect(object).toEqual({ answer: 'yes', confidence: 0 });
      expect(usage.outputTokens).toBeGreaterThan(0);
    });
  });
});
