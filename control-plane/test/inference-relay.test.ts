// How the control plane relays model servers' answers, against stand-in replicas that do
// what the CPU engine cannot (tool calls, as vLLM makes them) or should not (crash, hang):
// tool calls relayed whole and streamed, a failing replica retried elsewhere and ejected,
// a broken stream reported in the stream, a client that leaves cancelling the replica's
// work, embeddings batched across replicas in input order.
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import OpenAI from 'openai';
import { Agent as UndiciAgent, fetch as undiciFetch } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import type { LiveReplica } from '../src/inference/replica-source.js';
import { defaultControlPlaneConfig } from '../src/config.js';
import { SseParser } from '../src/inference/sse.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../../test/support/openai-upstream.js';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

let cp: TestControlPlane;
let key: string;
let upstreams: OpenAiUpstream[] = [];
let live: LiveReplica[] = [];
const desired = new Map<string, number>();
let started = 0;

const replicaOf = (up: OpenAiUpstream, model: string, pool: 'na' | 'eu' = 'na'): LiveReplica => ({
  id: `rep_${up.name}`,
  model,
  quantization: model === 'nomic-embed-text-v1.5' ? 'fp16' : 'int4',
  pool,
  nodeId: 'node_1',
  baseUrl: up.baseUrl,
  engine: 'vllm',
  image: 'vllm/vllm-openai:test',
  apiKey: keyOf(up),
});

const keyOf = (up: OpenAiUpstream): string => `replica-key-${up.name}`;

beforeAll(async () => {
  cp = await startControlPlane({
    clock: new ManualClock(Date.now()),
    config: { inferenceEjectMs: 60_000, inferenceClientStallMs: 1_000 },
    replicas: {
      directory: { ready: (f = {}) => live.filter((r) => f.model === undefined || r.model === f.model) },
      plan: { desired: (model, q, pool) => desired.get(`${model}:${q}:${pool}`) ?? 0 },
    },
  });
  key = await cp.key();
});
afterAll(() => cp.close());
afterEach(async () => {
  await Promise.all(upstreams.map((u) => u.close()));
  upstreams = [];
  live = [];
  desired.clear();
});

async function replicas(model: string, count: number, options: { dimension?: number; maxInputChars?: number } = {}): Promise<OpenAiUpstream[]> {
  const ups = await Promise.all(Array.from({ length: count }, () => {
    const name = `${model}-${started++}`;
    return startOpenAiUpstream({ name, apiKey: `replica-key-${name}`, ...options });
  }));
  upstreams.push(...ups);
  live.push(...ups.map((u) => replicaOf(u, model)));
  for (const r of live) desired.set(`${r.model}:${r.quantization}:${r.pool}`, live.filter((x) => x.model === r.model).length);
  return ups;
}

const chat = { model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'weather?' }] };
const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const post = (path: string, body: unknown, headers: Record<string, string> = {}) => cp.request('POST', path, { key, body, headers });

/**
 * The usage record of one request, once written (a cut stream records it when the relay ends).
 * This suite's clock stands still, so every record has one created_at and the list orders
 * them by id: the record is looked for in a page that holds all of the suite's.
 */
async function usageOf(requestId: string): Promise<any> {
  let record: any;
  await expect.poll(async () => {
    const page = (await cp.request('GET', '/v1/usage?limit=100', { key })).body.data as any[];
    record = page.find((r) => r.request_id === requestId);
    return record !== undefined;
  }, { timeout: 5000 }).toBe(true);
  return record;
}

/** A streamed chat the client reads until `seen` arrives, then abandons (closes the connection). */
async function streamCutAfter(seen: string): Promise<Response> {
  const aborter = new AbortController();
  const res = await fetch(`${cp.baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...chat, stream: true }),
    signal: aborter.signal,
  });
  const reader = res.body!.getReader();
  let text = '';
  while (!text.includes(seen)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended before "${seen}": ${text}`);
    text += new TextDecoder().decode(value);
  }
  aborter.abort();
  return res;
}

