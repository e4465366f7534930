// The Responses API over real HTTP, against stand-in vLLM replicas (which make tool calls,
// and can break mid-stream) and the sandbox, driven by the official `openai` SDK where a
// client would use it: validation with `param`, the translation the replica receives,
// streaming through the SDK's helpers, stored responses and chaining per organization,
// retention, billing, idempotency, and what a tenant could try against another.
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import type { LiveReplica } from '../src/inference/replica-source.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../../test/support/openai-upstream.js';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

const MODEL = 'llama-3.1-8b-instruct';
const DAY_MS = 86_400_000;
let cp: TestControlPlane;
let clock: ManualClock;
let key: string;
let sandboxKey: string;
let otherOrgKey: string;
let client: OpenAI;
let upstreams: OpenAiUpstream[] = [];
let live: LiveReplica[] = [];
let started = 0;

beforeAll(async () => {
  clock = new ManualClock(Date.now());
  cp = await startControlPlane({
    clock,
    config: { inferenceEjectMs: 60_000, responsesRetentionDays: 2 },
    replicas: {
      directory: { ready: (f = {}) => live.filter((r) => f.model === undefined || r.model === f.model) },
      plan: { desired: (model) => live.filter((r) => r.model === model).length },
    },
  });
  key = await cp.key();
  sandboxKey = await cp.key({ kind: 'test' });
  const other = await cp.app.services.orgs.create('other-org');
  otherOrgKey = await cp.key({ orgId: other.id });
  client = new OpenAI({ apiKey: key, baseURL: `${cp.baseUrl}/v1`, maxRetries: 0 });
});
afterAll(() => cp.close());
afterEach(async () => {
  await Promise.all(upstreams.map((u) => u.close()));
  upstreams = [];
  live = [];
});

async function replica(): Promise<OpenAiUpstream> {
  const name = `up-${started++}`;
  const up = await startOpenAiUpstream({ name, apiKey: `k-${name}` });
  upstreams.push(up);
  live.push({ id: `rep_${name}`, model: MODEL, quantization: 'int4', pool: 'na', nodeId: 'node_1', baseUrl: up.baseUrl, engine: 'vllm', image: 'vllm/vllm-openai:test', apiKey: `k-${name}` });
  return up;
}

const post = (body: unknown, apiKey = key, headers: Record<string, string> = {}) => cp.request('POST', '/v1/responses', { key: apiKey, body, headers });
const tools = [{ type: 'function' as const, name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: false }];

async function usageOf(requestId: string): Promise<any> {
  const page = (await cp.request('GET', '/v1/usage?limit=100', { key })).body.data as any[];
  return page.find((r) => r.request_id === requestId);
}

