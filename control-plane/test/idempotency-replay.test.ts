// What a retry with X-Service-Idempotency-Key gets, on both store engines, where the
// answer is not the plain case: a request that runs longer than the replay window, an
// answer too large to store, and an answer whose work left the org without balance.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import type { LiveReplica } from '../src/inference/replica-source.js';
import type { Store } from '../src/store/store.js';
import { STORE_ENGINES } from '../../test/support/postgres-stores.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../../test/support/openai-upstream.js';
import { startControlPlane, type TestControlPlane } from './harness.js';

const CHAT_MODEL = 'llama-3.1-8b-instruct';

describe.each(STORE_ENGINES)('%s store', (engine) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 24, 12));
  let cp: TestControlPlane<Store>;
  let up: OpenAiUpstream;
  let key: string;

  beforeAll(async () => {
    up = await startOpenAiUpstream({ name: `${engine}-0` });
    const replica: LiveReplica = {
      id: `rep_${up.name}`,
      model: CHAT_MODEL,
      quantization: 'int4',
      pool: 'na',
      nodeId: 'node_1',
      baseUrl: up.baseUrl,
      engine: 'vllm',
      image: 'vllm/vllm-openai:test',
      apiKey: undefined,
    };
    cp = await startControlPlane({
      engine,
      clock,
      config: { inferenceEjectMs: 60_000 },
      replicas: { directory: { ready: (f = {}) => [replica].filter((r) => f.model === undefined || r.model === f.model) }, plan: { desired: () => 1 } },
    });
    key = await cp.key();
  });
  afterAll(async () => {
    await cp?.close();
    await up?.close();
  });

  const chat = { model: CHAT_MODEL, messages: [{ role: 'user', content: 'a long answer, please' }] };
  const postChat = (idem: string) => cp.request('POST', '/v1/chat/completions', { key, body: chat, headers: { 'x-service-idempotency-key': idem } });
  const chatCalls = () => up.requests.filter((r) => r.path === '/v1/chat/completions').length;
  const usageCount = async () => (await cp.request('GET', '/v1/usage?limit=100', { key })).body.data.length as number;

  /**
   * Resolves once the next request with `idem` has asked the store about its key (after
   * which it either waits for the answer or runs), so the test acts after that point and
   * not by a guess at how long it takes.
   */
  function askedAbout(idem: string): Promise<void> {
    const store = cp.store.idempotency as unknown as Record<string, unknown>;
    const methods = ['find', 'begin'].filter((name) => typeof store[name] === 'function');
    const originals = new Map(methods.map((name) => [name, store[name] as (...args: unknown[]) => Promise<unknown>]));
    return new Promise((resolve) => {
      for (const [name, original] of originals) {
        store[name] = async (...args: unknown[]) => {
          const result = await original.apply(cp.store.idempotency, args);
          if (args[1] === idem) {
            for (const [n, o] of originals) store[n] = o;
            resolve();
          }
          return result;
        };
      }
    });
  }

  it('a retry past the window while the first request still runs waits for it: one upstream call, billed once', async () => {
    const idem = randomUUID();
    const callsBefore = chatCalls();
    const usageBefore = await usageCount();
    up.mode = 'held';
    const first = postChat(idem);
    await expect.poll(() => chatCalls(), { timeout: 5_000 }).toBe(callsBefore + 1);

    // A long completion outlives the 5-minute window (the first-byte timeout is as long);
    // its process is alive and keeps renewing the claim, as its timer does every few seconds.
    clock.advance(301_000);
    await cp.app.services.idempotency.renewLeases();
    const asked = askedAbout(idem);
    const retry = postChat(idem);
    await asked;

    // The replica answers; anything sent to it from now on is answered at once.
    up.mode = 'ok';
    up.release();
    const [answered, replayed] = await Promise.all([first, retry]);
    expect(answered.status, answered.text).toBe(200);
    expect(answered.headers.get('x-service-idempotent-replay')).toBeNull();
    expect(replayed.status, replayed.text).toBe(200);
    expect(replayed.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(replayed.body.id).toBe(answered.body.id);
    expect(chatCalls()).toBe(callsBefore + 1);
    await expect.poll(usageCount, { timeout: 5_000 }).toBe(usageBefore + 1);

    // The answer is replayed for a whole window from when it was stored.
    clock.advance(299_000);
    const later = await postChat(idem);
    expect(later.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(later.body.id).toBe(answered.body.id);
    expect(chatCalls()).toBe(callsBefore + 1);
  });
});
