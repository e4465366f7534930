// The engine over the real tiny-chat model (llama.cpp in this process) behind its HTTP
// server: schemas whose grammar would stall the context are refused before generation, the
// watchdog fails a request whose token runs past its bound and turns /health 503 until the
// evaluation returns but does not fail a batch of long prompts that is merely slow, and a
// stream still waiting for a slot has sent no usage.
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeTestModels } from '../models/write-test-models.js';
import type { EngineConfig } from './args.js';
import { LlamaEngine } from './llama-engine.js';
import { createEngineServer, type EngineServer } from './server.js';

const dir = mkdtempSync(join(tmpdir(), 'llama-engine-test-'));
writeTestModels(dir);

/** `depth` levels, each an anyOf of three arrays differing only in maxItems, chained by $ref: 3^depth parses. */
function nestedArrays(depth: number): Record<string, unknown> {
  const $defs: Record<string, unknown> = { l0: { type: 'string', maxLength: 4 } };
  for (let i = 1; i <= depth; i++) $defs[`l${i}`] = { anyOf: [2, 3, 4].map((maxItems) => ({ type: 'array', items: { $ref: `#/$defs/l${i - 1}` }, minItems: 1, maxItems })) };
  return { type: 'object', properties: { a: { $ref: `#/$defs/l${depth}` } }, required: ['a'], additionalProperties: false, $defs };
}

interface Running {
  engine: LlamaEngine;
  api: EngineServer;
  base: string;
}
const running: Running[] = [];

async function start(overrides: Partial<EngineConfig>): Promise<Running> {
  const config: EngineConfig = {
    model: join(dir, 'tiny-chat-q4_0.gguf'), servedModelName: 'tiny-chat', task: 'generate', host: '127.0.0.1', port: 0,
    threads: 1, ctxSize: undefined, parallel: 2, apiKey: undefined, tokenTimeoutMs: 5_000, maxGrammarAmbiguity: 64, ...overrides,
  };
  const engine = await LlamaEngine.load(config, () => undefined);
  const api = createEngineServer({ config, log: () => undefined });
  api.ready(engine);
  await new Promise<void>((resolve) => api.server.listen(0, '127.0.0.1', resolve));
  const r = { engine, api, base: `http://127.0.0.1:${(api.server.address() as AddressInfo).port}` };
  running.push(r);
  return r;
}

afterAll(async () => {
  for (const r of running) {
    await r.api.shutdown(0);
    await r.engine.dispose();
  }
  rmSync(dir, { recursive: true, force: true });
});

const plain = { model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], max_tokens: 5 };
const post = (base: string, body: unknown, signal?: AbortSignal) =>
  fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal });
const health = async (base: string) => {
  const res = await fetch(`${base}/health`);
  return { status: res.status, body: await res.json() };
};

describe('grammar ambiguity, checked again by the engine', () => {
  let e: Running;
  beforeAll(async () => { e = await start({}); });

  it('refuses the auditor\'s ten-level schema with a 400 naming the union, before generating, as response_format and as a forced call; the next request is served', async () => {
    const schema = nestedArrays(10);
    let res = await post(e.base, { ...plain, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: { type: 'invalid_request', param: 'response_format.json_schema.schema.$defs.l10.anyOf', message: expect.stringContaining('too ambiguous') } });
    res = await post(e.base, { ...plain, stream: true, tools: [{ type: 'function', function: { name: 'f', parameters: schema } }], tool_choice: 'required' });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe('tools[0].function.parameters.$defs.l10.anyOf');
    expect(await health(e.base)).toEqual({ status: 200, body: { status: 'ok' } });
    res = await post(e.base, plain);
    expect(await res.json()).toMatchObject({ choices: [{ message: { content: 'defgh' } }] });
  });
});