describe('validation', () => {
  it.each<[string, Record<string, unknown>, string]>([
    ['a missing input', { input: undefined }, 'input'],
    ['an unknown field', { frequency_penalty: 1 }, 'frequency_penalty'],
    ['more than 2,048 input items', { input: Array.from({ length: 2049 }, () => ({ role: 'user', content: 'x' })) }, 'input'],
    ['a built-in tool', { tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    ['a built-in tool choice', { tools, tool_choice: { type: 'file_search' } }, 'tool_choice'],
    ['a background response', { background: true }, 'background'],
    ['reasoning on a model that does not reason', { reasoning: { effort: 'high' } }, 'reasoning'],
    ['include', { include: ['file_search_call.results'] }, 'include'],
    ['a conversation object', { conversation: 'conv_123' }, 'conversation'],
    ['an image input', { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png' }] }] }, 'input[0].content[0].type'],
    ['a function call output answering nothing', { input: [{ role: 'user', content: 'x' }, { type: 'function_call_output', call_id: 'c9', output: 'r' }] }, 'input[1]'],
    ['temperature above 2', { temperature: 3 }, 'temperature'],
    ['max_output_tokens past the context window', { max_output_tokens: 200_000 }, 'max_output_tokens'],
    ['a tool whose parameters are not a JSON Schema', { tools: [{ type: 'function', name: 'f', parameters: { type: 'object', required: 'x' } }] }, 'tools[0].parameters'],
    ['17 metadata keys', { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata'],
    ['a text format that is not one', { text: { format: { type: 'xml' } } }, 'text.format.type'],
  ])('refuses %s with 400 naming the field', async (_name, patch, param) => {
    const error = expectError(await post({ model: MODEL, input: 'hi', ...patch }), 400, 'invalid_request');
    expect(error.param).toBe(param);
  });

  it('refuses an embedding model (400) and an unknown one (404 model_not_found)', async () => {
    expect(expectError(await post({ model: 'bge-m3', input: 'x' }), 400, 'invalid_request').param).toBe('model');
    expect(expectError(await post({ model: 'gpt-9', input: 'x' }), 404, 'model_not_found').param).toBe('model');
  });

  it('answers 409 no_capacity, with rate-limit headers, when no replica serves the model', async () => {
    const res = await post({ model: MODEL, input: 'hi' });
    expectError(res, 409, 'no_capacity');
    expect(res.headers.get('x-ratelimit-remaining-requests')).not.toBeNull();
  });
});

describe('served by replicas', () => {
  it('translates to one chat completion, answers a Response through the SDK, and bills it like chat', async () => {
    const up = await replica();
    const { data: response, response: raw } = await client.responses
      .create({ model: MODEL, instructions: 'Be brief.', input: 'weather?', max_output_tokens: 50, metadata: { ticket: '42' } })
      .withResponse();
    expect(response.output_text).toBe(`Hello from ${up.name}`);
    expect(response).toMatchObject({ object: 'response', status: 'completed', model: MODEL, instructions: 'Be brief.', metadata: { ticket: '42' }, max_output_tokens: 50 });
    expect(response.usage).toEqual({ input_tokens: 5, input_tokens_details: { cached_tokens: 0 }, output_tokens: 3, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 8 });
    expect(up.requests[0]).toEqual({
      path: '/v1/chat/completions',
      body: { model: MODEL, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'weather?' }], temperature: 0.7, top_p: 1, top_k: 0, max_tokens: 50 },
    });
    // The same tokens cost what a chat completion costs.
    const chat = await cp.request('POST', '/v1/chat/completions', { key, body: { model: MODEL, messages: [{ role: 'user', content: 'x' }] } });
    await cp.app.services.inference.recorder.flush();
    const [mine, theirs] = [await usageOf(raw.headers.get('x-request-id')!), await usageOf(chat.headers.get('x-request-id')!)];
    expect(mine).toMatchObject({ kind: 'chat', model: MODEL, prompt_tokens: 5, completion_tokens: 3, sandbox: false });
    expect(mine.cost_usd).toBe(theirs.cost_usd);
    expect(mine.cost_usd).toBeGreaterThan(0);
  });

  it('streams through responses.stream(): the SDK accumulates the events into the stored response', async () => {
    const up = await replica();
    const stream = client.responses.stream({ model: MODEL, input: 'weather?' });
    const deltas: string[] = [];
    const types: string[] = [];
    stream.on('response.output_text.delta', (e) => deltas.push(e.delta));
    stream.on('event', (e) => types.push(e.type));
    const final = await stream.finalResponse();
    expect(deltas.join('')).toBe(`Hello from ${up.name}`);
    expect(final.output_text).toBe(`Hello from ${up.name}`);
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    expect(final.usage).toMatchObject({ input_tokens: 5, output_tokens: 3, total_tokens: 8 });
    const stored = await client.responses.retrieve(final.id);
    expect(final.output).toMatchObject(stored.output);
    expect(stored.usage).toEqual(final.usage);
  });

  it('a replica breaking mid-stream ends the stream with response.failed, and the tokens it made are billed', async () => {
    const up = await replica();
    up.mode = 'break-stream';
    const res = await fetch(`${cp.baseUrl}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, input: 'weather?', stream: true }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    const events = text.split('\n\n').filter(Boolean).map((block) => JSON.parse(block.split('\n').find((l) => l.startsWith('data: '))!.slice(6)));
    expect(events.map((e) => e.type)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added', 'response.output_text.delta', 'response.failed']);
    expect(events.at(-1).response).toMatchObject({ status: 'failed', error: { code: 'server_error' } });
    await cp.app.services.inference.recorder.flush();
    expect(await usageOf(res.headers.get('x-request-id')!)).toMatchObject({ prompt_tokens: 5, completion_tokens: 1 });
  });

  it("a client leaving mid-stream cancels the replica's work and is still billed for what was made", async () => {
    const up = await replica();
    up.mode = 'hang-stream';
    const aborter = new AbortController();
    const res = await fetch(`${cp.baseUrl}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, input: 'weather?', stream: true }),
      signal: aborter.signal,
    });
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('response.output_text.delta')) text += new TextDecoder().decode((await reader.read()).value);
    aborter.abort();
    await expect.poll(() => up.abandonedStreams, { timeout: 5000 }).toBe(1);
    await expect.poll(async () => {
      await cp.app.services.inference.recorder.flush();
      return usageOf(res.headers.get('x-request-id')!);
    }, { timeout: 5000 }).toMatchObject({ prompt_tokens: 5, completion_tokens: 1 });
  });

  it('a function tool round trip: the call is an output item, its output chains on previous_response_id', async () => {
    const up = await replica();
    const first = await client.responses.create({ model: MODEL, input: 'weather in Oslo?', tools, tool_choice: 'required', parallel_tool_calls: false });
    const call = first.output[0]!;
    expect(call).toMatchObject({ type: 'function_call', name: 'get_weather', arguments: '{"city":"Oslo"}', call_id: 'call_up1', status: 'completed' });
    expect(up.requests[0]!.body).toMatchObject({
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: tools[0]!.parameters, strict: false } }],
      tool_choice: 'required',
      parallel_tool_calls: false,
    });
    const second = await client.responses.create({
      model: MODEL,
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: 'call_up1', output: '{"celsius":3}' }],
    });
    expect(second.output_text).toBe(`Hello from ${up.name}`);
    // The whole conversation goes to the engine, which counts (and so bills) all of it.
    expect(up.requests[1]!.body.messages).toEqual([
      { role: 'user', content: 'weather in Oslo?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_up1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', content: '{"celsius":3}', tool_call_id: 'call_up1' },
    ]);
    // The same turn by reference to the stored call item instead of previous_response_id.
    await client.responses.create({
      model: MODEL,
      input: [{ role: 'user', content: 'weather in Oslo?' }, { type: 'item_reference', id: call.id! }, { type: 'function_call_output', call_id: 'call_up1', output: '{"celsius":3}' }],
    });
    expect(up.requests[2]!.body.messages).toEqual(up.requests[1]!.body.messages);
  });

  it('streams a tool call as function_call events the SDK accumulates', async () => {
    await replica();
    const stream = client.responses.stream({ model: MODEL, input: 'weather?', tools });
    const args: string[] = [];
    stream.on('response.function_call_arguments.delta', (e) => args.push(e.delta));
    const final = await stream.finalResponse();
    expect(args.join('')).toBe('{"city":"Oslo"}');
    expect(final.output).toMatchObject([{ id: expect.stringMatching(/^fc_/), type: 'function_call', status: 'completed', call_id: 'call_up1', name: 'get_weather', arguments: '{"city":"Oslo"}' }]);
  });

  it('text.format: json_schema reaches the engine as response_format and is echoed on the response', async () => {
    const up = await replica();
    const format = { type: 'json_schema', name: 'city', schema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'], additionalProperties: false }, strict: true };
    const res = await post({ model: MODEL, input: 'a city', text: { format } });
    expect(res.status, res.text).toBe(200);
    expect(up.requests[0]!.body.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'city', schema: format.schema, strict: true } });
    expect(res.body.text).toEqual({ format });
  });
});