describe('relaying replicas', () => {
  it('answers with our pool and fingerprint, asks the replica for no extension fields, and records usage', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    const res = await post('/v1/chat/completions', { ...chat, quantization: 'int4', top_k: 5 });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ object: 'chat.completion', model: 'llama-3.1-8b-instruct', pool: 'na', choices: [{ message: { content: `Hello from ${up!.name}` }, finish_reason: 'stop' }], usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 } });
    expect(up!.requests[0]!.body).toEqual({ model: 'llama-3.1-8b-instruct', messages: chat.messages, temperature: 0.7, top_p: 1, top_k: 5 });
    const usage = (await cp.request('GET', '/v1/usage?limit=1', { key })).body.data[0];
    expect(usage).toMatchObject({ model: 'llama-3.1-8b-instruct', quantization: 'int4', pool: 'na', prompt_tokens: 5, completion_tokens: 3, sandbox: false });
    expect(usage.cost_usd).toBeCloseTo((5 * 0.1 + 3 * 0.1) / 1e6, 12);
  });

  it("fills in the spec's sampling defaults, so vLLM samples as the CPU engine does", async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    await post('/v1/chat/completions', chat);
    await post('/v1/chat/completions', { ...chat, top_p: 0.5 });
    await post('/v1/chat/completions', { ...chat, temperature: 0, top_k: 40, max_completion_tokens: 9 });
    expect(up!.requests.map((r) => r.body)).toEqual([
      { model: 'llama-3.1-8b-instruct', messages: chat.messages, temperature: 0.7, top_p: 1, top_k: 0 },
      { model: 'llama-3.1-8b-instruct', messages: chat.messages, temperature: 0.7, top_p: 0.5, top_k: 0 },
      { model: 'llama-3.1-8b-instruct', messages: chat.messages, temperature: 0, top_p: 1, top_k: 40, max_tokens: 9 },
    ]);
  });

  it('passes the rest of the chat surface to vLLM as sent, and never n or our extensions', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    const surface = {
      tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
      frequency_penalty: 0.4,
      presence_penalty: -0.3,
      seed: 1234,
      logprobs: true,
      top_logprobs: 2,
      logit_bias: { '128000': -100 },
      stop: ['\n\n'],
    };
    const res = await post('/v1/chat/completions', { ...chat, ...surface, n: 1, quantization: 'int4', user: 'u-1' });
    expect(res.status, res.text).toBe(200);
    expect(up!.requests[0]!.body).toEqual({ model: 'llama-3.1-8b-instruct', messages: chat.messages, temperature: 0.7, top_p: 1, top_k: 0, ...surface });
  });

  it("takes messages as OpenAI's clients send them: a developer message is a system one, an assistant message echoed back with refusal: null is plain", async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    const messages = [
      { role: 'developer', content: 'Answer briefly.' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'Hello.', refusal: null },
      { role: 'assistant', content: null, refusal: 'I cannot help with that.' },
      { role: 'user', content: 'weather?' },
    ];
    const res = await post('/v1/chat/completions', { ...chat, messages });
    expect(res.status, res.text).toBe(200);
    expect(up!.requests[0]!.body.messages).toEqual([
      { role: 'system', content: 'Answer briefly.' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'Hello.' },
      { role: 'assistant', content: 'I cannot help with that.' },
      { role: 'user', content: 'weather?' },
    ]);
    const misplaced = expectError(await post('/v1/chat/completions', { ...chat, messages: [{ role: 'user', content: 'x', refusal: null }] }), 400, 'invalid_request');
    expect(misplaced.param).toBe('messages[0].refusal');
  });

  it("takes back an answer's message as OpenAI and the official SDK's helpers hand it out, and answers with the fields OpenAI's messages carry", async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    const answer = await post('/v1/chat/completions', { ...chat, tools });
    expect(answer.status, answer.text).toBe(200);
    const message = answer.body.choices[0].message;
    expect(message).toMatchObject({ role: 'assistant', content: null, refusal: null, annotations: [] });
    // What `finalChatCompletion()` or `.parse()` add before a client pushes the message back.
    const echoed = {
      ...message,
      audio: null,
      function_call: null,
      parsed: null,
      tool_calls: message.tool_calls.map((c: { function: object }) => ({ ...c, function: { ...c.function, parsed_arguments: { city: 'Oslo' } } })),
    };
    const toolAnswer = { role: 'tool', tool_call_id: message.tool_calls[0].id, content: '{"celsius":3}' };
    const res = await post('/v1/chat/completions', { ...chat, tools, messages: [...chat.messages, echoed, toolAnswer] });
    expect(res.status, res.text).toBe(200);
    expect(up!.requests[1]!.body.messages[1]).toEqual({ role: 'assistant', content: null, tool_calls: [{ id: message.tool_calls[0].id, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] });
  });

  it('takes a null for an optional field as the field left out, as OpenAI does (clients that write out every field)', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    const nulls = { temperature: null, top_p: null, max_tokens: null, max_completion_tokens: null, n: null, stop: null, seed: null, frequency_penalty: null, presence_penalty: null, logprobs: null, top_logprobs: null, logit_bias: null, stream: null, stream_options: null, response_format: null, user: null, tool_choice: null, tools: null, parallel_tool_calls: null };
    const res = await post('/v1/chat/completions', { ...chat, ...nulls });
    expect(res.status, res.text).toBe(200);
    expect(up!.requests[0]!.body).toEqual({ model: 'llama-3.1-8b-instruct', messages: chat.messages, temperature: 0.7, top_p: 1, top_k: 0 });
    const [embedder] = await replicas('nomic-embed-text-v1.5', 1, { dimension: 768 });
    const embedded = await post('/v1/embeddings', { model: 'nomic-embed-text-v1.5', input: 'x', dimensions: null, encoding_format: null, user: null });
    expect(embedded.status, embedded.text).toBe(200);
    expect(embedded.body.data[0].embedding).toHaveLength(768);
    expect(embedder!.requests).toHaveLength(1);
  });

  it("takes OpenAI's fields it does not serve at the neutral values SDKs send, and refuses any other by name", async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    const neutral = { store: false, metadata: {}, service_tier: 'auto', modalities: ['text'], verbosity: 'medium' };
    const res = await post('/v1/chat/completions', { ...chat, ...neutral, stream: true, stream_options: { include_usage: true, include_obfuscation: false } });
    expect(res.status, res.text).toBe(200);
    expect(Object.keys(up!.requests[0]!.body)).not.toEqual(expect.arrayContaining(['store']));
    for (const [field, value] of [['store', true], ['reasoning_effort', 'low'], ['service_tier', 'flex'], ['modalities', ['text', 'audio']], ['metadata', { a: 'b' }]] as const) {
      const refused = expectError(await post('/v1/chat/completions', { ...chat, [field]: value }), 400, 'invalid_request');
      expect(refused.param).toBe(field);
      expect(refused.message).toMatch(new RegExp(`^${field} is not supported: `));
    }
  });

  it("refuses what OpenAI takes but the models here cannot, saying why: image parts, token-id inputs", async () => {
    await replicas('llama-3.1-8b-instruct', 1);
    await replicas('nomic-embed-text-v1.5', 1, { dimension: 768 });
    const image = expectError(
      await post('/v1/chat/completions', { ...chat, messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: 'https://x/y.png' } }] }] }),
      400,
      'invalid_request',
    );
    expect(image).toMatchObject({ param: 'messages[0].content[1].type', message: 'content part type image_url is not supported: the models here read text only' });
    for (const input of [[1, 2, 3], [[1, 2], [3]]]) {
      const tokens = expectError(await post('/v1/embeddings', { model: 'nomic-embed-text-v1.5', input }), 400, 'invalid_request');
      expect(tokens).toMatchObject({ param: 'input', message: expect.stringMatching(/^input as token ids is not supported/) });
    }
  });

  it('relays log probabilities, whole and streamed', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    const whole = await post('/v1/chat/completions', { ...chat, logprobs: true, top_logprobs: 2 });
    const content = whole.body.choices[0].logprobs.content;
    expect(content.map((t: any) => t.token).join('')).toBe(`Hello from ${up!.name}`);
    expect(content[0]).toEqual({ token: 'Hello', logprob: -0.25, bytes: [...Buffer.from('Hello')], top_logprobs: [{ token: 'Hello', logprob: -0.25, bytes: [...Buffer.from('Hello')] }, { token: 'Hello1', logprob: -1.25, bytes: [...Buffer.from('Hello1')] }] });
    const plain = await post('/v1/chat/completions', chat);
    expect(plain.body.choices[0].logprobs).toBeNull();
    const streamed = await post('/v1/chat/completions', { ...chat, stream: true, logprobs: true });
    const chunks = new SseParser().push(streamed.text).filter((d) => d !== '[DONE]').map((d) => JSON.parse(d));
    const tokens = chunks.flatMap((c) => c.choices.flatMap((ch: any) => ch.logprobs?.content ?? []));
    expect(tokens.map((t: any) => t.token).join('')).toBe(`Hello from ${up!.name}`);
  });

  it('relays tool calls from an engine that makes them, whole and streamed', async () => {
    await replicas('llama-3.1-8b-instruct', 1);
    const whole = await post('/v1/chat/completions', { ...chat, tools });
    expect(whole.body.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: null, tool_calls: [{ id: 'call_up1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] } });
    const streamed = await post('/v1/chat/completions', { ...chat, tools, stream: true });
    const chunks = new SseParser().push(streamed.text).filter((d) => d !== '[DONE]').map((d) => JSON.parse(d));
    const calls = chunks.flatMap((c) => c.choices.flatMap((ch: any) => ch.delta.tool_calls ?? []));
    expect(calls).toEqual([{ index: 0, id: 'call_up1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }]);
    expect(chunks.at(-1).choices[0].finish_reason).toBe('tool_calls');
  });

  it('always asks the replica for usage on every chunk, and strips it when the client did not ask', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    const res = await post('/v1/chat/completions', { ...chat, stream: true });
    expect(up!.requests[0]!.body.stream_options).toEqual({ include_usage: true, continuous_usage_stats: true });
    const events = new SseParser().push(res.text);
    expect(events.at(-1)).toBe('[DONE]');
    for (const e of events.slice(0, -1)) expect(JSON.parse(e)).not.toHaveProperty('usage');
    // This request's record (the suite's clock stands still: the newest by time is any of them).
    const usage = await usageOf(res.headers.get('x-request-id')!);
    expect(usage.completion_tokens).toBe(3);
  });

  it('passes on usage as OpenAI does: null on every chunk but the last, which has it, for a client that asked', async () => {
    await replicas('llama-3.1-8b-instruct', 1);
    const res = await post('/v1/chat/completions', { ...chat, stream: true, stream_options: { include_usage: true } });
    const chunks = new SseParser().push(res.text).filter((d) => d !== '[DONE]').map((d) => JSON.parse(d));
    expect(chunks.slice(0, -1).map((c) => c.usage)).toEqual(chunks.slice(0, -1).map(() => null));
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 } });
  });

  it("sends each replica its own key; a replica that refuses ours is the replica's failure, never the client's", async () => {
    const [a, b] = await replicas('llama-3.1-8b-instruct', 2);
    // a's port now answers to another key (say, a different replica took it over).
    live = live.map((r) => (r.id === `rep_${a!.name}` ? { ...r, apiKey: 'a-stale-key' } : r));
    for (let i = 0; i < 3; i++) {
      const res = await post('/v1/chat/completions', chat);
      expect(res.status, res.text).toBe(200);
      expect(res.body.choices[0].message.content).toBe(`Hello from ${b!.name}`);
    }
    expect(a!.refused).toBe(1);
    expect(b!.refused).toBe(0);
    expect(cp.app.services.inference.router.isEjected(`rep_${a!.name}`)).toBe(true);
  });

  it('retries a replica that fails on another one, ejects it, and keeps routing around it', async () => {
    const [a, b] = await replicas('llama-3.1-8b-instruct', 2);
    a!.mode = 'fail';
    a!.healthy = false; // its engine died: the probe a failure triggers fails too
    for (let i = 0; i < 4; i++) {
      const res = await post('/v1/chat/completions', chat);
      expect(res.status, res.text).toBe(200);
      expect(res.body.choices[0].message.content).toBe(`Hello from ${b!.name}`);
    }
    expect(a!.requests.length).toBe(1);
    expect(cp.app.services.inference.router.isEjected(`rep_${a!.name}`)).toBe(true);
  });

  it('a request that makes every engine fail does not take the replicas out of service for other tenants', async () => {
    const [a, b] = await replicas('llama-3.1-8b-instruct', 2);
    const poison = { ...chat, messages: [{ role: 'user', content: 'poison' }] };
    a!.failOn = 'poison';
    b!.failOn = 'poison';
    const router = cp.app.services.inference.router;
    for (let i = 0; i < 5; i++) {
      expectError(await post('/v1/chat/completions', poison), 503, 'pool_degraded');
      expectError(await post('/v1/chat/completions', { ...poison, stream: true }), 503, 'pool_degraded');
    }
    // Each failure had the replica probed: it answers healthy, so it stays in service.
    await expect.poll(() => a!.requests.length + b!.requests.length).toBe(20);
    await new Promise((r) => setTimeout(r, 100));
    expect([router.isEjected(`rep_${a!.name}`), router.isEjected(`rep_${b!.name}`)]).toEqual([false, false]);
    const other = await cp.app.services.orgs.create('poison-bystander');
    const otherKey = await cp.key({ orgId: other.id });
    const served = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const res = await cp.request('POST', '/v1/chat/completions', { key: otherKey, body: chat });
      expect(res.status, res.text).toBe(200);
      served.add(res.body.choices[0].message.content);
    }
    expect(served).toEqual(new Set([`Hello from ${a!.name}`, `Hello from ${b!.name}`]));

    // A replica that fails the requests of two organizations is ejected, healthy or not.
    a!.failOn = 'weather';
    b!.failOn = undefined;
    const failedOn = () => a!.requests.length;
    const before = failedOn();
    for (let i = 0; i < 6 && !router.isEjected(`rep_${a!.name}`); i++) {
      for (const k of [key, otherKey]) expect((await cp.request('POST', '/v1/chat/completions', { key: k, body: chat })).status).toBe(200);
    }
    expect(router.isEjected(`rep_${a!.name}`)).toBe(true);
    expect(failedOn() - before).toBeGreaterThanOrEqual(2);
  });

  it('pinned to a pool whose only replica failed: 503 pool_degraded; when none is left anywhere: 409', async () => {
    const [a] = await replicas('llama-3.1-8b-instruct', 1);
    a!.mode = 'fail';
    a!.healthy = false;
    expect(expectError(await post('/v1/chat/completions', chat), 503, 'pool_degraded').message).toContain('failed');
    await expect.poll(() => cp.app.services.inference.router.isEjected(`rep_${a!.name}`)).toBe(true);
    expectError(await post('/v1/chat/completions', chat), 409, 'no_capacity');
    const error = expectError(await post('/v1/chat/completions', chat, { 'x-service-pool': 'na' }), 503, 'pool_degraded');
    expect(error.message).toContain('pool na');
  });

  it('a client that goes away mid-stream cancels the replica request', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    up!.mode = 'hang-stream';
    await streamCutAfter('chat.completion.chunk');
    await expect.poll(() => up!.abandonedStreams, { timeout: 5000 }).toBe(1);
    await expect.poll(() => cp.app.services.inference.router.inFlight(`rep_${up!.name}`), { timeout: 5000 }).toBe(0);
  });

  it("ends a stream whose client stopped reading, so the replica's slot is not held: its work is cancelled and what it generated billed", async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    // An engine that generates only as fast as it is read (the CPU engine waits on its reader).
    up!.mode = 'flood-stream';
    const requestId = `req_stall_${randomUUID()}`;
    const body = JSON.stringify({ ...chat, stream: true });
    const socket = connect(Number(new URL(cp.baseUrl).port), '127.0.0.1');
    // Connected, the request sent, and then never a byte read.
    socket.pause();
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: cp\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
        `X-Request-Id: ${requestId}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    try {
      await expect.poll(() => up!.abandonedStreams, { timeout: 20_000, interval: 100 }).toBe(1);
      await expect.poll(() => cp.app.services.inference.router.inFlight(`rep_${up!.name}`), { timeout: 5000 }).toBe(0);
      const record = await usageOf(requestId);
      expect(record.completion_tokens).toBeGreaterThan(0);
    } finally {
      socket.destroy();
    }
  });

  it('a whole completion whose client goes away runs to its end on the replica, is billed once and replayed to its retry', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    up!.mode = 'held';
    const usageIds = async () => ((await cp.request('GET', '/v1/usage?limit=100', { key })).body.data as Array<{ id: string }>).map((r) => r.id);
    const before = new Set(await usageIds());
    const aborter = new AbortController();
    const idempotencyKey = randomUUID();
    const gone = fetch(`${cp.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-service-idempotency-key': idempotencyKey },
      body: JSON.stringify(chat),
      signal: aborter.signal,
    }).catch((err: Error) => err);
    await expect.poll(() => up!.requests.length, { timeout: 5000 }).toBe(1);
    aborter.abort();
    expect(await gone).toMatchObject({ name: 'AbortError' });
    // The client's retry waits for the first run and gets its answer; nothing runs twice.
    const retrying = post('/v1/chat/completions', chat, { 'x-service-idempotency-key': idempotencyKey });
    await new Promise((r) => setTimeout(r, 100)); // most likely finds the claim held; either way it must replay
    up!.release();
    const retry = await retrying;
    expect(retry.status, retry.text).toBe(200);
    expect(retry.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(retry.body.choices[0].message.content).toBe(`Hello from ${up!.name}`);
    expect(up!.requests).toHaveLength(1);
    // The replica answered in full (its connection was not cut), and the answer was billed once.
    let billed: any[] = [];
    await expect.poll(async () => {
      const page = (await cp.request('GET', '/v1/usage?limit=100', { key })).body.data as any[];
      billed = page.filter((r) => !before.has(r.id));
      return billed.length;
    }, { timeout: 5000 }).toBe(1);
    expect(billed[0]).toMatchObject({ model: 'llama-3.1-8b-instruct', prompt_tokens: 5, completion_tokens: 3 });
    expect(billed[0].cost_usd).toBeGreaterThan(0);
    expect(up!.abandonedStreams).toBe(0);
    expect(cp.app.services.inference.router.inFlight(`rep_${up!.name}`)).toBe(0);
  });

  it('one org\'s long streams take at most half a model\'s slots: past that 429 rate_limited, while another org is served', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    up!.mode = 'hang-stream'; // each stream holds its slot until its client leaves
    const defaults = defaultControlPlaneConfig({ dataDir: '.' }); // this suite's control plane runs with them
    const slots = defaults.inferenceMaxInFlight;
    const share = slots * defaults.inferenceMaxOrgShare;
    const clients = new UndiciAgent();
    const open = async (orgKey: string) => {
      const aborter = new AbortController();
      // Their own connections (closed below): an aborted fetch may leave its socket open, and
      // the control plane's close would wait for it.
      const res = await undiciFetch(`${cp.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${orgKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ...chat, stream: true }),
        signal: aborter.signal,
        dispatcher: clients,
      });
      return { res, leave: () => aborter.abort() };
    };
    const held = await Promise.all(Array.from({ length: share }, () => open(key)));
    try {
      expect(held.map((h) => h.res.status)).toEqual(Array.from({ length: share }, () => 200));
      const refused = await open(key);
      expect(refused.res.status).toBe(429);
      expect(refused.res.headers.get('retry-after')).toBe('1');
      expect(((await refused.res.json()) as { error: unknown }).error).toMatchObject({
        type: 'rate_limited',
        message: `your organization holds ${share} of the ${slots} requests in flight llama-3.1-8b-instruct (int4) in pool na can take, its share while the rest is kept for others; retry when one of yours finishes`,
      });
      // Another tenant is served at once, from the slots the first could not take.
      const other = await cp.app.services.orgs.create('fair-share-co');
      const otherKey = await cp.key({ orgId: other.id });
      const served = await open(otherKey);
      expect(served.res.status).toBe(200);
      served.leave();
      // One of the first org's streams ends: it may start another.
      held.pop()!.leave();
      await expect.poll(() => cp.app.services.inference.router.inFlight(`rep_${up!.name}`), { timeout: 5000 }).toBe(share - 1);
      const again = await open(key);
      expect(again.res.status).toBe(200);
      held.push(again);
    } finally {
      for (const h of held) h.leave();
      await clients.destroy();
    }
    await expect.poll(() => cp.app.services.inference.router.inFlight(`rep_${up!.name}`), { timeout: 5000 }).toBe(0);
  });

  it('a stream the client cuts after its first content chunk is billed the prompt the replica processed', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    const full = await post('/v1/chat/completions', { ...chat, stream: true });
    const fullUsage = await usageOf(full.headers.get('x-request-id')!);
    up!.mode = 'hang-stream';
    const res = await streamCutAfter('Hello');
    const cut = await usageOf(res.headers.get('x-request-id')!);
    expect(cut.prompt_tokens).toBeGreaterThan(0);
    expect(cut.prompt_tokens).toBe(fullUsage.prompt_tokens);
    expect(cut.completion_tokens).toBe(1);
    expect(cut.cost_usd).toBeGreaterThan(0);
  });

  it('a stream the client leaves during its prefill is billed its prompt: the replica runs on until it reports it, then is cancelled', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    up!.prefillMs = 1_000;
    try {
      const requestId = `prefill-${randomUUID()}`;
      const aborter = new AbortController();
      const leaving = fetch(`${cp.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': requestId },
        body: JSON.stringify({ ...chat, stream: true }),
        signal: aborter.signal,
      }).catch((err: Error) => err);
      // The replica has the prompt; the client leaves before its first chunk.
      await expect.poll(() => up!.requests.length, { timeout: 5000 }).toBe(1);
      aborter.abort();
      expect(await leaving).toMatchObject({ name: 'AbortError' });
      const billed = await usageOf(requestId);
      expect(billed).toMatchObject({ prompt_tokens: 5, completion_tokens: 0 });
      expect(billed.cost_usd).toBeGreaterThan(0);
      expect(up!.cancelledInPrefill).toBe(0);
      await expect.poll(() => cp.app.services.inference.router.inFlight(`rep_${up!.name}`), { timeout: 5000 }).toBe(0);
    } finally {
      up!.prefillMs = 0;
    }
  });

  it("passes on an engine's usage-only progress chunks as one usage chunk at the end (for a client that asked), and bills a stream cut meanwhile by them", async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    up!.mode = 'progress-stream';
    const res = await post('/v1/chat/completions', { ...chat, stream: true, stream_options: { include_usage: true } });
    expect(res.status).toBe(200);
    const events = new SseParser().push(res.text);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    const usageOnly = chunks.filter((c) => c.choices.length === 0);
    expect(usageOnly).toHaveLength(1);
    expect(chunks.at(-1)).toBe(usageOnly[0]);
    expect(usageOnly[0].usage).toEqual({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
    const plain = await post('/v1/chat/completions', { ...chat, stream: true });
    expect(new SseParser().push(plain.text).slice(0, -1).map((e) => JSON.parse(e)).filter((c) => c.choices.length === 0)).toEqual([]);

    up!.mode = 'progress-hang';
    const cut = await streamCutAfter('"role":"assistant"');
    const billed = await usageOf(cut.headers.get('x-request-id')!);
    expect(billed).toMatchObject({ prompt_tokens: 5, completion_tokens: 48 });
  });

  it('a stream the engine refuses after its 200 (vLLM checks some of a request only then) tells the client why, and keeps the replica in service', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    up!.mode = 'refuse-in-stream';
    for (let i = 0; i < 3; i++) {
      const res = await post('/v1/chat/completions', { ...chat, stream: true, logit_bias: { '999999999': 1 } });
      expect(res.status).toBe(200);
      const events = new SseParser().push(res.text);
      expect(JSON.parse(events.at(-1)!)).toEqual({
        error: { type: 'invalid_request', message: 'the model server refused the request: token_id(s) [999999999] in logit_bias contain out-of-vocab token ids' },
      });
    }
    expect(cp.app.services.inference.router.isEjected(`rep_${up!.name}`)).toBe(false);
    up!.mode = 'ok';
    expect((await post('/v1/chat/completions', chat)).status).toBe(200);
  });

  it('a stream the replica breaks off is reported in the stream and billed the prompt it processed', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    up!.mode = 'break-stream';
    const res = await post('/v1/chat/completions', { ...chat, stream: true });
    expect(res.status).toBe(200);
    const events = new SseParser().push(res.text);
    expect(JSON.parse(events.at(-1)!)).toMatchObject({ error: { type: 'pool_degraded' } });
    const billed = await usageOf(res.headers.get('x-request-id')!);
    expect(billed).toMatchObject({ prompt_tokens: 5, completion_tokens: 1 });
  });

  it('splits large embedding requests into batches of 64 over the replicas, answering in input order', async () => {
    const ups = await replicas('nomic-embed-text-v1.5', 2, { dimension: 768 });
    const input = Array.from({ length: 130 }, (_, i) => 'x'.repeat(i + 1));
    const res = await post('/v1/embeddings', { model: 'nomic-embed-text-v1.5', input });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.map((d: any) => d.index)).toEqual(input.map((_, i) => i));
    res.body.data.forEach((d: any, i: number) => expect(d.embedding.indexOf(1)).toBe((i + 1) % 768));
    const sizes = ups.flatMap((u) => u.requests.map((r) => r.body.input.length)).sort((x, y) => x - y);
    expect(sizes).toEqual([2, 64, 64]);
    expect(ups.every((u) => u.requests.length > 0)).toBe(true);
    expect(res.body.usage.prompt_tokens).toBe(input.reduce((n, t) => n + t.length, 0));
  });

  it("names an input the replica refuses by its place in the client's list, not in the batch", async () => {
    await replicas('nomic-embed-text-v1.5', 2, { dimension: 768, maxInputChars: 50 });
    const input = Array.from({ length: 100 }, (_, i) => (i === 70 ? 'x'.repeat(51) : `input ${i}`));
    const error = expectError(await post('/v1/embeddings', { model: 'nomic-embed-text-v1.5', input }), 400, 'invalid_request');
    expect(error.param).toBe('input[70]');
    expect(error.message).toContain('input[70]');
  });

  it('bills the batches the replicas embedded when another batch of the request is refused, and starts no batch after the refusal', async () => {
    const [a, b] = await replicas('nomic-embed-text-v1.5', 2, { dimension: 768, maxInputChars: 50 });
    // 16 batches of 64; the refused input is in the second.
    const input = Array.from({ length: 16 * 64 }, (_, i) => (i === 100 ? 'x'.repeat(51) : `input ${i}`));
    const res = await post('/v1/embeddings', { model: 'nomic-embed-text-v1.5', input });
    expect(expectError(res, 400, 'invalid_request').param).toBe('input[100]');
    const sent = [...a!.requests, ...b!.requests].filter((r) => r.path === '/v1/embeddings');
    expect(sent.length).toBeLessThan(16);
    // The stand-in counts a token per character of each input it embedded.
    const embedded = sent.filter((r) => !(r.body.input as string[]).some((t) => t.length > 50));
    const tokens = embedded.reduce((n, r) => n + (r.body.input as string[]).reduce((m, t) => m + t.length, 0), 0);
    expect(tokens).toBeGreaterThan(0);
    const billed = await usageOf(res.headers.get('x-request-id')!);
    expect(billed).toMatchObject({ kind: 'embeddings', prompt_tokens: tokens });
    expect(billed.cost_usd).toBeGreaterThan(0);
  });
});

