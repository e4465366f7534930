// The inference API's own behaviour, without model servers: validation of every field
// with `param`, the router's refusals when no replica runs, sandbox keys (deterministic
// mock answers, streamed or not, tool calls, the daily token cap) and usage records.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeBase64Float32 } from '../src/inference/embeddings-request.js';
import { SseParser } from '../src/inference/sse.js';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

let cp: TestControlPlane;
let live: string;
let sandbox: string;
const chat = { model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'hello' }] };

beforeAll(async () => {
  cp = await startControlPlane({ config: { sandboxDailyTokens: 400 } });
  live = await cp.key();
  sandbox = await cp.key({ kind: 'test' });
});
afterAll(() => cp.close());

const post = (path: string, body: unknown, key = live, headers: Record<string, string> = {}) => cp.request('POST', path, { key, body, headers });

describe('chat completions: validation', () => {
  it.each<[string, Record<string, unknown>, string]>([
    ['a missing model', { messages: chat.messages, model: undefined }, 'model'],
    ['missing messages', { messages: undefined }, 'messages'],
    ['an empty message list', { messages: [] }, 'messages'],
    ['an unknown role', { messages: [{ role: 'robot', content: 'x' }] }, 'messages[0].role'],
    ['temperature above 2', { temperature: 2.5 }, 'temperature'],
    ['top_p above 1', { top_p: 1.5 }, 'top_p'],
    ['temperature with top_p', { temperature: 0.2, top_p: 0.5 }, 'top_p'],
    ['a negative top_k', { top_k: -1 }, 'top_k'],
    ['max_tokens past the context window', { max_tokens: 200_000 }, 'max_tokens'],
    ['five stop sequences', { stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop'],
    ['an unsupported field', { functions: [] }, 'functions'],
    ['n above 1', { n: 2 }, 'n'],
    ['more than 20 top_logprobs', { logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
    ['top_logprobs without logprobs', { top_logprobs: 2 }, 'top_logprobs'],
    ['a frequency penalty above 2', { frequency_penalty: 2.5 }, 'frequency_penalty'],
    ['a presence penalty below -2', { presence_penalty: -3 }, 'presence_penalty'],
    ['a logit_bias key that is no token id', { logit_bias: { hello: 1 } }, 'logit_bias.hello'],
    ['a logit_bias above 100', { logit_bias: { '42': 101 } }, 'logit_bias[42]'],
    ['301 logit_bias entries', { logit_bias: Object.fromEntries(Array.from({ length: 301 }, (_, i) => [String(i), 1])) }, 'logit_bias'],
    ['a vLLM-only field, reaching past the API to the engine', { guided_grammar: 'root ::= "x"' }, 'guided_grammar'],
    ['a vLLM-only field, asking for another priority', { priority: -100 }, 'priority'],
    ['stream_options the control plane keeps for billing', { stream: true, stream_options: { continuous_usage_stats: false } }, 'stream_options.continuous_usage_stats'],
    ['parallel_tool_calls that is not a boolean', { parallel_tool_calls: 'yes' }, 'parallel_tool_calls'],
    ['a seed that is not an integer', { seed: 1.5 }, 'seed'],
    ['a penalty outside the range OpenAI allows', { presence_penalty: 2.5 }, 'presence_penalty'],
    ['logprobs the CPU engine cannot report', { model: 'tiny-chat', logprobs: true }, 'logprobs'],
    ['an unknown quantization', { quantization: 'int8' }, 'quantization'],
    ['a tool whose parameters are not a JSON Schema', { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', required: 'x' } } }] }, 'tools[0].function.parameters'],
    ['a tool message answering nothing', { messages: [{ role: 'user', content: 'x' }, { role: 'tool', content: 'r', tool_call_id: 'c9' }] }, 'messages[1].tool_call_id'],
  ])('refuses %s with 400 naming %s', async (_name, patch, param) => {
    const error = expectError(await post('/v1/chat/completions', { ...chat, ...patch }), 400, 'invalid_request');
    expect(error.param).toBe(param);
  });

  it('refuses a __proto__ key in logit_bias before it reaches any object', async () => {
    const error = expectError(await post('/v1/chat/completions', { ...chat, logit_bias: JSON.parse('{"__proto__": 5}') }), 400, 'invalid_request');
    expect(error.message).toMatch(/__proto__|prototype/i);
  });

  it('refuses an embedding model with 400 and an unknown model with 404 model_not_found', async () => {
    expect(expectError(await post('/v1/chat/completions', { ...chat, model: 'bge-m3' }), 400, 'invalid_request').param).toBe('model');
    expect(expectError(await post('/v1/chat/completions', { ...chat, model: 'gpt-9' }), 404, 'model_not_found').param).toBe('model');
  });

  it('refuses an X-Service-Pool outside na, eu, apac', async () => {
    const error = expectError(await post('/v1/chat/completions', chat, live, { 'x-service-pool': 'mars' }), 400, 'invalid_request');
    expect(error.param).toBe('x-service-pool');
  });
});

describe('chat completions: no replica running', () => {
  it('is 409 no_capacity unpinned, and 404 model_not_found pinned to a pool that does not serve the model', async () => {
    const res = await post('/v1/chat/completions', chat);
    expectError(res, 409, 'no_capacity');
    expect(res.headers.get('x-ratelimit-remaining-requests')).not.toBeNull();
    expectError(await post('/v1/chat/completions', chat, live, { 'x-service-pool': 'eu' }), 404, 'model_not_found');
  });
});

describe('embeddings: validation', () => {
  it.each<[string, Record<string, unknown>, string]>([
    ['a missing input', { input: undefined }, 'input'],
    ['an empty string among the inputs', { input: ['a', ''] }, 'input[1]'],
    ['2,049 inputs', { input: Array.from({ length: 2049 }, () => 'x') }, 'input'],
    ['a number input', { input: 42 }, 'input'],
    ['an unknown encoding', { encoding_format: 'hex' }, 'encoding_format'],
    ['zero dimensions', { dimensions: 0 }, 'dimensions'],
    ['more dimensions than the Matryoshka model has', { model: 'nomic-embed-text-v1.5', dimensions: 769 }, 'dimensions'],
    ['a chat model', { model: 'llama-3.1-8b-instruct' }, 'model'],
  ])('refuses %s with 400 naming %s', async (_name, patch, param) => {
    const error = expectError(await post('/v1/embeddings', { model: 'bge-m3', input: 'hi', ...patch }), 400, 'invalid_request');
    expect(error.param).toBe(param);
  });
});

describe('sandbox keys', () => {
  it('answer chat deterministically, without replicas, at no cost', async () => {
    const first = await post('/v1/chat/completions', chat, sandbox);
    expect(first.status, first.text).toBe(200);
    const again = await post('/v1/chat/completions', chat, sandbox);
    expect(again.body.choices).toEqual(first.body.choices);
    expect(first.body).toMatchObject({ object: 'chat.completion', model: 'llama-3.1-8b-instruct', pool: 'na', choices: [{ index: 0, message: { role: 'assistant' }, finish_reason: 'stop' }] });
    expect(first.body.system_fingerprint).toMatch(/^fp_/);
    expect(first.body.usage.total_tokens).toBe(first.body.usage.prompt_tokens + first.body.usage.completion_tokens);
  });

  it('stream the same answer as SSE chunks, with usage when asked, then [DONE]', async () => {
    const whole = (await post('/v1/chat/completions', { ...chat, max_tokens: 6 }, sandbox)).body;
    const res = await post('/v1/chat/completions', { ...chat, max_tokens: 6, stream: true, stream_options: { include_usage: true } }, sandbox, { 'x-service-pool': 'eu' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    expect(res.headers.get('x-ratelimit-limit-requests')).toBe('1200');
    const events = new SseParser().push(res.text);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    for (const c of chunks) expect(c).toMatchObject({ object: 'chat.completion.chunk', model: 'llama-3.1-8b-instruct', pool: 'eu', id: chunks[0].id });
    const text = chunks.flatMap((c) => c.choices.map((ch: any) => ch.delta.content ?? '')).join('');
    expect(text).toBe(whole.choices[0].message.content);
    expect(chunks.at(-2).choices[0].finish_reason).toBe('length');
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: whole.usage });
  });

  it('answer with deterministic log probabilities when asked, whole and streamed', async () => {
    const key = await cp.key({ kind: 'test' });
    const body = { ...chat, logprobs: true, top_logprobs: 3, max_tokens: 5 };
    const whole = (await post('/v1/chat/completions', body, key)).body.choices[0];
    expect(whole.logprobs.content.map((t: any) => t.token).join('')).toBe(whole.message.content);
    for (const t of whole.logprobs.content) {
      expect(t.top_logprobs).toHaveLength(3);
      expect(t.top_logprobs[0]).toEqual({ token: t.token, logprob: t.logprob, bytes: [...Buffer.from(t.token)] });
      expect(t.top_logprobs[1].logprob).toBeLessThan(t.logprob);
    }
    const res = await post('/v1/chat/completions', { ...body, stream: true }, key);
    const chunks = new SseParser().push(res.text).filter((d) => d !== '[DONE]').map((d) => JSON.parse(d));
    expect(chunks.flatMap((c) => c.choices.flatMap((ch: any) => ch.logprobs?.content ?? []))).toEqual(whole.logprobs.content);
    expect((await post('/v1/chat/completions', chat, key)).body.choices[0].logprobs).toBeNull();
  });

  it('answer embeddings with unit vectors of the model dimension, base64 equal to float', async () => {
    const float = (await post('/v1/embeddings', { model: 'bge-m3', input: ['a', 'b'] }, sandbox)).body;
    expect(float.data).toHaveLength(2);
    expect(float.data[0].embedding).toHaveLength(1024);
    expect(Math.hypot(...float.data[0].embedding)).toBeCloseTo(1, 5);
    const b64 = (await post('/v1/embeddings', { model: 'bge-m3', input: ['a', 'b'], encoding_format: 'base64' }, sandbox)).body;
    decodeBase64Float32(b64.data[1].embedding).forEach((x, i) => expect(x).toBeCloseTo(float.data[1].embedding[i], 6));
    const cut = (await post('/v1/embeddings', { model: 'nomic-embed-text-v1.5', input: 'a', dimensions: 64 }, sandbox)).body;
    expect(cut.data[0].embedding).toHaveLength(64);
  });

  it('are recorded as usage at no cost', async () => {
    const list = (await cp.request('GET', '/v1/usage?limit=100', { key: live })).body;
    const records = list.data.filter((r: any) => r.sandbox);
    expect(records.length).toBeGreaterThan(0);
    for (const r of records) expect(r.cost_usd).toBe(0);
    expect(records.some((r: any) => r.kind === 'embeddings')).toBe(true);
    const bge = (await cp.request('GET', '/v1/usage?model=bge-m3', { key: live })).body.data;
    expect(bge.length).toBeGreaterThan(0);
    expect(bge.every((r: any) => r.model === 'bge-m3')).toBe(true);
    const byKey = (await cp.request('GET', `/v1/usage?key_id=${records[0].key_id}&limit=1`, { key: live })).body;
    expect(byKey.data[0].key_id).toBe(records[0].key_id);
    const next = (await cp.request('GET', `/v1/usage?key_id=${records[0].key_id}&limit=1&after=${byKey.next_cursor}`, { key: live })).body;
    expect(next.data[0].id).not.toBe(byKey.data[0].id);
  });

  it('stop at the daily token cap with 429 rate_limited, code daily_token_cap and retry-after', async () => {
    const capped = await cp.key({ kind: 'test' });
    let res;
    for (let i = 0; i < 100; i++) {
      res = await post('/v1/chat/completions', { ...chat, messages: [{ role: 'user', content: `question ${i}` }] }, capped);
      if (res.status !== 200) break;
    }
    const error = expectError(res!, 429, 'rate_limited');
    expect(error.code).toBe('daily_token_cap');
    expect(Number(res!.headers.get('retry-after'))).toBeGreaterThan(0);
    // Other sandbox keys have their own allowance.
    expect((await post('/v1/chat/completions', chat, await cp.key({ kind: 'test' }))).status).toBe(200);
  });

  it('counts tool definitions and response schemas against the daily cap, as an engine counts them in the prompt', async () => {
    const key = await cp.key({ kind: 'test' });
    // About 500 tokens of schema around a one-word message: past the test's cap of 400 a day.
    const described = (n: number) => ({ type: 'string', description: 'x'.repeat(n) });
    const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: described(2_000) } } } }];
    const withTools = await post('/v1/chat/completions', { ...chat, tools }, key);
    expect(expectError(withTools, 429, 'rate_limited').message).toMatch(/^this sandbox key used 0 of its 400 tokens today and the request needs 5\d\d;/);
    const format = { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object', properties: { a: described(2_000) } } } };
    expectError(await post('/v1/chat/completions', { ...chat, response_format: format }, key), 429, 'rate_limited');
    // The same request with a small tool passes, and its usage counts the definition.
    const small = await post('/v1/chat/completions', { ...chat, tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: described(40) } } } }] }, key);
    expect(small.status).toBe(200);
    expect(small.body.usage.prompt_tokens).toBeGreaterThan(3 + 2 + 20);
  });
});

