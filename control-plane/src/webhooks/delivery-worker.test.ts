import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, createLogger, newId } from '@svc/shared';
import { openSqliteStore, type SqliteStore } from '../store/sqlite/sqlite-store.js';
import { DeliveryWorker } from './delivery-worker.js';
import type { AttemptRequest, AttemptSender } from './http-sender.js';
import { KEY_REVOKED } from './event-types.js';

let store: SqliteStore | undefined;
let worker: DeliveryWorker | undefined;
let dir: string | undefined;
afterEach(async () => {
  await worker?.stop();
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function setup(send: AttemptSender) {
  dir = mkdtempSync(join(tmpdir(), 'svc-worker-'));
  store = openSqliteStore(dir);
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  await store.orgs.create({ id: 'org_1', name: 'one', tier: 2, ipAllowlist: [], referrerAllowlist: [], allowedModels: null, createdAt: 0 });
  await store.webhooks.createSubscription(
    { id: 'wh_1', orgId: 'org_1', url: 'https://hooks.example.com/', eventTypes: ['*'], description: null, status: 'enabled', disabledReason: null, createdAt: 0 },
    { subscriptionId: 'wh_1', secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', createdAt: 0, expiresAt: null },
  );
  worker = new DeliveryWorker({ store, clock, send, schedule: [0, 5000], timeoutMs: 1000, pollMs: 10, log: createLogger('silent', 'test') });
  worker.start();
  const event = await store.events.append({ id: newId('evt'), type: KEY_REVOKED, orgId: 'org_1', subject: 'key_1', data: { key_id: 'key_1' }, createdAt: clock.now() });
  return { clock, event };
}

const until = async (check: () => boolean | Promise<boolean>) => {
  const deadline = Date.now() + 3000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('DeliveryWorker', () => {
  it('sends the event signed, with the event id as webhook-id, and records the attempt', async () => {
    const sent: AttemptRequest[] = [];
    const { event } = await setup(async (request) => {
      sent.push(request);
      return { statusCode: 204, error: null, retryAfter: undefined, durationMs: 3 };
    });
    await until(() => sent.length === 1);
    expect(sent[0]!.headers['webhook-id']).toBe(event.id);
    expect(sent[0]!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(JSON.parse(sent[0]!.body)).toEqual({ id: event.id, type: KEY_REVOKED, created: 1767225600, data: { key_id: 'key_1' } });
    const history = async () => (await store!.webhooks.listDeliveries('wh_1', { limit: 10 }))[0]!;
    await until(async () => (await history()).delivery.status === 'succeeded');
    expect((await history()).attempts).toEqual([expect.objectContaining({ attempt: 1, statusCode: 204, durationMs: 3 })]);
  });

  it('pauses a delivery whose attempt failed unexpectedly instead of retrying it every poll', async () => {
    let calls = 0;
    const { clock } = await setup(async () => {
      calls += 1;
      await new Promise((r) => setImmediate(r)); // as real I/O would, let timers run
      throw new Error('sender bug');
    });
    await until(() => calls === 1);
    await new Promise((r) => setTimeout(r, 100)); // ten polls
    expect(calls).toBe(1);
    clock.advance(30_000);
    await until(() => calls === 2);
    const [history] = await store!.webhooks.listDeliveries('wh_1', { limit: 10 });
    expect(history?.delivery).toMatchObject({ status: 'pending', attemptCount: 0 });
  });

  it('four orgs whose endpoints never answer hold every slot: the next freed slot goes to an idle org, not their backlog', async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-worker-'));
    store = openSqliteStore(dir);
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const addOrg = async (id: string, subscriptions: number, url: string) => {
      await store!.orgs.create({ id, name: id, tier: 2, ipAllowlist: [], referrerAllowlist: [], allowedModels: null, createdAt: 0 });
      for (let i = 0; i < subscriptions; i++) {
        await store!.webhooks.createSubscription(
          { id: `wh_${id}_${i}`, orgId: id, url, eventTypes: ['*'], description: null, status: 'enabled', disabledReason: null, createdAt: 0 },
          { subscriptionId: `wh_${id}_${i}`, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', createdAt: 0, expiresAt: null },
        );
      }
    };
    const revoke = (orgId: string, key: string) =>
      store!.events.append({ id: newId('evt'), type: KEY_REVOKED, orgId, subject: key, data: { key_id: key }, createdAt: clock.now() });
    // 4 orgs x 16 webhooks x 5 events: 320 deliveries, more than one page of due ones.
    const hostile = ['org_h1', 'org_h2', 'org_h3', 'org_h4'];
    for (const org of hostile) {
      await addOrg(org, 16, 'https://silent.example.com/');
      for (let k = 0; k < 5; k++) await revoke(org, `key_${org}_${k}`);
    }
    const sent: string[] = [];
    const hanging: ((outcome: { statusCode: null; error: string; retryAfter: undefined; durationMs: number }) => void)[] = [];
    const send: AttemptSender = (request) => {
      sent.push(request.url);
      if (request.url !== 'https://silent.example.com/') return Promise.resolve({ statusCode: 204, error: null, retryAfter: undefined, durationMs: 1 });
      // Never answers: held until the test lets it time out, or the worker stops.
      return new Promise((resolve, reject) => {
        hanging.push(resolve);
        request.signal.addEventListener('abort', () => reject(new Error('aborted')));
      });
    };
    worker = new DeliveryWorker({ store, clock, send, schedule: [0, 5000], timeoutMs: 1000, pollMs: 10, log: createLogger('silent', 'test') });
    worker.start();
    await until(() => sent.length === 16);
    // The idle org's one delivery arrives while every slot is held.
    await addOrg('org_v', 1, 'https://victim.example.com/');
    await revoke('org_v', 'key_v');
    await until(async () => (await store!.webhooks.listDeliveries('wh_org_v_0', { limit: 1 })).length === 1);
    expect(sent).toHaveLength(16);
    // One silent attempt times out (its retry is not due on this clock): one slot frees.
    hanging.shift()!({ statusCode: null, error: 'timeout', retryAfter: undefined, durationMs: 1000 });
    await until(() => sent.length >= 17);
    expect(sent[16]).toBe('https://victim.example.com/');
    await worker.stop(0);
  });
});
