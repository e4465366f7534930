// Webhook subscription management over real HTTP: create (secret once), list, read,
// delete, rotate, URL validation (SSRF), and org isolation.
import { afterEach, describe, expect, it } from 'vitest';
import { newId } from '@svc/shared';
import { INSTANCE_LIFECYCLE } from '../src/webhooks/event-types.js';
import { planFanOut } from '../src/webhooks/fan-out.js';
import { MAX_WEBHOOKS_PER_ORG } from '../src/webhooks/webhook-service.js';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

let cp: TestControlPlane | undefined;
afterEach(async () => {
  await cp?.close();
  cp = undefined;
});

/** Subscriptions here point at loopback, which only an operator exception allows; SSRF tests set their own. */
const LOCAL_RECEIVERS = ['127.0.0.1', 'localhost'];

async function boot(options: Parameters<typeof startControlPlane>[0] = {}) {
  cp = await startControlPlane({ ...options, config: { webhookAllowedTargets: LOCAL_RECEIVERS, ...options.config } });
  return { cp, admin: await cp.key({ admin: true }) };
}

describe('webhook subscriptions', () => {
  it('an org holds at most 16 subscriptions: each one multiplies its events into deliveries', async () => {
    const { cp, admin } = await boot();
    const create = () => cp.request('POST', '/v1/webhooks', { key: admin, body: { url: 'http://127.0.0.1:9/h', event_types: ['*'] } });
    const ids: string[] = [];
    for (let i = 0; i < MAX_WEBHOOKS_PER_ORG; i++) ids.push((await create()).body.id);
    const full = expectError(await create(), 400, 'invalid_request');
    expect(full).toMatchObject({ code: 'too_many_webhooks', param: 'url', message: 'an organization has at most 16 webhook subscriptions; delete one first' });
    expect((await cp.request('DELETE', `/v1/webhooks/${ids[0]}`, { key: admin })).status).toBe(200);
    expect((await create()).status).toBe(201);
    // Another org has its own 16.
    const other = await cp.app.services.orgs.create('other-webhooks-org');
    const otherAdmin = await cp.key({ admin: true, orgId: other.id });
    expect((await cp.request('POST', '/v1/webhooks', { key: otherAdmin, body: { url: 'http://127.0.0.1:9/h', event_types: ['*'] } })).status).toBe(201);
  });

  it('create answers 201 with the secret once; list and read never show it', async () => {
    const { cp, admin } = await boot();
    const created = await cp.request('POST', '/v1/webhooks', {
      key: admin,
      body: { url: 'http://127.0.0.1:9/hook', event_types: ['key.revoked', 'instance.lifecycle'], description: 'ops' },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      object: 'webhook',
      url: 'http://127.0.0.1:9/hook',
      event_types: ['key.revoked', 'instance.lifecycle'],
      description: 'ops',
      status: 'enabled',
      org_id: cp.org.id,
    });
    expect(created.body.id).toMatch(/^wh_/);
    expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(created.body.secret.slice(6), 'base64')).toHaveLength(32);

    const list = await cp.request('GET', '/v1/webhooks', { key: admin });
    expect(list.status).toBe(200);
    expect(list.body.data).toHaveLength(1);
    expect(list.text).not.toContain(created.body.secret);
    expect(list.body.data[0]).not.toHaveProperty('secret');

    const one = await cp.request('GET', `/v1/webhooks/${created.body.id}`, { key: admin });
    expect(one.status).toBe(200);
    expect(one.body).toEqual(list.body.data[0]);
  });

  it('delete removes it; unknown ids and other orgs answer 404 not_found', async () => {
    const { cp, admin } = await boot();
    const id = (await cp.request('POST', '/v1/webhooks', { key: admin, body: { url: 'http://localhost:9/h', event_types: ['*'] } })).body.id;

    const other = await cp.app.services.orgs.create('other-org');
    const otherAdmin = await cp.key({ admin: true, orgId: other.id });
    expectError(await cp.request('GET', `/v1/webhooks/${id}`, { key: otherAdmin }), 404, 'not_found');
    expectError(await cp.request('DELETE', `/v1/webhooks/${id}`, { key: otherAdmin }), 404, 'not_found');
    expectError(await cp.request('POST', `/v1/webhooks/${id}/rotate-secret`, { key: otherAdmin, body: {} }), 404, 'not_found');
    expectError(await cp.request('GET', `/v1/webhooks/${id}/deliveries`, { key: otherAdmin }), 404, 'not_found');
    expect((await cp.request('GET', '/v1/webhooks', { key: otherAdmin })).body.data).toEqual([]);

    const deleted = await cp.request('DELETE', `/v1/webhooks/${id}`, { key: admin });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ id, object: 'webhook', deleted: true });
    expectError(await cp.request('GET', `/v1/webhooks/${id}`, { key: admin }), 404, 'not_found');
    expectError(await cp.request('DELETE', `/v1/webhooks/${id}`, { key: admin }), 404, 'not_found');
    expectError(await cp.request('POST', `/v1/webhooks/${id}/deliveries/dlv_nope/redeliver`, { key: admin, body: {} }), 404, 'not_found');
  });

  it('rotate-secret answers a new secret once and when the old one stops signing', async () => {
    const { cp, admin } = await boot();
    const created = (await cp.request('POST', '/v1/webhooks', { key: admin, body: { url: 'http://127.0.0.1:9/h', event_types: ['*'] } })).body;
    const rotated = await cp.request('POST', `/v1/webhooks/${created.id}/rotate-secret`, { key: admin, body: { overlap_seconds: 600 } });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(created.secret);
    expect(Date.parse(rotated.body.old_secret_expires_at)).toBe(cp.clock.now() + 600_000);
    const secrets = (await cp.store.webhooks.activeSecrets(created.id, cp.clock.now())).map((s) => s.secret);
    expect(secrets).toEqual([rotated.body.secret, created.secret]);
    expect((await cp.store.webhooks.activeSecrets(created.id, cp.clock.now() + 600_000)).map((s) => s.secret)).toEqual([rotated.body.secret]);
  });

  it('lists deliveries newest first, in pages', async () => {
    const { cp, admin } = await boot();
    const { subscription } = await cp.app.services.webhooks.create({ orgId: cp.org.id, url: 'http://127.0.0.1:9/h', eventTypes: ['*'] });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const event = await cp.store.events.append({ id: newId('evt'), type: INSTANCE_LIFECYCLE, orgId: cp.org.id, subject: `ins_${i}`, data: {}, createdAt: cp.clock.now() });
      ids.push(event.id);
    }
    await cp.store.webhooks.fanOut(100, (events, subs) => planFanOut(events, subs, { now: cp.clock.now(), firstDelayMs: 0, newId: () => newId('dlv') }));
    const page1 = await cp.request('GET', `/v1/webhooks/${subscription.id}/deliveries?limit=2`, { key: admin });
    expect(page1.body.data.map((d: { event_id: string }) => d.event_id)).toEqual([ids[2], ids[1]]);
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, next_cursor: page1.body.data[1].id });
    const page2 = await cp.request('GET', `/v1/webhooks/${subscription.id}/deliveries?limit=2&after=${page1.body.next_cursor}`, { key: admin });
    expect(page2.body.data.map((d: { event_id: string }) => d.event_id)).toEqual([ids[0]]);
    expect(page2.body).toMatchObject({ has_more: false, next_cursor: null });
    const bad = await cp.request('GET', `/v1/webhooks/${subscription.id}/deliveries?after=dlv_unknown`, { key: admin });
    expect(expectError(bad, 400, 'invalid_request').param).toBe('after');
  });

  it('validates the body: event types, unknown fields', async () => {
    const { cp, admin } = await boot();
    const url = 'http://127.0.0.1:9/h';
    expectError(await cp.request('POST', '/v1/webhooks', { key: admin, body: { url, event_types: ['model.created'] } }), 400, 'invalid_request');
    expectError(await cp.request('POST', '/v1/webhooks', { key: admin, body: { url, event_types: [] } }), 400, 'invalid_request');
    const mixed = expectError(await cp.request('POST', '/v1/webhooks', { key: admin, body: { url, event_types: ['*', 'key.revoked'] } }), 400, 'invalid_request');
    expect(mixed.param).toBe('event_types');
    expectError(await cp.request('POST', '/v1/webhooks', { key: admin, body: { url, event_types: ['*'], secret: 'x' } }), 400, 'invalid_request');
  });
});