// A schema a few hundred bytes long can ask for a smallest value of gigabytes (minItems
// times minLength, or times a long const). Building it took the control plane's heap (one
// request killed the process); it is now refused or answered within 64 KiB.
describe('schemas whose smallest value is huge', () => {
  const strings = { type: 'object', properties: { a: { type: 'array', minItems: 1_000, items: { type: 'string', minLength: 10_000 } } }, required: ['a'] };
  const consts = { type: 'object', properties: { a: { type: 'array', minItems: 800, items: { const: 'x'.repeat(6_000) } } }, required: ['a'] };
  const tool = (parameters: Record<string, unknown>) => [{ type: 'function', function: { name: 'fill', parameters } }];

  it.each<[string, Record<string, unknown>, string]>([
    ['response_format: a thousand strings of 10,000 characters', { response_format: { type: 'json_schema', json_schema: { name: 's', schema: strings } } }, 'response_format.json_schema.schema'],
    ['response_format: a 6,000-character const 800 times', { response_format: { type: 'json_schema', json_schema: { name: 's', schema: consts } } }, 'response_format.json_schema.schema'],
    ['a forced tool call', { tools: tool(strings), tool_choice: 'required' }, 'tools[0].function.parameters'],
  ])('refuses %s with 400 naming the schema, for sandbox and live keys alike', async (_name, patch, param) => {
    for (const key of [sandbox, live]) {
      const error = expectError(await post('/v1/chat/completions', { ...chat, max_tokens: 1, ...patch }, key), 400, 'invalid_request');
      expect(error.param).toBe(param);
      expect(error.message).toMatch(/no JSON value of at most 65536 characters satisfies the schema/);
    }
    // The process is alive and answers.
    expect((await post('/v1/chat/completions', chat, sandbox)).status).toBe(200);
  });

  it('answers a sandbox tool call whose schema has no small value with small arguments, not megabytes', async () => {
    const key = await cp.key({ kind: 'test' });
    const res = await post('/v1/chat/completions', { ...chat, tools: tool(strings) }, key);
    expect(res.status, res.text).toBe(200);
    const args = res.body.choices[0].message.tool_calls[0].function.arguments as string;
    expect(args.length).toBeLessThanOrEqual(64 * 1024);
    expect(JSON.parse(args)).toEqual({ a: ['example'] });
    expect(res.body.usage.completion_tokens).toBeLessThan(100);
  });

  it('answers the largest value within the bound, cut by max_tokens', async () => {
    const key = await cp.key({ kind: 'test' });
    const schema = { type: 'object', properties: { a: { type: 'array', minItems: 5, items: { type: 'string', minLength: 10_000 } } }, required: ['a'] };
    const res = await post('/v1/chat/completions', { ...chat, max_tokens: 3, response_format: { type: 'json_schema', json_schema: { name: 's', schema } } }, key);
    expect(res.status, res.text).toBe(200);
    expect(res.body.choices[0]).toMatchObject({ message: { content: '{"a":["xxxxx' }, finish_reason: 'length' });
    expect(res.body.usage.completion_tokens).toBe(3);
  });

  it('refuses a sandbox request whose prompt alone passes the daily cap counting the prompt only: its answer is never built', async () => {
    const key = await cp.key({ kind: 'test' });
    // 3 + 2,000 / 4 = 503 prompt tokens, past the test's cap of 400; the answer would add more.
    const res = await post('/v1/chat/completions', { ...chat, messages: [{ role: 'user', content: 'x'.repeat(2_000) }] }, key);
    expect(expectError(res, 429, 'rate_limited').message).toMatch(/^this sandbox key used 0 of its 400 tokens today and the request needs 503;/);
  });
});