describe('the official openai SDK', () => {
  const client = () => new OpenAI({ apiKey: key, baseURL: `${cp.baseUrl}/v1`, maxRetries: 0 });
  const messages = [{ role: 'user' as const, content: 'weather in Oslo?' }];
  const sdkTools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];

  it('sends the chat surface through the control plane to the engine, and reads tool calls and logprobs back', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    const params = {
      tool_choice: 'required' as const,
      parallel_tool_calls: false,
      frequency_penalty: 0.2,
      presence_penalty: 0.1,
      seed: 42,
      logit_bias: { '100': -50 },
    };
    const called = await client().chat.completions.create({ model: 'llama-3.1-8b-instruct', messages, tools: sdkTools, max_completion_tokens: 64, n: 1, ...params });
    expect(called.choices[0]!.message.tool_calls).toEqual([{ id: 'call_up1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }]);
    expect(up!.requests[0]!.body).toEqual({ model: 'llama-3.1-8b-instruct', messages, tools: sdkTools, max_tokens: 64, temperature: 0.7, top_p: 1, top_k: 0, ...params });

    const text = await client().chat.completions.create({ model: 'llama-3.1-8b-instruct', messages, logprobs: true, top_logprobs: 1, temperature: 0 });
    expect(text.choices[0]!.logprobs!.content!.map((t) => t.token).join('')).toBe(text.choices[0]!.message.content);
    expect(up!.requests[1]!.body).toMatchObject({ logprobs: true, top_logprobs: 1, temperature: 0, top_p: 1, top_k: 0 });
  });

  it('streams with stream_options.include_usage and logprobs, as the SDK reads them', async () => {
    const [up] = await replicas('llama-3.1-8b-instruct', 1);
    const stream = await client().chat.completions.create({ model: 'llama-3.1-8b-instruct', messages, stream: true, stream_options: { include_usage: true }, logprobs: true, seed: 9 });
    let content = '';
    const tokens: string[] = [];
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta.content ?? '';
      tokens.push(...(chunk.choices[0]?.logprobs?.content ?? []).map((t) => t.token));
      usage = chunk.usage ?? usage;
    }
    expect(content).toBe(`Hello from ${up!.name}`);
    expect(tokens.join('')).toBe(content);
    expect(usage).toEqual({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
    expect(up!.requests[0]!.body).toMatchObject({ seed: 9, logprobs: true, stream: true, temperature: 0.7 });
  });

  it('gets a 400 naming the field for what the model cannot do, as a BadRequestError', async () => {
    const refused = client().chat.completions.create({ model: 'tiny-chat', messages, logprobs: true });
    await expect(refused).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    await expect(refused).rejects.toMatchObject({ status: 400, param: 'logprobs' });
    await expect(client().chat.completions.create({ model: 'llama-3.1-8b-instruct', messages, n: 3 })).rejects.toMatchObject({ status: 400, param: 'n' });
  });

  it("gets OpenAI's error codes where client libraries branch on them", async () => {
    const wrongKey = new OpenAI({ apiKey: 'svc_sk_live_notakey', baseURL: `${cp.baseUrl}/v1`, maxRetries: 0 });
    await expect(wrongKey.models.list()).rejects.toMatchObject({ status: 401, code: 'invalid_api_key' });
    await expect(client().chat.completions.create({ model: 'no-such-model', messages })).rejects.toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
    // LangChain raises its ContextOverflowError on this code.
    await expect(client().chat.completions.create({ model: 'llama-3.1-8b-instruct', messages, max_tokens: 200_000 })).rejects.toMatchObject({ status: 400, code: 'context_length_exceeded', param: 'max_tokens' });
  });
});