describe('webhook URL validation (SSRF)', () => {
  it('the default policy, in development too: no loopback, private, link-local or CGNAT targets', async () => {
    const { cp, admin } = await boot({ config: { webhookAllowedTargets: [] } });
    for (const [url, why] of [
      ['http://127.0.0.1:9/hook', /127\.0\.0\.1 is a loopback address/],
      ['http://localhost:9/hook', /localhost resolves to .*loopback address/],
      ['http://10.0.0.5/hook', /10\.0\.0\.5 is a private address/],
      ['http://169.254.169.254/latest/meta-data', /link-local address/],
      ['http://100.64.0.1/', /carrier-grade NAT/],
      ['http://[::ffff:127.0.0.1]/', /loopback/],
      ['http://0.0.0.0:9/', /unspecified/],
      ['http://224.0.0.1/', /multicast/],
      ['http://[fe80::1]/', /link-local/],
    ] as const) {
      const error = expectError(await cp.request('POST', '/v1/webhooks', { key: admin, body: { url, event_types: ['*'] } }), 400, 'invalid_request');
      expect(error.param).toBe('url');
      expect(error.message).toMatch(why);
      expect(error.message).toContain('SVC_WEBHOOK_ALLOWED_TARGETS');
    }
  });

  it('production: https only, no private or loopback targets unless an operator allows them', async () => {
    const { cp, admin } = await boot({ config: { mode: 'production', webhookAllowedTargets: [] } });
    const refuse = async (url: string, message: RegExp) => {
      const error = expectError(await cp.request('POST', '/v1/webhooks', { key: admin, body: { url, event_types: ['*'] } }), 400, 'invalid_request');
      expect(error.param).toBe('url');
      expect(error.message).toMatch(message);
    };
    await refuse('http://127.0.0.1:9/hook', /must use https/);
    await refuse('https://127.0.0.1:9/hook', /loopback address/);
    await refuse('https://localhost:9/hook', /localhost resolves to .*loopback address/);
    await refuse('https://10.1.2.3/hook', /private address/);
    await refuse('https://169.254.169.254/latest/meta-data', /link-local address/);
    await refuse('https://[fd00::1]/hook', /unique local address/);
    await refuse('https://[::ffff:192.168.1.1]/hook', /private address/);
  });

  it('production: the allowed-targets setting lets a private range through', async () => {
    const { cp, admin } = await boot({ config: { mode: 'production', webhookAllowedTargets: ['10.0.0.0/8', 'localhost'] } });
    for (const url of ['https://10.1.2.3/hook', 'https://localhost:8443/hook']) {
      expect((await cp.request('POST', '/v1/webhooks', { key: admin, body: { url, event_types: ['*'] } })).status).toBe(201);
    }
  });
});
