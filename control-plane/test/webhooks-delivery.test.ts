// Webhook delivery end to end: a real control plane with a ManualClock delivering to
// real HTTP receivers that verify every request with the standardwebhooks library.
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, newId, toUnixSeconds } from '@svc/shared';
import { INSTANCE_LIFECYCLE } from '../src/webhooks/event-types.js';
import { MAX_DELIVERY_ATTEMPTS_PER_HOUR } from '../src/webhooks/webhook-service.js';
import { startControlPlane, expectError, type TestControlPlane } from './harness.js';
import { WebhookReceiver, sleep, until, type ReceivedRequest } from './webhooks-support.js';

const POLL_MS = 20;
/** Receivers listen on loopback, which webhooks may reach only when an operator allows it. */
const LOCAL_RECEIVER = ['127.0.0.1'];
/** Short waits so tests move the clock by seconds, inside standardwebhooks' 5-minute timestamp tolerance. */
const SCHEDULE = ['0s', '5s', '5s', '5s', '5s', '5s'];
/** More than a 5 s wait plus its +20% jitter. */
const NEXT_RETRY_MS = 6_100;

let cp: TestControlPlane | undefined;
const receivers: WebhookReceiver[] = [];
afterEach(async () => {
  await cp?.close();
  cp = undefined;
  for (const r of receivers.splice(0)) await r.stop();
});

async function setup(eventTypes: string[] = ['*']) {
  const clock = new ManualClock(Date.now());
  cp = await startControlPlane({ clock, config: { webhookPollMs: POLL_MS, webhookRetrySchedule: SCHEDULE, webhookAllowedTargets: LOCAL_RECEIVER } });
  const admin = await cp.key({ admin: true });
  const receiver = await newReceiver();
  const webhook = await subscribe(cp, admin, receiver, eventTypes);
  return { cp, clock, admin, receiver, webhook };
}

async function newReceiver(): Promise<WebhookReceiver> {
  const receiver = await WebhookReceiver.start();
  receivers.push(receiver);
  return receiver;
}

async function subscribe(cp: TestControlPlane, admin: string, receiver: WebhookReceiver, eventTypes: string[]) {
  const res = await cp.request('POST', '/v1/webhooks', { key: admin, body: { url: receiver.url, event_types: eventTypes } });
  expect(res.status).toBe(201);
  receiver.secrets = [res.body.secret];
  return res.body as { id: string; secret: string };
}

async function revokeNewKey(cp: TestControlPlane, admin: string): Promise<string> {
  const target = (await cp.app.services.keys.create({ orgId: cp.org.id })).record.id;
  expect((await cp.request('POST', `/v1/admin/keys/${target}/revoke`, { key: admin, body: {} })).status).toBe(200);
  return target;
}

/** A control plane whose attempts to a silent endpoint hold their slot for a minute, and that endpoint. */
async function withSilentEndpoint() {
  const clock = new ManualClock(Date.now());
  cp = await startControlPlane({ clock, config: { webhookPollMs: POLL_MS, webhookRetrySchedule: SCHEDULE, webhookAllowedTargets: LOCAL_RECEIVER, webhookTimeoutMs: 60_000 } });
  const admin = await cp.key({ admin: true });
  const tarpit = await newReceiver();
  tarpit.answer = () => 'hang';
  return { cp, admin, tarpit };
}

/** Another org subscribes and revokes one of its keys: its key.revoked arrives while the first org's attempts hang. */
async function anotherOrgIsServed(cp: TestControlPlane, name: string): Promise<void> {
  const other = await cp.app.services.orgs.create(name);
  const otherAdmin = await cp.key({ admin: true, orgId: other.id });
  const receiver = await newReceiver();
  await subscribe(cp, otherAdmin, receiver, ['*']);
  const target = (await cp.app.services.keys.create({ orgId: other.id })).record.id;
  expect((await cp.request('POST', `/v1/admin/keys/${target}/revoke`, { key: otherAdmin, body: {} })).status).toBe(200);
  await until('the other org\'s delivery', () => receiver.requests.length === 1);
  expect(receiver.requests[0]!.event).toMatchObject({ type: 'key.revoked', data: { key_id: target } });
}