describe('stored responses', () => {
  it('lists input items only as OpenAI pages them: a bad limit, order, include or after is a 400 naming it', async () => {
    await replica();
    const response = await client.responses.create({ model: MODEL, input: 'x' });
    const items = (query: string) => cp.request('GET', `/v1/responses/${response.id}/input_items${query}`, { key });
    expect((await items('')).body).toMatchObject({ object: 'list', data: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x' }] }], has_more: false });
    for (const [query, param] of [['?limit=0', 'limit'], ['?limit=101', 'limit'], ['?order=sideways', 'order'], ['?include=file_search_call.results', 'include'], ['?after=msg_nope_in0', 'after'], ['?before=x', 'before']] as const) {
      expect(expectError(await items(query), 400, 'invalid_request').message, query).toMatch(param);
    }
  });

  it('store: false is answered but never stored: not readable, not chainable', async () => {
    await replica();
    const response = await client.responses.create({ model: MODEL, input: 'x', store: false });
    expect((response as unknown as { store: boolean }).store).toBe(false);
    expectError(await cp.request('GET', `/v1/responses/${response.id}`, { key }), 404, 'not_found');
    expect(expectError(await post({ model: MODEL, input: 'y', previous_response_id: response.id }), 404, 'not_found').param).toBe('previous_response_id');
  });

  it('another organization can neither read, delete, chain on nor reference a response: 404 as if it did not exist', async () => {
    const up = await replica();
    const mine = await client.responses.create({ model: MODEL, input: 'secret plans' });
    expectError(await cp.request('GET', `/v1/responses/${mine.id}`, { key: otherOrgKey }), 404, 'not_found');
    expectError(await cp.request('DELETE', `/v1/responses/${mine.id}`, { key: otherOrgKey }), 404, 'not_found');
    expectError(await cp.request('GET', `/v1/responses/${mine.id}/input_items`, { key: otherOrgKey }), 404, 'not_found');
    expect(expectError(await post({ model: MODEL, input: 'go on', previous_response_id: mine.id }, otherOrgKey), 404, 'not_found').param).toBe('previous_response_id');
    expect(expectError(await post({ model: MODEL, input: [{ type: 'item_reference', id: mine.output[0]!.id }] }, otherOrgKey), 404, 'not_found').param).toBe('input[0].id');
    // Nothing of it reached a replica, and it is still there for its owner.
    expect(up.requests).toHaveLength(1);
    expect((await client.responses.retrieve(mine.id)).output_text).toBe(mine.output_text);
  });

  it('a few KB of item_reference items naming one long stored answer are refused before they are copied, stored or not: 400, nothing sent to a replica', async () => {
    const up = await replica();
    const random = 'A'.repeat(32);
    const id = `resp_${random}`;
    const text = 'x'.repeat(300_000); // a long answer, as a model with a large context writes one
    const now = clock.now();
    await cp.store.responses.put({
      id,
      orgId: cp.org.id,
      response: { id, object: 'response', output: [{ id: `msg_${random}_0`, type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] }] },
      history: [],
      createdAt: now,
      expiresAt: now + DAY_MS,
    });
    const input = Array.from({ length: 2_000 }, () => ({ type: 'item_reference', id: `msg_${random}_0` }));
    for (const store of [false, true]) {
      const res = await post({ model: MODEL, input, store });
      const error = expectError(res, 400, 'invalid_request');
      expect(error.message).toMatch(/larger than 8 MiB/);
      expect(error.param).toBe('input');
    }
    expect(up.requests).toHaveLength(0);
    // A few references are fine.
    expect((await post({ model: MODEL, input: input.slice(0, 3), store: false })).status).toBe(200);
  });

  it('takes a null for an optional field as the field left out', async () => {
    await replica();
    const res = await post({ model: MODEL, input: 'hi', store: null, tools: null, tool_choice: null, text: null, user: null, instructions: null, previous_response_id: null, max_output_tokens: null, temperature: null });
    expect(res.status, res.text).toBe(200);
    expect(res.body.status).toBe('completed');
    // The `reasoning` every Response carries, sent back as it came.
    const echoed = await post({ model: MODEL, input: 'hi', reasoning: res.body.reasoning });
    expect(echoed.status, echoed.text).toBe(200);
  });

  it('reading back refuses stream=true and unknown query fields with a 400 naming them, rather than an empty event stream', async () => {
    await replica();
    const stored = await client.responses.create({ model: MODEL, input: 'x' });
    expect(expectError(await cp.request('GET', `/v1/responses/${stored.id}?stream=true`, { key }), 400, 'invalid_request').param).toBe('stream');
    expect(expectError(await cp.request('GET', `/v1/responses/${stored.id}?bogus=1`, { key }), 400, 'invalid_request').param).toBe('bogus');
    expect((await cp.request('GET', `/v1/responses/${stored.id}?stream=false`, { key })).status).toBe(200);
    expect(expectError(await cp.request('DELETE', `/v1/responses/${stored.id}?bogus=1`, { key }), 400, 'invalid_request').param).toBe('bogus');
  });

  it('delete: gone for reading and chaining; deleting again is 404', async () => {
    await replica();
    const response = await client.responses.create({ model: MODEL, input: 'x' });
    const deleted = await cp.request('DELETE', `/v1/responses/${response.id}`, { key });
    expect(deleted.body).toEqual({ id: response.id, object: 'response', deleted: true });
    expectError(await cp.request('GET', `/v1/responses/${response.id}`, { key }), 404, 'not_found');
    expectError(await cp.request('DELETE', `/v1/responses/${response.id}`, { key }), 404, 'not_found');
    expectError(await post({ model: MODEL, input: 'y', previous_response_id: response.id }), 404, 'not_found');
    // Deleting a stored response is no inference request: /metrics counts only the create.
    const metrics = (await cp.request('GET', '/metrics')).text;
    expect(metrics).toMatch(/svc_inference_requests_total\{endpoint="\/v1\/responses",model="llama-3\.1-8b-instruct"[^}]*status="200"\} \d+/);
    expect(metrics).not.toContain('endpoint="/v1/responses/:response_id"');
  });

  it('expires after SVC_RESPONSES_RETENTION_DAYS, and the purge removes it', async () => {
    await replica();
    const response = await client.responses.create({ model: MODEL, input: 'x' });
    clock.advance(2 * DAY_MS - 1000);
    expect((await cp.request('GET', `/v1/responses/${response.id}`, { key })).status).toBe(200);
    clock.advance(1000);
    expectError(await cp.request('GET', `/v1/responses/${response.id}`, { key }), 404, 'not_found');
    expect(await cp.app.services.inference.responses.purgeExpired()).toBeGreaterThanOrEqual(1);
    expect(cp.store.db.prepare('SELECT COUNT(*) AS n FROM stored_responses WHERE id = ?').get(response.id)).toEqual({ n: 0 });
  });

  it('a chain cannot grow past 2,048 messages: the request naming it is refused before any replica works', async () => {
    const up = await replica();
    const big = await client.responses.create({ model: MODEL, input: Array.from({ length: 2000 }, (_, i) => ({ role: 'user' as const, content: `m${i}` })) });
    const res = await post({ model: MODEL, previous_response_id: big.id, input: Array.from({ length: 48 }, () => ({ role: 'user', content: 'more' })) });
    expect(expectError(res, 400, 'invalid_request').param).toBe('previous_response_id');
    expect(up.requests).toHaveLength(1);
  });

  it('a chain cannot grow past what the context window can hold: each link fits, their sum is refused before any replica works', async () => {
    // 16 bytes per token of the model's 131,072-token context: 2 MiB of text (the 8 MiB chain bound is for larger contexts).
    const up = await replica();
    const big = await client.responses.create({ model: MODEL, input: 'x'.repeat(1.5 * 1024 * 1024) });
    for (const store of [true, false]) {
      const res = await post({ model: MODEL, previous_response_id: big.id, input: 'y'.repeat(1024 * 1024), store });
      const error = expectError(res, 400, 'invalid_request');
      expect(error).toMatchObject({ param: 'input', code: 'context_length_exceeded' });
    }
    expect(up.requests).toHaveLength(1);
  });
});

