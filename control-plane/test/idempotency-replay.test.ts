// What a retry with X-Service-Idempotency-Key gets, on both store engines, where the
// answer is not the plain case: a request that runs longer than the replay window, an
// answer too large to store, and an answer whose work left the org without balance.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import type { LiveReplica } from '../src/inference/replica-source.js';
import type { Scope } from '../src/keys/scopes.js';
import type { Store } from '../src/store/store.js';
import type { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { PostgresStore } from '../src/store/postgres/postgres-store.js';
import { STORE_ENGINES } from '../../test/support/postgres-stores.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../../test/support/openai-upstream.js';
import { addReadyNode, expectError, startControlPlane, type TestControlPlane } from './harness.js';

const CHAT_MODEL = 'llama-3.1-8b-instruct';
const EMBEDDING_MODEL = 'nomic-embed-text-v1.5';

describe.each(STORE_ENGINES)('%s store', (engine) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 24, 12));
  let cp: TestControlPlane<Store>;
  let up: OpenAiUpstream;
  let key: string;

  beforeAll(async () => {
    // One stand-in serves both models: a chat model and a 768-dimension embedding model.
    up = await startOpenAiUpstream({ name: `${engine}-0`, dimension: 768 });
    const replica = (model: string, quantization: LiveReplica['quantization']): LiveReplica => ({
      id: `rep_${up.name}_${model}`,
      model,
      quantization,
      pool: 'na',
      nodeId: 'node_1',
      baseUrl: up.baseUrl,
      engine: 'vllm',
      image: 'vllm/vllm-openai:test',
      apiKey: undefined,
    });
    const live = [replica(CHAT_MODEL, 'int4'), replica(EMBEDDING_MODEL, 'fp16')];
    cp = await startControlPlane({
      engine,
      clock,
      config: { inferenceEjectMs: 60_000 },
      replicas: { directory: { ready: (f = {}) => live.filter((r) => f.model === undefined || r.model === f.model) }, plan: { desired: () => 1 } },
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
  const embed = (idem: string, input: string[]) =>
    cp.request('POST', '/v1/embeddings', { key, body: { model: EMBEDDING_MODEL, input }, headers: { 'x-service-idempotency-key': idem } });
  const embeddingCalls = () => up.requests.filter((r) => r.path === '/v1/embeddings').length;

  /** The bytes of the answer stored for `idem`; undefined when nothing is stored. */
  async function storedAnswerBytes(idem: string): Promise<number | undefined> {
    if (engine === 'sqlite') {
      const row = (cp.store as SqliteStore).db.prepare('SELECT length(CAST(body AS BLOB)) AS bytes FROM idempotency_records WHERE idem_key = ?').get(idem) as { bytes: number } | undefined;
      return row?.bytes;
    }
    const { rows } = await (cp.store as PostgresStore).pool.query('SELECT octet_length(body) AS bytes FROM idempotency_records WHERE idem_key = $1', [idem]);
    return rows[0] ? Number(rows[0].bytes) : undefined;
  }

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

  it('an answer over 1 MiB is sent but not stored: the key is released, so a retry runs again; a smaller one is replayed', async () => {
    // 2,048 inputs of one character: an 8 KB request whose answer is about 3 MB.
    const large = Array.from({ length: 2048 }, () => 'a');
    const idem = randomUUID();
    const callsBefore = embeddingCalls();
    const first = await embed(idem, large);
    expect(first.status, first.text).toBe(200);
    expect(first.body.data).toHaveLength(2048);
    expect(first.text.length).toBeGreaterThan(1024 * 1024);
    const calls = embeddingCalls() - callsBefore;
    expect(await storedAnswerBytes(idem)).toBeUndefined();
    const retry = await embed(idem, large);
    expect(retry.status, retry.text).toBe(200);
    expect(retry.headers.get('x-service-idempotent-replay')).toBeNull();
    expect(embeddingCalls() - callsBefore).toBe(2 * calls);
    expect(retry.body.data).toEqual(first.body.data);

    const small = randomUUID();
    const answered = await embed(small, ['a', 'bb']);
    expect(answered.status, answered.text).toBe(200);
    expect(await storedAnswerBytes(small)).toBe(Buffer.byteLength(answered.text));
    const replayed = await embed(small, ['a', 'bb']);
    expect(replayed.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(replayed.text).toBe(answered.text);
  });

  /** A prepaid org of its own holding `nanos`, and a key of it with `scopes`. */
  async function prepaidOrg(name: string, nanos: number, scopes?: Scope[]): Promise<{ orgId: string; key: string }> {
    const org = await cp.app.services.orgs.create(name);
    await cp.app.services.billing.configure(org.id, { mode: 'prepaid' });
    await cp.app.services.billing.grant(org.id, nanos, 'top-up', null);
    return { orgId: org.id, key: await cp.key({ orgId: org.id, ...(scopes ? { scopes } : {}) }) };
  }

  it('retrying a create that spent the whole balance gets its replay, not 402; a new create is still refused', async () => {
    await addReadyNode(cp, { gpus: 2, pool: 'na' });
    // Two hours of one H100 in na cost $4.98: the reservation takes the whole balance.
    const { key: compute } = await prepaidOrg(`reserve-${engine}`, 4_980_000_000, ['compute:write', 'compute:read', 'billing:read']);
    const body = { sku: 'h100-80gb', gpus: 1, pool: 'na', duration_hours: 2 };
    const idem = randomUUID();
    const create = (headers: Record<string, string> = { 'x-service-idempotency-key': idem }) => cp.request('POST', '/v1/instances', { key: compute, body, headers });
    const created = await create();
    expect(created.status, created.text).toBe(201);
    // The balance is read afresh (it is cached for a second).
    clock.advance(2_000);

    const retried = await create();
    expect(retried.status, retried.text).toBe(201);
    expect(retried.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(retried.body.id).toBe(created.body.id);
    // A request that would run is still checked: the balance is spent.
    expectError(await create({ 'x-service-idempotency-key': randomUUID() }), 402, 'insufficient_quota');
    expectError(await create({}), 402, 'insufficient_quota');
    const charges = (await cp.request('GET', '/v1/billing/charges?limit=100', { key: compute })).body.data as Array<{ instance_id: string }>;
    expect(charges.filter((c) => c.instance_id === created.body.id)).toHaveLength(1);
  });

  it('a create refused for its up-front charge is not stored: topped up, the same key creates it', async () => {
    await addReadyNode(cp, { gpus: 2, pool: 'na' });
    // $1 admits the request; the two hours it reserves cost $4.98.
    const { orgId, key: compute } = await prepaidOrg(`short-${engine}`, 1_000_000_000, ['compute:write', 'compute:read']);
    const headers = { 'x-service-idempotency-key': randomUUID() };
    const create = () => cp.request('POST', '/v1/instances', { key: compute, body: { sku: 'h100-80gb', gpus: 1, pool: 'na', duration_hours: 2 }, headers });
    expectError(await create(), 402, 'insufficient_quota');
    await cp.app.services.billing.grant(orgId, 4_000_000_000, 'top-up', null);
    clock.advance(2_000);
    const created = await create();
    expect(created.status, created.text).toBe(201);
    expect(created.headers.get('x-service-idempotent-replay')).toBeNull();
  });

  it('retrying a completion whose usage spent the whole balance gets its replay, not 402', async () => {
    // One nano-dollar: the completion is admitted, and its usage takes the balance below zero.
    const { key: live } = await prepaidOrg(`infer-${engine}`, 1);
    const idem = randomUUID();
    const complete = (headers: Record<string, string> = { 'x-service-idempotency-key': idem }) =>
      cp.request('POST', '/v1/chat/completions', { key: live, body: chat, headers });
    const callsBefore = chatCalls();
    const answered = await complete();
    expect(answered.status, answered.text).toBe(200);
    await cp.app.services.inference.recorder.flush();
    clock.advance(2_000);

    const retried = await complete();
    expect(retried.status, retried.text).toBe(200);
    expect(retried.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(retried.body.id).toBe(answered.body.id);
    expectError(await complete({ 'x-service-idempotency-key': randomUUID() }), 402, 'insufficient_quota');
    expect(chatCalls()).toBe(callsBefore + 1);
  });
});
