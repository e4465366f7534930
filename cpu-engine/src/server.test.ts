// The engine's HTTP server over real HTTP with a scripted Engine in place of llama.cpp:
// what a caller without the replica's key gets (401 everywhere but /health), and usage on
// every chunk with continuous_usage_stats.
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine } from './engine.js';
import { createEngineServer, MAX_CHARS_PER_TOKEN, type EngineServer } from './server.js';
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

  it('while output is held back (a forced tool call), reports usage in usage-only chunks, so a stream cut meanwhile is billed what was generated', async () => {
    // A call of 40 tokens, one character each, all held back until it is complete.
    const text = '{"name":"f","arguments":{"q":"' + 'x'.repeat(40 - 33) + '"}}';
    const held: Engine = {
      ...scripted,
      async generate(_prompt, _options, onText, _signal, onToken) {
        for (const [i, piece] of [...text].entries()) {
          await onToken?.(i + 1);
          await onText(piece, i + 1);
        }
        return { finishReason: 'stop', completionTokens: text.length };
      },
    };
    const other = createEngineServer({ config: { servedModelName: 'tiny-chat', task: 'generate', apiKey: KEY }, log: () => undefined });
    other.ready(held);
    await new Promise<void>((resolve) => other.server.listen(0, '127.0.0.1', resolve));
    try {
      const res = await fetch(`http://127.0.0.1:${(other.server.address() as AddressInfo).port}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          ...chat,
          stream: true,
          stream_options: { include_usage: true, continuous_usage_stats: true },
          tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }],
          tool_choice: 'required',
        }),
      });
      const chunks = parseSseData(await res.text()).slice(0, -1).map((e) => JSON.parse(e));
      const progress = chunks.filter((c) => c.choices.length === 0).map((c) => c.usage.completion_tokens);
      expect(text.length).toBe(40);
      // Two while the call was held back (16, 32), then the final usage chunk (40).
      expect(progress).toEqual([16, 32, 40]);
      expect(chunks.find((c) => c.choices[0]?.delta.tool_calls)?.choices[0].delta.tool_calls[0].function.name).toBe('f');
    } finally {
      await other.shutdown(0);
    }
  });

  it('without it, only the final chunk carries usage', async () => {
    const chunks = await stream({ include_usage: true });
    expect(chunks.map((c) => 'usage' in c)).toEqual([false, false, false, false, false, true]);
  });
});

describe('input longer than the context could hold', () => {
  it('is refused by its length in characters, before the chat template renders it or the tokenizer reads it', async () => {
    let tokenized = 0;
    const counting: Engine = {
      ...scripted,
      chatPrompt: () => { tokenized++; return { tokens: [1, 2, 3, 4] }; },
      embeddingTokens: () => { tokenized++; return 1; },
    };
    for (const task of ['generate', 'embed'] as const) {
      const other = createEngineServer({ config: { servedModelName: 'tiny-chat', task, apiKey: KEY }, log: () => undefined });
      other.ready(counting);
      await new Promise<void>((resolve) => other.server.listen(0, '127.0.0.1', resolve));
      try {
        const long = 'x'.repeat(scripted.contextSize * MAX_CHARS_PER_TOKEN + 1);
        const [path, body, param] = task === 'generate'
          ? ['/v1/chat/completions', { ...chat, messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: long }] }, 'messages']
          : ['/v1/embeddings', { model: 'tiny-chat', input: ['short', long] }, 'input[1]'];
        const res = await fetch(`http://127.0.0.1:${(other.server.address() as AddressInfo).port}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        expect(res.status).toBe(400);
        expect(await res.json()).toEqual({ error: { type: 'invalid_request', code: 'context_length_exceeded', param, message: expect.stringContaining('characters') } });
      } finally {
        await other.shutdown(0);
      }
    }
    expect(tokenized).toBe(0);
  });
});
