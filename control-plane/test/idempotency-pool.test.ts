// X-Service-Pool is part of what a request does: the 503 `pool_degraded` that asks for
// "a different X-Service-Pool" is not stored, so the retry it asks for (same
// idempotency key, another pool) runs, once; a pool that answered cannot be swapped.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import type { LiveReplica } from '../src/inference/replica-source.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../../test/support/openai-upstream.js';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

const MODEL = 'llama-3.1-8b-instruct';
let cp: TestControlPlane;
let key: string;
let na: OpenAiUpstream;
let eu: OpenAiUpstream;

const replica = (up: OpenAiUpstream, pool: 'na' | 'eu'): LiveReplica => ({
  id: `rep_${up.name}`,
  model: MODEL,
  quantization: 'int4',
  pool,
  nodeId: `node_${pool}`,
  baseUrl: up.baseUrl,
  engine: 'vllm',
  image: 'vllm/vllm-openai:test',
  apiKey: undefined,
});

beforeAll(async () => {
  [na, eu] = await Promise.all([startOpenAiUpstream({ name: 'na-0' }), startOpenAiUpstream({ name: 'eu-0' })]);
  const live = [replica(na, 'na'), replica(eu, 'eu')];
  cp = await startControlPlane({
    clock: new ManualClock(Date.now()),
    config: { inferenceEjectMs: 60_000 },
    replicas: { directory: { ready: (f = {}) => live.filter((r) => f.model === undefined || r.model === f.model) }, plan: { desired: () => 1 } },
  });
  key = await cp.key();
});
afterAll(async () => {
  await cp.close();
  await Promise.all([na.close(), eu.close()]);
});

const chat = { model: MODEL, messages: [{ role: 'user', content: 'hi' }] };
const call = (idem: string, pool: string) =>
  cp.request('POST', '/v1/chat/completions', { key, body: chat, headers: { 'x-service-idempotency-key': idem, 'x-service-pool': pool } });
const usageCount = async () => (await cp.request('GET', '/v1/usage?limit=100', { key })).body.data.length;

describe('idempotency and X-Service-Pool', () => {
  it('retrying a pool_degraded answer in another pool with the same key runs there, once', async () => {
    na.mode = 'fail';
    const idem = randomUUID();
    expectError(await call(idem, 'na'), 503, 'pool_degraded');
    const before = await usageCount();

    const moved = await call(idem, 'eu');
    expect(moved.status, moved.text).toBe(200);
    expect(moved.headers.get('x-service-idempotent-replay')).toBeNull();
    expect(moved.body.choices[0].message.content).toBe('Hello from eu-0');

    const replay = await call(idem, 'eu');
    expect(replay.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(replay.body.id).toBe(moved.body.id);
    expect(eu.requests.length).toBe(1);
    expect(await usageCount()).toBe(before + 1);

    // Once a pool answered, the same key in another pool is another request.
    const swapped = expectError(await call(idem, 'na'), 400, 'invalid_request');
    expect(swapped.code).toBe('idempotency_key_reused');
    expect(swapped.message).toContain('X-Service-Pool');
  });
});
