// Tokens per minute per key, next to requests per minute: OpenAI's token headers on the
// routes that spend model tokens, 429 in the usual envelope when a burst passes the cap,
// and the official `openai` SDK backing off on its own and then succeeding. Sandbox keys
// answer without a model server, so the count here is the control plane's alone.
import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '@svc/shared';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

const TOKENS_PER_MINUTE = 1_200;
let cp: TestControlPlane;

beforeAll(async () => {
  // A real clock: the SDK's back-off waits for the bucket to refill in real time.
  cp = await startControlPlane({ clock: systemClock, config: { tokenLimitTier2: TOKENS_PER_MINUTE, tokenLimitTier3: 10 * TOKENS_PER_MINUTE } });
});
afterAll(() => cp.close());

const chat = { model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 };

describe('tokens per minute', () => {
  it('puts the token headers on every token-spending answer, counting down', async () => {
    const key = await cp.key({ kind: 'test' });
    const first = await cp.request('POST', '/v1/chat/completions', { key, body: chat });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-limit-tokens')).toBe(String(TOKENS_PER_MINUTE));
    expect(first.headers.get('x-ratelimit-reset-tokens')).toMatch(/^\d+(\.\d+)?(ms|s)$|^\d+m\d+s$/);
    const remainingAfterFirst = Number(first.headers.get('x-ratelimit-remaining-tokens'));
    expect(remainingAfterFirst).toBeLessThan(TOKENS_PER_MINUTE);
    const second = await cp.request('POST', '/v1/chat/completions', { key, body: chat });
    expect(Number(second.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(remainingAfterFirst + 20);
    // Routes that spend no tokens carry only the request headers.
    const models = await cp.request('GET', '/v1/models', { key });
    expect(models.headers.get('x-ratelimit-limit-requests')).not.toBeNull();
    expect(models.headers.get('x-ratelimit-limit-tokens')).toBeNull();
  });

  it('answers a burst past the cap with 429, the token headers and a retry-after; the openai SDK backs off and succeeds', async () => {
    const key = await cp.key({ kind: 'test' });
    let limited;
    for (let i = 0; i < 200 && !limited; i++) {
      const res = await cp.request('POST', '/v1/chat/completions', { key, body: chat });
      if (res.status === 429) limited = res;
      else expect(res.status).toBe(200);
    }
    expect(limited, 'the burst never reached the token cap').toBeDefined();
    const error = expectError(limited!, 429, 'rate_limited');
    expect(error.message).toContain('tokens per minute');
    expect(limited!.headers.get('x-ratelimit-limit-tokens')).toBe(String(TOKENS_PER_MINUTE));
    expect(Number(limited!.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(60);
    expect(Number(limited!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(limited!.headers.get('retry-after-ms'))).toBeGreaterThan(0);

    const attempts: number[] = [];
    const client = new OpenAI({
      apiKey: key,
      baseURL: `${cp.baseUrl}/v1`,
      maxRetries: 5,
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        attempts.push(res.status);
        return res;
      },
    });
    const completion = await client.chat.completions.create({ ...chat, messages: [{ role: 'user', content: 'Say hello.' }] });
    expect(completion.choices[0]!.message.content).toBeTruthy();
    expect(attempts[0]).toBe(429);
    expect(attempts.at(-1)).toBe(200);
  });

  it('refuses a request that alone needs more than the cap, saying why', async () => {
    const key = await cp.key({ kind: 'test' });
    const res = await cp.request('POST', '/v1/chat/completions', { key, body: { ...chat, max_tokens: 5_000 } });
    const error = expectError(res, 429, 'rate_limited');
    expect(error.message).toMatch(/needs about \d+ tokens .* more than this key's limit of 1200/);
    // Nothing was taken: a normal request still goes through.
    expect((await cp.request('POST', '/v1/chat/completions', { key, body: chat })).status).toBe(200);
  });

  it('counts a prompt sent chunked (no Content-Length) as one sent whole: too large alone, refused either way', async () => {
    const key = await cp.key({ kind: 'test' });
    // About 2,500 tokens of prompt, twice this key's limit.
    const body = JSON.stringify({ ...chat, messages: [{ role: 'user', content: 'word '.repeat(2_000) }] });
    const send = (chunked: boolean) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const url = new URL('/v1/chat/completions', cp.baseUrl);
        const req = httpRequest(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...(chunked ? {} : { 'content-length': Buffer.byteLength(body) }) } }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        });
        req.on('error', reject);
        if (chunked) for (let i = 0; i < body.length; i += 1_000) req.write(body.slice(i, i + 1_000));
        else req.write(body);
        req.end();
      });
    for (const chunked of [false, true]) {
      const res = await send(chunked);
      expect({ chunked, status: res.status, type: JSON.parse(res.body).error?.type }).toEqual({ chunked, status: 429, type: 'rate_limited' });
    }
  });

  it('answers a body that is not valid with 400, not with the token limit its numbers would exceed; nothing stays taken', async () => {
    const key = await cp.key({ kind: 'test' });
    const { model: _model, ...noModel } = chat;
    const invalid = await cp.request('POST', '/v1/chat/completions', { key, body: { ...noModel, max_tokens: 5_000 } });
    expectError(invalid, 400, 'invalid_request');
    expect(invalid.headers.get('x-ratelimit-limit-requests')).not.toBeNull();
    expect(invalid.headers.get('x-ratelimit-limit-tokens')).toBeNull();
    // An invalid body whose estimate fits was admitted and given back when answered.
    expectError(await cp.request('POST', '/v1/chat/completions', { key, body: { ...noModel, max_tokens: 1_000 } }), 400, 'invalid_request');
    const next = await cp.request('POST', '/v1/chat/completions', { key, body: chat });
    expect(next.status).toBe(200);
    expect(Number(next.headers.get('x-ratelimit-remaining-tokens'))).toBeGreaterThan(TOKENS_PER_MINUTE - 100);
  });

  it('counts embeddings input too, per key', async () => {
    const key = await cp.key({ kind: 'test' });
    const big = { model: 'bge-m3', input: ['x'.repeat(4_000)] };
    expect((await cp.request('POST', '/v1/embeddings', { key, body: big })).status).toBe(200);
    expectError(await cp.request('POST', '/v1/embeddings', { key, body: big }), 429, 'rate_limited');
    // Another key of the same org has its own budget.
    expect((await cp.request('POST', '/v1/embeddings', { key: await cp.key({ kind: 'test' }), body: big })).status).toBe(200);
  });

  it('counts the Responses API like chat completions: its headers, and a request that alone needs more than the cap refused', async () => {
    const key = await cp.key({ kind: 'test' });
    const body = { model: 'llama-3.1-8b-instruct', input: 'Say hello.', max_output_tokens: 16 };
    const first = await cp.request('POST', '/v1/responses', { key, body });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-limit-tokens')).toBe(String(TOKENS_PER_MINUTE));
    expect(Number(first.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(TOKENS_PER_MINUTE);
    const error = expectError(await cp.request('POST', '/v1/responses', { key, body: { ...body, max_output_tokens: 5_000 } }), 429, 'rate_limited');
    expect(error.message).toMatch(/more than this key's limit of 1200/);
  });

  it('gives a tier 3 org the tier 3 cap', async () => {
    const org = await cp.app.services.orgs.create('tpm-tier-three', 3);
    const key = await cp.key({ kind: 'test', orgId: org.id });
    const res = await cp.request('POST', '/v1/chat/completions', { key, body: chat });
    expect(res.headers.get('x-ratelimit-limit-tokens')).toBe(String(10 * TOKENS_PER_MINUTE));
  });
});