describe('the watchdog', () => {
  let e: Running;
  // A low bound, and the ambiguity check opened up, so that a real grammar is slow enough to trip it.
  beforeAll(async () => { e = await start({ tokenTimeoutMs: 50, maxGrammarAmbiguity: 1_000_000 }); });

  it('fails a request whose token runs past the bound, reports the engine stalled until the evaluation returns, then serves again', async () => {
    const res = await post(e.base, { ...plain, max_tokens: 30, temperature: 0, seed: 1, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: nestedArrays(8) } } });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: { type: 'invalid_request', message: expect.stringContaining('generation stalled') } });
    // The native evaluation cannot be interrupted: until it returns, routing must take the replica out.
    expect(await health(e.base)).toEqual({ status: 503, body: { status: 'stalled' } });
    while ((await health(e.base)).status !== 200) await new Promise((r) => setTimeout(r, 50));
    const next = await post(e.base, plain);
    expect(next.status).toBe(200);
    expect(await next.json()).toMatchObject({ choices: [{ message: { content: 'defgh' } }] });
  });
});

describe('the watchdog under a full batch', () => {
  // node-llama-cpp evaluates every sequence of the context in one batch: four prompts at once
  // each take about four times as long as one alone. The engine is busy, not stalled.
  const long = { ...plain, messages: [{ role: 'user', content: 'abcdefghij'.repeat(190) }], max_tokens: 3, temperature: 0 };
  let e: Running;
  beforeAll(async () => {
    // The bound: half of what one long prompt takes alone here, so that one prompt fits its
    // allowance (one bound plus one per 512 prompt tokens) with room to spare, and four
    // prompts, each timed against its own allowance, would not.
    const probe = await start({ parallel: 4 });
    let alone = Infinity;
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      expect((await post(probe.base, long)).status).toBe(200);
      alone = Math.min(alone, performance.now() - t0);
    }
    e = await start({ parallel: 4, tokenTimeoutMs: Math.max(20, Math.round(alone / 2)) });
  });

  it('serves four long prompts at once, and /health stays 200 meanwhile, though each takes about four times as long as one alone', async () => {
    expect((await post(e.base, long)).status).toBe(200);
    let busy = true;
    const healths: number[] = [];
    const polling = (async () => {
      while (busy) {
        healths.push((await health(e.base)).status);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const responses = await Promise.all(Array.from({ length: 4 }, async () => {
      const res = await post(e.base, long);
      return { status: res.status, body: await res.json() };
    }));
    busy = false;
    await polling;
    for (const r of responses) expect(r).toMatchObject({ status: 200, body: { choices: [{ finish_reason: 'length' }] } });
    expect(healths.length).toBeGreaterThan(0);
    expect(healths.every((s) => s === 200)).toBe(true);
    expect(e.engine.isStalled()).toBe(false);
  });
});

describe('a stream waiting for a slot', () => {
  let e: Running;
  beforeAll(async () => { e = await start({ parallel: 1 }); });

  it('sends no chunk, and so no prompt usage, before it holds a slot and its prompt is evaluated', async () => {
    // Hold the only slot: a generation whose first piece of text waits for the gate.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => { open = resolve; });
    const sampling = { maxTokens: 3, temperature: 0, topP: 1, topK: 0, seed: undefined, stop: [], frequencyPenalty: 0, presencePenalty: 0, logitBias: new Map(), constraint: { kind: 'none' } as const };
    const holding = e.engine.generate(e.engine.chatPrompt([{ role: 'user', content: 'abc' }]), sampling, () => gate, new AbortController().signal);

    const client = new AbortController();
    const res = await post(e.base, { ...plain, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } }, client.signal);
    expect(res.status).toBe(200);
    const received: string[] = [];
    const reading = (async () => {
      const decoder = new TextDecoder();
      try {
        for await (const bytes of res.body as AsyncIterable<Uint8Array>) received.push(decoder.decode(bytes));
      } catch { /* aborted */ }
    })();
    // Time for a chunk written before the slot to arrive (the old engine sent its role chunk, with the prompt's usage, at once).
    await new Promise((r) => setTimeout(r, 300));
    client.abort();
    await reading;
    expect(received.join('')).toBe('');
    open();
    expect(await holding).toEqual({ finishReason: 'length', completionTokens: 3 });

    // Served in turn: the role chunk, with the prompt tokens, comes first.
    const text = await (await post(e.base, { ...plain, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } })).text();
    expect(JSON.parse(text.split('\n\n')[0]!.slice('data: '.length))).toMatchObject({ choices: [{ delta: { role: 'assistant' } }], usage: { prompt_tokens: 4, completion_tokens: 0 } });
  });
});