// Ajv's meta-schema check compares every pair of an enum's values: one tool with a
// 160,000-value enum (1 MB) blocked the event loop for 46 seconds. Every tool's parameters
// now keep the schema limits, checked before the meta-schema.
describe('tool parameters within the schema limits', () => {
  const tool = (parameters: Record<string, unknown>) => ({ tools: [{ type: 'function', function: { name: 'pick', parameters } }] });
  const values = (n: number) => Array.from({ length: n }, (_, i) => i);

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['a 5,000-value enum', { type: 'object', properties: { a: { enum: values(5_000) } } }, /the schema has 5000 enum values; at most 1000/],
    ["the auditor's 160,000-value enum (1 MB)", { type: 'object', properties: { a: { enum: values(160_000) } } }, /function parameters are \d+ bytes; at most 65536/],
    ['an enum under dependencies, which the walk had skipped', { type: 'object', dependencies: { a: { properties: { b: { enum: values(1_500) } } } } }, /the schema has 1500 enum values; at most 1000/],
    ['parameters over 64 KiB', { type: 'object', properties: { a: { type: 'string', description: 'x'.repeat(70_000) } } }, /function parameters are \d+ bytes; at most 65536/],
    ['3,000 subschemas', { type: 'object', properties: Object.fromEntries(values(3_000).map((i) => [`p${i}`, {}])) }, /more than 2000 subschemas/],
    ['duplicate enum values', { type: 'object', properties: { a: { enum: ['x', 'y', 'x'] } } }, /parameters\/properties\/a\/enum must NOT have duplicate items \(items ## 0 and 2 are identical\)/],
    ['equal objects in an enum, keys in another order', { type: 'object', properties: { a: { enum: [{ u: 1, v: 2 }, { v: 2, u: 1 }] } } }, /must NOT have duplicate items/],
  ])('refuses %s with 400 naming tools[0].function.parameters, and keeps answering', async (_name, parameters, message) => {
    for (const key of [live, sandbox]) {
      const error = expectError(await post('/v1/chat/completions', { ...chat, ...tool(parameters) }, key), 400, 'invalid_request');
      expect(error.param).toBe('tools[0].function.parameters');
      expect(error.message).toMatch(message);
    }
    expectError(await post('/v1/chat/completions', chat), 409, 'no_capacity');
  });

  it('takes a 1,000-value enum, and duplicates where the draft allows them (2020-12)', async () => {
    expectError(await post('/v1/chat/completions', { ...chat, ...tool({ type: 'object', properties: { a: { enum: values(1_000) } } }) }), 409, 'no_capacity');
    const duplicates = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { a: { enum: ['x', 'x'] } } };
    expectError(await post('/v1/chat/completions', { ...chat, ...tool(duplicates) }), 409, 'no_capacity');
  });

  it("bounds all tools' parameters of a request together (128 tools of 64 KiB each had held the event loop for half a second): the tool past 512 KiB is named", async () => {
    // Each tool within its own bound: 60 KB of description.
    const big = (i: number) => ({ type: 'function', function: { name: `t${i}`, parameters: { type: 'object', description: 'x'.repeat(60_000) } } });
    const eight = Array.from({ length: 8 }, (_, i) => big(i));
    expectError(await post('/v1/chat/completions', { ...chat, tools: eight }), 409, 'no_capacity');
    const nine = [...eight, big(8)];
    const error = expectError(await post('/v1/chat/completions', { ...chat, tools: nine }), 400, 'invalid_request');
    expect(error.param).toBe('tools[8].function.parameters');
    expect(error.message).toMatch(/the tools' parameters add up to more than 524288 bytes with this one/);
  });

  it('names the field of the Responses API', async () => {
    const res = await post('/v1/responses', { model: chat.model, input: 'hi', tools: [{ type: 'function', name: 'pick', parameters: { type: 'object', properties: { a: { enum: values(5_000) } } } }] });
    expect(expectError(res, 400, 'invalid_request').param).toBe('tools[0].parameters');
  });
});
