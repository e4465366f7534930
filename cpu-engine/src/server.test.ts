// The engine's HTTP server over real HTTP with a scripted Engine in place of llama.cpp:
// what a caller without the replica's key gets (401 everywhere but /health), and usage on
// every chunk with continuous_usage_stats.
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine } from './engine.js';
import { createEngineServer, type EngineServer } from './server.js';
import { parseSseData } from './sse.js';

const KEY = 'rk_0123456789abcdef0123456789abcdef';
const PIECES = ['d', 'e', 'f'];

/** A model whose prompt is 4 tokens and whose completion is d, e, f (one token each). */
const scripted: Engine = {
  contextSize: 64,
  chatPrompt: () => ({ tokens: [1, 2, 3, 4] }),
  prepare: async () => undefined,
  async generate(_prompt, _options, onText) {
    for (const [i, piece] of PIECES.entries()) await onText(piece, i + 1);
    return { finishReason: 'stop', completionTokens: PIECES.length };
  },
  embeddingTokens: () => 1,
  embed: async () => [],
  dispose: async () => undefined,
};

let api: EngineServer;
let base: string;

beforeAll(async () => {
  api = createEngineServer({ config: { servedModelName: 'tiny-chat', task: 'generate', apiKey: KEY }, log: () => undefined });
  api.ready(scripted);
  await new Promise<void>((resolve) => api.server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
});
afterAll(() => api.shutdown(0));

const chat = { model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }] };
const call = (method: string, path: string, authorization?: string, body?: unknown) =>
  fetch(base + path, {
    method,
    headers: { ...(authorization ? { authorization } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });

describe('with an API key', () => {
  it.each([
    ['GET /v1/models', 'GET', '/v1/models', undefined],
    ['POST /v1/chat/completions', 'POST', '/v1/chat/completions', chat],
    ['POST /v1/embeddings', 'POST', '/v1/embeddings', { model: 'tiny-chat', input: 'x' }],
    ['an unknown path', 'GET', '/metrics', undefined],
    ['a known path with a wrong method', 'DELETE', '/v1/models', undefined],
  ])('%s without the key: 401 in the error envelope, nothing about the model', async (_name, method, path, body) => {
    for (const authorization of [undefined, 'Bearer rk_wrong', KEY, `Basic ${KEY}`]) {
      const res = await call(method, path, authorization, body);
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      const text = await res.text();
      expect(JSON.parse(text)).toEqual({ error: { type: 'unauthorized', message: expect.stringContaining('API key') } });
      expect(text).not.toContain('tiny-chat');
    }
  });

  it('GET /health answers without the key and says only that it is up', async () => {
    const res = await call('GET', '/health');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('serves with the key', async () => {
    const res = await call('POST', '/v1/chat/completions', `Bearer ${KEY}`, chat);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ choices: [{ message: { content: 'def' } }], usage: { prompt_tokens: 4, completion_tokens: 3 } });
  });
});

describe('continuous_usage_stats', () => {
  const stream = async (streamOptions: Record<string, boolean>) => {
    const res = await call('POST', '/v1/chat/completions', `Bearer ${KEY}`, { ...chat, stream: true, stream_options: streamOptions });
    expect(res.status).toBe(200);
    const events = parseSseData(await res.text());
    expect(events.at(-1)).toBe('[DONE]');
    return events.slice(0, -1).map((e) => JSON.parse(e));
  };

  it('puts the usage so far on every chunk, then the final usage chunk', async () => {
    const chunks = await stream({ include_usage: true, continuous_usage_stats: true });
    expect(chunks.map((c) => [c.choices[0]?.delta.content ?? null, c.choices[0]?.finish_reason ?? null, c.usage])).toEqual([
      ['', null, { prompt_tokens: 4, completion_tokens: 0, total_tokens: 4 }],
      ['d', null, { prompt_tokens: 4, completion_tokens: 1, total_tokens: 5 }],
      ['e', null, { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 }],
      ['f', null, { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 }],
      [null, 'stop', { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 }],
      [null, null, { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 }],
    ]);
  });

  it('without it, only the final chunk carries usage', async () => {
    const chunks = await stream({ include_usage: true });
    expect(chunks.map((c) => 'usage' in c)).toEqual([false, false, false, false, false, true]);
  });
});
