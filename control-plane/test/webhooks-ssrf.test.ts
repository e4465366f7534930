// Webhook SSRF at send time: a host name that resolved to a public address when the
// subscription was made and to loopback or cloud metadata later (DNS rebinding) is
// refused when the delivery connects, and the delivery's attempt records why. The DNS
// is a resolver injected into the app; the loopback receiver is real, so a send that
// got through would be seen.
import type { LookupAddress } from 'node:dns';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from './harness.js';
import { WebhookReceiver, until } from './webhooks-support.js';

/** What each name resolves to now; tests change it between subscription and send. */
const zone = new Map<string, string[]>();
const resolver = async (host: string): Promise<LookupAddress[]> => {
  const addresses = zone.get(host);
  if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

let cp: TestControlPlane;
let admin: string;
let receiver: WebhookReceiver;

beforeAll(async () => {
  cp = await startControlPlane({ config: { webhookPollMs: 20 }, webhookResolver: resolver });
  admin = await cp.key({ admin: true });
  receiver = await WebhookReceiver.start();
});
afterAll(async () => {
  await cp.close();
  await receiver.stop();
});

async function subscribe(host: string): Promise<string> {
  const res = await cp.request('POST', '/v1/webhooks', { key: admin, body: { url: `http://${host}:${receiver.port}/hook`, event_types: ['key.revoked'] } });
  expect(res.status).toBe(201);
  return res.body.id;
}

async function revokeAKey(): Promise<void> {
  const target = (await cp.app.services.keys.create({ orgId: cp.org.id })).record.id;
  expect((await cp.request('POST', `/v1/admin/keys/${target}/revoke`, { key: admin, body: {} })).status).toBe(200);
}

async function firstAttempt(webhookId: string): Promise<{ status_code: number | null; error: string | null }> {
  let attempt: { status_code: number | null; error: string | null } | undefined;
  await until(`the first delivery attempt of ${webhookId}`, async () => {
    const deliveries = (await cp.request('GET', `/v1/webhooks/${webhookId}/deliveries`, { key: admin })).body.data as Array<{ attempts: any[] }>;
    attempt = deliveries[0]?.attempts[0];
    return attempt !== undefined;
  });
  return attempt!;
}

describe('webhook targets are checked at every send (DNS rebinding)', () => {
  it.each([
    ['loopback', 'rebind-loopback.example.com', '127.0.0.1', /^blocked: rebind-loopback\.example\.com resolves to an address that is a loopback address/],
    ['cloud metadata', 'rebind-metadata.example.com', '169.254.169.254', /^blocked: rebind-metadata\.example\.com resolves to an address that is a link-local address/],
  ])('a name that rebinds to %s after subscribing is refused when the delivery connects', async (_name, host, rebound, why) => {
    zone.set(host, ['93.184.216.34']);
    const webhookId = await subscribe(host);
    zone.set(host, [rebound]);
    const before = receiver.requests.length;
    await revokeAKey();
    const attempt = await firstAttempt(webhookId);
    expect(attempt.status_code).toBeNull();
    expect(attempt.error).toMatch(why);
    expect(receiver.requests.length).toBe(before);
  });
});