describe('sandbox keys', () => {
  it('answer deterministically without a replica, make tool calls, and take the tool output', async () => {
    const sandbox = new OpenAI({ apiKey: sandboxKey, baseURL: `${cp.baseUrl}/v1`, maxRetries: 0 });
    const a = await sandbox.responses.create({ model: MODEL, input: 'hello' });
    const b = await sandbox.responses.create({ model: MODEL, input: 'hello' });
    expect(a.output_text).toMatch(/^Sandbox reply /);
    expect(b.output_text).toBe(a.output_text);
    const call = await sandbox.responses.create({ model: MODEL, input: 'weather?', tools });
    expect(call.output[0]).toMatchObject({ type: 'function_call', name: 'get_weather', arguments: '{"city":"example"}' });
    const answer = await sandbox.responses.create({
      model: MODEL,
      previous_response_id: call.id,
      input: [{ type: 'function_call_output', call_id: (call.output[0] as { call_id: string }).call_id, output: 'sunny' }],
      tools,
    });
    expect(answer.output_text).toMatch(/^The tool returned "sunny"\./);
  });
});

describe('idempotency', () => {
  it('a retried create with the same X-Service-Idempotency-Key replays the same response, served once', async () => {
    const up = await replica();
    const body = { model: MODEL, input: 'once' };
    const idem = { 'x-service-idempotency-key': randomUUID() };
    const first = await post(body, key, idem);
    const again = await post(body, key, idem);
    expect(first.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    expect(up.requests).toHaveLength(1);
  });
});