async function appendLifecycle(cp: TestControlPlane, instanceId: string, status: string) {
  return cp.store.events.append({
    id: newId('evt'),
    type: INSTANCE_LIFECYCLE,
    orgId: cp.org.id,
    subject: instanceId,
    data: { id: instanceId, object: 'instance', status },
    createdAt: cp.clock.now(),
  });
}

async function deliveries(cp: TestControlPlane, admin: string, webhookId: string) {
  const res = await cp.request('GET', `/v1/webhooks/${webhookId}/deliveries?limit=100`, { key: admin });
  expect(res.status).toBe(200);
  return res.body.data as any[];
}

const everyRequestVerified = (r: WebhookReceiver) => expect(r.requests.every((q) => q.verifiedWith.length > 0)).toBe(true);

describe('webhook delivery', () => {
  it('delivers instance.lifecycle events of one instance in order, holding later ones while an earlier one fails', async () => {
    const { cp, clock, admin, receiver, webhook } = await setup([INSTANCE_LIFECYCLE]);
    let failuresLeft = 2;
    receiver.answer = (r) => (r.event.data.id === 'ins_A' && r.event.data.status === 'provisioning' && failuresLeft-- > 0 ? { status: 500 } : { status: 200 });
    const statuses = ['provisioning', 'ready', 'draining', 'terminated'];
    const appended: Array<{ id: string }> = [];
    for (const status of statuses) appended.push(await appendLifecycle(cp, 'ins_A', status));
    await appendLifecycle(cp, 'ins_B', 'provisioning');
    const attemptsOfFirst = async () =>
      (await deliveries(cp, admin, webhook.id)).find((d) => d.event_id === appended[0]!.id)?.attempt_count;

    const ofA = () => receiver.requests.filter((r) => r.event.data.id === 'ins_A');
    // Another instance is not held up by ins_A's failing event.
    await until('ins_B delivered and ins_A tried', () => receiver.delivered().some((r) => r.event.data.id === 'ins_B') && ofA()[0]?.answered === 500);
    await until('first attempt recorded', async () => (await attemptsOfFirst()) === 1);
    await sleep(POLL_MS * 5);
    expect(ofA().map((r) => r.event.data.status)).toEqual(['provisioning']);

    clock.advance(NEXT_RETRY_MS);
    await until('second attempt recorded', async () => (await attemptsOfFirst()) === 2);
    await sleep(POLL_MS * 5);
    expect(ofA()).toHaveLength(2);

    clock.advance(NEXT_RETRY_MS);
    await until('all of ins_A delivered', () => receiver.delivered().filter((r) => r.event.data.id === 'ins_A').length === 4);
    expect(ofA().map((r) => [r.event.data.status, r.answered])).toEqual([
      ['provisioning', 500],
      ['provisioning', 500],
      ['provisioning', 200],
      ['ready', 200],
      ['draining', 200],
      ['terminated', 200],
    ]);
    expect(ofA().map((r) => r.webhookId)).toEqual([appended[0]!.id, appended[0]!.id, ...appended.map((e) => e.id)]);
    everyRequestVerified(receiver);
  });

  it('delivers key.revoked after a revoke through the API, signed per Standard Webhooks', async () => {
    const { cp, clock, admin, receiver, webhook } = await setup(['key.revoked']);
    const keyId = await revokeNewKey(cp, admin);
    await until('key.revoked delivered', () => receiver.delivered().length === 1);
    const [request] = receiver.requests as [ReceivedRequest];
    const key = await cp.store.keys.get(keyId);
    expect(request.event).toEqual({
      id: request.webhookId,
      type: 'key.revoked',
      created: toUnixSeconds(clock.now()),
      data: { key_id: keyId, prefix: key!.prefix, last4: key!.last4, revoked_at: new Date(key!.revokedAt!).toISOString() },
    });
    expect(request.webhookId).toMatch(/^evt_/);
    expect(request.timestamp).toBe(String(toUnixSeconds(clock.now())));
    expect(request.verifiedWith).toEqual([webhook.secret]);

    const [delivery] = await deliveries(cp, admin, webhook.id);
    expect(delivery).toMatchObject({ event_id: request.webhookId, event_type: 'key.revoked', status: 'succeeded', attempt_count: 1, next_attempt_at: null });
    expect(delivery.attempts).toEqual([expect.objectContaining({ attempt: 1, status_code: 200, error: null, next_retry_at: null })]);
  });

  it('a receiver that fails (500s, then connection refused) and recovers gets every event; duplicates keep their webhook-id', async () => {
    const { cp, clock, admin, receiver, webhook } = await setup(['key.revoked']);
    receiver.answer = () => ({ status: 500 });
    for (let i = 0; i < 3; i++) await revokeNewKey(cp, admin);
    await until('first attempts answered 500', () => receiver.requests.filter((r) => r.answered === 500).length === 3);

    await receiver.stop();
    clock.advance(NEXT_RETRY_MS);
    await until('second attempts refused', async () => (await deliveries(cp, admin, webhook.id)).every((d) => d.attempt_count === 2));

    await receiver.listen();
    receiver.answer = () => ({ status: 200 });
    clock.advance(NEXT_RETRY_MS);
    await until('all delivered', () => receiver.delivered().length === 3);

    const events = await cp.store.events.list({ type: 'key.revoked' });
    expect(new Set(receiver.delivered().map((r) => r.webhookId))).toEqual(new Set(events.map((e) => e.id)));
    for (const request of receiver.requests) expect(request.webhookId).toBe(request.event.id);
    for (const event of events) {
      const copies = receiver.requests.filter((r) => r.webhookId === event.id);
      expect(copies.map((r) => r.answered)).toEqual([500, 200]);
      expect(copies[0]!.body).toBe(copies[1]!.body);
    }
    everyRequestVerified(receiver);

    for (const d of await deliveries(cp, admin, webhook.id)) {
      expect(d.status).toBe('succeeded');
      expect(d.attempts.map((a: any) => a.status_code)).toEqual([500, null, 200]);
      expect(d.attempts[1].error).toMatch(/ECONNREFUSED/);
      expect(d.attempts[0].next_retry_at).not.toBeNull();
    }
  });

  it('during a secret rotation both secrets sign; after the overlap only the new one', async () => {
    const { cp, clock, admin, receiver, webhook } = await setup(['key.revoked']);
    const rotated = await cp.request('POST', `/v1/webhooks/${webhook.id}/rotate-secret`, { key: admin, body: { overlap_seconds: 60 } });
    const newSecret = rotated.body.secret as string;
    receiver.secrets = [webhook.secret, newSecret];

    await revokeNewKey(cp, admin);
    await until('delivered during the overlap', () => receiver.delivered().length === 1);
    expect(receiver.requests[0]!.signature.split(' ')).toHaveLength(2);
    expect(receiver.requests[0]!.verifiedWith).toEqual([webhook.secret, newSecret]);

    clock.advance(61_000);
    await revokeNewKey(cp, admin);
    await until('delivered after the overlap', () => receiver.delivered().length === 2);
    expect(receiver.requests[1]!.signature.split(' ')).toHaveLength(1);
    expect(receiver.requests[1]!.verifiedWith).toEqual([newSecret]);
  });

  it('rotations during an overlap end the earlier overlap: deliveries carry two signatures however often a tenant rotates', async () => {
    const { cp, admin, receiver, webhook } = await setup(['key.revoked']);
    let secret = webhook.secret as string;
    const previous: string[] = [];
    for (let i = 0; i < 25; i++) {
      const rotated = await cp.request('POST', `/v1/webhooks/${webhook.id}/rotate-secret`, { key: admin, body: { overlap_seconds: 604_800 } });
      expect(rotated.status).toBe(200);
      previous.push(secret);
      secret = rotated.body.secret as string;
    }
    receiver.secrets = [previous.at(-1)!, secret];
    await revokeNewKey(cp, admin);
    await until('delivered', () => receiver.delivered().length === 1);
    expect(receiver.requests[0]!.signature.split(' ')).toHaveLength(2);
    expect(receiver.requests[0]!.verifiedWith).toEqual([previous.at(-1)!, secret]);
  });

  it('410 Gone disables the subscription; other subscriptions keep receiving', async () => {
    const { cp, admin, receiver: gone, webhook } = await setup(['key.revoked']);
    gone.answer = () => ({ status: 410 });
    const healthy = await newReceiver();
    await subscribe(cp, admin, healthy, ['key.revoked']);

    await revokeNewKey(cp, admin);
    await until('first event at both', () => gone.requests.length === 1 && healthy.delivered().length === 1);
    await until('disabled', async () => (await cp.request('GET', `/v1/webhooks/${webhook.id}`, { key: admin })).body.status === 'disabled');
    const shown = (await cp.request('GET', `/v1/webhooks/${webhook.id}`, { key: admin })).body;
    expect(shown.disabled_reason).toMatch(/410/);

    await revokeNewKey(cp, admin);
    await until('second event at the healthy receiver', () => healthy.delivered().length === 2);
    await sleep(POLL_MS * 5);
    expect(gone.requests).toHaveLength(1);
    const list = await deliveries(cp, admin, webhook.id);
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ status: 'failed', attempts: [expect.objectContaining({ status_code: 410 })] });
    const redeliver = await cp.request('POST', `/v1/webhooks/${webhook.id}/deliveries/${list[0].id}/redeliver`, { key: admin, body: {} });
    expect(expectError(redeliver, 400, 'invalid_request').message).toMatch(/disabled/);
  });

  it('honours Retry-After in seconds and as an HTTP date', async () => {
    const { cp, clock, admin, receiver, webhook } = await setup(['key.revoked']);
    const answers = [
      () => ({ status: 429, headers: { 'retry-after': '120' } }),
      () => ({ status: 503, headers: { 'retry-after': new Date(clock.now() + 90_000).toUTCString() } }),
      () => ({ status: 200 }),
    ];
    receiver.answer = () => answers[receiver.requests.length - 1]!();
    await revokeNewKey(cp, admin);
    await until('first attempt', () => receiver.requests[0]?.answered === 429);
    const firstAt = clock.now();
    await until('recorded', async () => (await deliveries(cp, admin, webhook.id))[0].attempt_count === 1);
    expect((await deliveries(cp, admin, webhook.id))[0].next_attempt_at).toBe(new Date(firstAt + 120_000).toISOString());

    clock.advance(119_000);
    await sleep(POLL_MS * 5);
    expect(receiver.requests).toHaveLength(1);
    clock.advance(1_000);
    await until('second attempt', () => receiver.requests[1]?.answered === 503);
    const secondAt = clock.now();
    await until('recorded', async () => (await deliveries(cp, admin, webhook.id))[0].attempt_count === 2);
    const dateSeconds = Math.floor((secondAt + 90_000) / 1000) * 1000;
    expect((await deliveries(cp, admin, webhook.id))[0].next_attempt_at).toBe(new Date(dateSeconds).toISOString());

    clock.set(dateSeconds);
    await until('delivered', () => receiver.delivered().length === 1);
    everyRequestVerified(receiver);
  });

  it('gives up after the last attempt of the schedule, then lets the next event of the subject through', async () => {
    const { cp, clock, admin, receiver, webhook } = await setup([INSTANCE_LIFECYCLE]);
    receiver.answer = (r) => (r.event.data.status === 'provisioning' ? { status: 500 } : { status: 200 });
    await appendLifecycle(cp, 'ins_X', 'provisioning');
    await appendLifecycle(cp, 'ins_X', 'ready');
    for (let attempt = 1; attempt <= SCHEDULE.length; attempt++) {
      // Recorded, not only answered: the next wait is counted from when the worker records it.
      await until(`attempt ${attempt}`, async () => (await deliveries(cp, admin, webhook.id)).some((d) => d.attempt_count === attempt));
      expect(receiver.requests.filter((r) => r.event.data.status === 'provisioning')).toHaveLength(attempt);
      if (attempt < SCHEDULE.length) expect(receiver.requests.filter((r) => r.event.data.status === 'ready')).toHaveLength(0);
      if (attempt < SCHEDULE.length) clock.advance(NEXT_RETRY_MS);
    }
    await until('the next event goes out', () => receiver.delivered().length === 1);
    expect(receiver.delivered()[0]!.event.data.status).toBe('ready');
    const [ready, provisioning] = await deliveries(cp, admin, webhook.id);
    expect(provisioning).toMatchObject({ status: 'failed', attempt_count: SCHEDULE.length });
    expect(ready).toMatchObject({ status: 'succeeded' });
  });

  it('an event appended in this process wakes the worker at once, without waiting for the poll', async () => {
    cp = await startControlPlane({ config: { webhookPollMs: 60_000, webhookAllowedTargets: LOCAL_RECEIVER } });
    const admin = await cp.key({ admin: true });
    const receiver = await newReceiver();
    await subscribe(cp, admin, receiver, ['key.revoked']);
    await sleep(50); // the start-up pass is over; the next poll is a minute away
    const started = Date.now();
    await revokeNewKey(cp, admin);
    await until('delivered', () => receiver.delivered().length === 1, 2_000);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('one org\'s silent endpoints hold at most 4 of the worker\'s attempts: another org\'s events go out meanwhile', async () => {
    const { cp, admin, tarpit } = await withSilentEndpoint();
    const secrets: string[] = [];
    for (let i = 0; i < 16; i++) secrets.push((await subscribe(cp, admin, tarpit, ['*'])).secret);
    tarpit.secrets = secrets; // each subscription signs with its own
    await revokeNewKey(cp, admin); // 16 deliveries due at once, one per subscription
    await until('the silent endpoint to hold attempts', () => tarpit.requests.length === 4);
    await anotherOrgIsServed(cp, 'punctual-org');
    expect(tarpit.requests).toHaveLength(4); // still four: the first org waits for its own
  });

  it('one org\'s backlog, due before another org\'s delivery, does not hold that delivery up', async () => {
    const { cp, admin, tarpit } = await withSilentEndpoint();
    await subscribe(cp, admin, tarpit, ['*']);
    // 400 events of the first org, more than the worker reads in one page, all due first.
    for (let i = 0; i < 400; i++) await appendLifecycle(cp, `inst_backlog_${i}`, 'running');
    await until('the silent endpoint to hold attempts', () => tarpit.requests.length === 4);
    await anotherOrgIsServed(cp, 'behind-the-backlog-org');
    expect(tarpit.requests).toHaveLength(4);
  });

  it('redelivers on request with the same webhook-id', async () => {
    const { cp, admin, receiver, webhook } = await setup(['key.revoked']);
    await revokeNewKey(cp, admin);
    await until('delivered', () => receiver.delivered().length === 1);
    const [delivery] = await deliveries(cp, admin, webhook.id);
    const res = await cp.request('POST', `/v1/webhooks/${webhook.id}/deliveries/${delivery.id}/redeliver`, { key: admin, body: {} });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ id: delivery.id, status: 'pending' });
    await until('delivered again', () => receiver.delivered().length === 2);
    expect(receiver.requests[1]!.webhookId).toBe(receiver.requests[0]!.webhookId);
    await until('recorded', async () => (await deliveries(cp, admin, webhook.id))[0].attempt_count === 2);
    expect((await deliveries(cp, admin, webhook.id))[0]).toMatchObject({ status: 'succeeded', attempt_count: 2 });
  });

  it(`a delivery with ${MAX_DELIVERY_ATTEMPTS_PER_HOUR} attempts in the past hour is not redelivered (429 redelivery_limit) until the oldest is an hour old`, async () => {
    const { cp, clock, admin, receiver, webhook } = await setup(['key.revoked']);
    await revokeNewKey(cp, admin);
    await until('delivered', () => receiver.delivered().length === 1);
    const [delivery] = await deliveries(cp, admin, webhook.id);
    const redeliver = () => cp.request('POST', `/v1/webhooks/${webhook.id}/deliveries/${delivery.id}/redeliver`, { key: admin, body: {} });
    for (let sent = 1; sent < MAX_DELIVERY_ATTEMPTS_PER_HOUR; sent++) {
      expect((await redeliver()).status).toBe(202);
      await until('delivered again', () => receiver.delivered().length === sent + 1);
      await until('recorded', async () => (await deliveries(cp, admin, webhook.id))[0].attempt_count === sent + 1);
    }
    const refused = await redeliver();
    expect(expectError(refused, 429, 'rate_limited')).toMatchObject({ code: 'redelivery_limit' });
    expect(refused.headers.get('retry-after')).toBe('3600');
    clock.advance(3_600_000);
    expect((await redeliver()).status).toBe(202);
    // (Its timestamp is an hour ahead of the receiver's clock: counted as received, not verified.)
    await until('sent after the hour', () => receiver.requests.length === MAX_DELIVERY_ATTEMPTS_PER_HOUR + 1);
  });
});
