// Stopping the control plane while it is serving, over real HTTP against stand-in
// replicas: a stream that would never end and a whole completion still at its replica.
// Past the drain deadline the stream's connection is closed, the completion is waited
// for, and both are billed before the store closes; the close does not wait on the stream.
import { rmSync } from 'node:fs';
import { Agent, fetch } from 'undici';
import { afterAll, expect, it } from 'vitest';
import { createLogger } from '@svc/shared';
import { closeGracefully } from '../src/http/graceful-close.js';
import type { LiveReplica } from '../src/inference/replica-source.js';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../../test/support/openai-upstream.js';
import { startControlPlane, type TestControlPlane } from './harness.js';

const upstreams: OpenAiUpstream[] = [];
let cp: TestControlPlane | undefined;

afterAll(async () => {
  await Promise.all(upstreams.map((u) => u.close()));
  if (cp) rmSync(cp.dataDir, { recursive: true, force: true });
});

const replicaOf = (up: OpenAiUpstream, model: string): LiveReplica => ({
  id: `rep_${up.name}`,
  model,
  quantization: 'int4',
  pool: 'na',
  nodeId: 'node_1',
  baseUrl: up.baseUrl,
  engine: 'vllm',
  image: 'vllm/vllm-openai:test',
  apiKey: `key-${up.name}`,
});

it('closes the connections still open at the drain deadline and records every request\'s usage before the store closes', async () => {
  const streaming = await startOpenAiUpstream({ name: 'streaming', apiKey: 'key-streaming' });
  const whole = await startOpenAiUpstream({ name: 'whole', apiKey: 'key-whole' });
  upstreams.push(streaming, whole);
  streaming.mode = 'hang-stream'; // role and one word, then nothing: a stream that never ends
  whole.mode = 'held'; // answers when released
  const live = [replicaOf(streaming, 'llama-3.1-8b-instruct'), replicaOf(whole, 'qwen2.5-7b-instruct')];
  const started = await startControlPlane({
    replicas: {
      directory: { ready: (f = {}) => live.filter((r) => f.model === undefined || r.model === f.model) },
      plan: { desired: (model) => (live.some((r) => r.model === model) ? 1 : 0) },
    },
  });
  cp = started;
  const key = await started.key();
  const clients = new Agent();
  const post = (body: object) =>
    fetch(`${started.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      dispatcher: clients,
    });
  const messages = [{ role: 'user', content: 'hi' }];

  const stream = await post({ model: 'llama-3.1-8b-instruct', messages, stream: true });
  expect(stream.status).toBe(200);
  const reader = stream.body!.getReader();
  let text = '';
  while (!text.includes('Hello')) text += new TextDecoder().decode((await reader.read()).value);
  const completion = post({ model: 'qwen2.5-7b-instruct', messages }).catch((err: Error) => err);
  await expect.poll(() => whole.requests.length, { timeout: 5000 }).toBe(1);

  const closed = closeGracefully(started.app, 200, createLogger('silent', 'test'));
  // The stream's connection is closed at the deadline: its client sees the end.
  await expect(
    (async () => {
      for (;;) if ((await reader.read()).done) return 'ended';
    })(),
  ).rejects.toThrow();
  // The whole completion is still at its replica, answering only later; the close waits
  // for its answer (and its usage record) before the store would close.
  setTimeout(() => whole.release(), 500);
  await closed;
  expect(whole.requests).toHaveLength(1);
  expect(await completion).toBeInstanceOf(Error); // its client was cut off with the rest
  await clients.destroy();

  // The store closes right after, as the server's does: whatever was not written by now is lost.
  await started.store.close();
  // Both are billed: the stream for what the replica reported before it was cut, the
  // completion in full.
  const reopened = openSqliteStore(started.dataDir);
  const records = (await reopened.usage.list(started.org.id, { limit: 10 })).data;
  await reopened.close();
  expect(records.map((r) => [r.model, r.promptTokens, r.completionTokens]).sort()).toEqual([
    ['llama-3.1-8b-instruct', 5, 1],
    ['qwen2.5-7b-instruct', 5, 3],
  ]);
});
