// Every /v1 route x {missing key, wrong kind, missing scope, allowed}, over real HTTP.
// The route table is checked against the OpenAPI document so a new route cannot
// escape the matrix.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@svc/shared';
import { planFanOut } from '../src/webhooks/fan-out.js';
import { addReadyNode, expectError, startControlPlane, type TestControlPlane } from './harness.js';

interface RouteCase {
  method: string;
  path: string;
  scope: string | null;
  publicKey?: boolean;
  body?: unknown;
  /** Served by model-server replicas; none run here, so getting past the pipeline means 409 no_capacity. */
  needsReplicas?: boolean;
}

const ROUTES: RouteCase[] = [
  { method: 'GET', path: '/v1/models', scope: null, publicKey: true },
  { method: 'GET', path: '/v1/models/{model_id}', scope: null, publicKey: true },
  { method: 'POST', path: '/v1/admin/keys', scope: 'admin:write', body: {} },
  { method: 'GET', path: '/v1/admin/keys', scope: 'admin:write' },
  { method: 'POST', path: '/v1/admin/keys/{key_id}/rotate', scope: 'admin:write', body: { overlap_seconds: 60 } },
  { method: 'POST', path: '/v1/admin/keys/{key_id}/revoke', scope: 'admin:write' },
  { method: 'GET', path: '/v1/admin/org', scope: 'admin:write' },
  { method: 'PATCH', path: '/v1/admin/org', scope: 'admin:write', body: { ip_allowlist: [] } },
  { method: 'POST', path: '/v1/admin/users', scope: 'admin:write', body: { email: 'matrix@example.com', role: 'viewer' } },
  { method: 'GET', path: '/v1/admin/users', scope: 'admin:write' },
  { method: 'GET', path: '/v1/admin/users/{user_id}', scope: 'admin:write' },
  { method: 'PATCH', path: '/v1/admin/users/{user_id}', scope: 'admin:write', body: { role: 'billing' } },
  { method: 'DELETE', path: '/v1/admin/users/{user_id}', scope: 'admin:write' },
  { method: 'POST', path: '/v1/webhooks', scope: 'admin:write', body: { url: 'http://127.0.0.1:9/hook', event_types: ['*'] } },
  { method: 'GET', path: '/v1/webhooks', scope: 'admin:write' },
  { method: 'GET', path: '/v1/webhooks/{webhook_id}', scope: 'admin:write' },
  { method: 'DELETE', path: '/v1/webhooks/{webhook_id}', scope: 'admin:write' },
  { method: 'POST', path: '/v1/webhooks/{webhook_id}/rotate-secret', scope: 'admin:write', body: { overlap_seconds: 60 } },
  { method: 'GET', path: '/v1/webhooks/{webhook_id}/deliveries', scope: 'admin:write' },
  { method: 'POST', path: '/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver', scope: 'admin:write' },
  { method: 'POST', path: '/v1/instances', scope: 'compute:write', body: { sku: 'h100-80gb', gpus: 1 } },
  { method: 'GET', path: '/v1/instances', scope: 'compute:read' },
  { method: 'GET', path: '/v1/instances/{id}', scope: 'compute:read' },
  { method: 'POST', path: '/v1/instances/{id}/terminate', scope: 'compute:write' },
  { method: 'POST', path: '/v1/instances/{id}/extend', scope: 'compute:write', body: { hours: 1 } },
  { method: 'GET', path: '/v1/skus', scope: 'compute:read' },
  { method: 'GET', path: '/v1/billing/charges', scope: 'billing:read' },
  { method: 'GET', path: '/v1/billing/usage', scope: 'billing:read' },
  { method: 'GET', path: '/v1/billing/balance', scope: 'billing:read' },
  { method: 'GET', path: '/v1/billing/invoices', scope: 'billing:read' },
  { method: 'GET', path: '/v1/billing/invoices/{id}', scope: 'billing:read' },
  { method: 'GET', path: '/v1/billing/invoices/{id}/pdf', scope: 'billing:read' },
  { method: 'GET', path: '/v1/requests/{request_id}', scope: 'inference:read' },
  { method: 'POST', path: '/v1/chat/completions', scope: 'inference:write', needsReplicas: true, body: { model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'hi' }] } },
  { method: 'POST', path: '/v1/embeddings', scope: 'inference:write', publicKey: true, needsReplicas: true, body: { model: 'bge-m3', input: 'hi' } },
  { method: 'GET', path: '/v1/usage', scope: 'inference:read' },
  { method: 'POST', path: '/v1/responses', scope: 'inference:write', needsReplicas: true, body: { model: 'llama-3.1-8b-instruct', input: 'hi' } },
  { method: 'GET', path: '/v1/responses/{response_id}', scope: 'inference:read' },
  { method: 'GET', path: '/v1/responses/{response_id}/input_items', scope: 'inference:read' },
  { method: 'DELETE', path: '/v1/responses/{response_id}', scope: 'inference:write' },
];

/** Past the pipeline: a success, or for routes served by replicas, the router's 409. */
function expectAllowed(route: RouteCase, res: { status: number; text: string; body: any }): void {
  if (route.needsReplicas) {
    expect(res.status, res.text).toBe(409);
    expect(res.body.error.type).toBe('no_capacity');
    return;
  }
  expect(res.status, res.text).toBeGreaterThanOrEqual(200);
  expect(res.status, res.text).toBeLessThan(300);
}

let cp: TestControlPlane;
let publicKey: string;
let readOnlyKey: string;
/** Lacks inference:read, which readOnlyKey has. */
let computeReadKey: string;
let adminKey: string;
let testKey: string;

beforeAll(async () => {
  // The webhook rows subscribe a loopback URL, which only an operator exception allows.
  cp = await startControlPlane({ config: { webhookAllowedTargets: ['127.0.0.1'] } });
  await cp.app.services.orgs.update(cp.org.id, { referrerAllowlist: ['https://app.example.com'] });
  publicKey = await cp.key({ kind: 'public' });
  readOnlyKey = await cp.key({ scopes: ['inference:read'] });
  computeReadKey = await cp.key({ scopes: ['compute:read'] });
  adminKey = await cp.key({ admin: true });
  testKey = await cp.key({ kind: 'test' });
  await addReadyNode(cp, { gpus: 8 });
  await addReadyNode(cp, { gpus: 8 });
  // No agent runs here: the matrix tests the pipeline, so commands to nodes are just accepted.
  cp.app.services.taskDispatcher.attach(() => true);
});
afterAll(() => cp.close());

async function concretePath(path: string): Promise<string> {
  // Each call gets its own target key, so revoke and rotate always act on a live one.
  const target = (await cp.app.services.keys.create({ orgId: cp.org.id })).record.id;
  path = path.replace('{model_id}', 'bge-m3').replace('{key_id}', target);
  if (path.includes('{user_id}')) {
    // A user of its own, so a removal always finds one.
    const user = await cp.app.services.users.invite(cp.org.id, { email: `${newId('m')}@example.com`, role: 'viewer' }, null);
    path = path.replace('{user_id}', user.id);
  }
  // The current month's invoice always exists (a live draft).
  if (path.startsWith('/v1/billing/invoices/{id}')) return path.replace('{id}', 'upcoming');
  if (path.includes('{request_id}')) {
    // A served request of its own.
    const requestId = `req_${newId('m').slice(2)}`;
    await cp.store.usage.append([
      { id: newId('usage'), orgId: cp.org.id, keyId: target, requestId, kind: 'chat', model: 'llama-3.1-8b-instruct', quantization: 'fp16', pool: 'na', promptTokens: 1, completionTokens: 1, costNanos: 1, user: null, sandbox: false, createdAt: cp.clock.now() },
    ]);
    return path.replace('{request_id}', requestId);
  }
  if (path.includes('{id}')) {
    // An instance of its own: a reservation, so extend applies.
    const instance = await cp.app.services.instances.create(cp.org.id, null, { sku: 'h100-80gb', gpus: 1, duration_hours: 1 });
    return path.replace('{id}', instance.id);
  }
  if (path.includes('{response_id}')) {
    // A stored response of its own (delete removes it).
    const id = `resp_${newId('m').slice(2)}`;
    const now = cp.clock.now();
    await cp.store.responses.put({ id, orgId: cp.org.id, response: { id, object: 'response' }, history: [], createdAt: now, expiresAt: now + 60_000 });
    return path.replace('{response_id}', id);
  }
  if (!path.includes('{webhook_id}')) return path;
  // Likewise a webhook of its own (delete removes it) with one delivery to redeliver;
  // written to the store, since the matrix makes more than an org's 16.
  const id = newId('wh');
  const now = cp.clock.now();
  const subscription = await cp.store.webhooks.createSubscription(
    { id, orgId: cp.org.id, url: 'http://127.0.0.1:9/hook', eventTypes: ['*'], description: null, status: 'enabled', disabledReason: null, createdAt: now },
    { subscriptionId: id, secret: `whsec_${newId('s')}`, createdAt: now, expiresAt: null },
  );
  await cp.store.events.append({ id: newId('evt'), type: 'key.revoked', orgId: cp.org.id, subject: subscription.id, data: {}, createdAt: cp.clock.now() });
  await cp.store.webhooks.fanOut(1000, (events, subs) =>
    planFanOut(events, subs, { now: cp.clock.now(), firstDelayMs: 0, newId: () => newId('dlv') }),
  );
  const [delivery] = await cp.store.webhooks.listDeliveries(subscription.id, { limit: 1 });
  return path.replace('{webhook_id}', subscription.id).replace('{delivery_id}', delivery!.delivery.id);
}

describe('auth matrix', () => {
  it('covers every /v1 route of the OpenAPI document', async () => {
    const doc = (await cp.request('GET', '/openapi.json')).body;
    const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
      .filter(([path]) => path.startsWith('/v1/'))
      .flatMap(([path, ops]) => Object.keys(ops).filter((m) => m !== 'head').map((m) => `${m.toUpperCase()} ${path}`))
      .sort();
    expect(ROUTES.map((r) => `${r.method} ${r.path}`).sort()).toEqual(documented);
  });

  for (const route of ROUTES) {
    describe(`${route.method} ${route.path}`, () => {
      it('refuses a request without a key with 401', async () => {
        const res = await cp.request(route.method, await concretePath(route.path), { body: route.body });
        expectError(res, 401, 'unauthorized');
      });

      it('refuses a malformed Authorization header with 401', async () => {
        const res = await cp.request(route.method, await concretePath(route.path), {
          body: route.body,
          headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
        });
        expectError(res, 401, 'unauthorized');
      });

      if (route.publicKey) {
        it('allows a public key from an allowed origin', async () => {
          const res = await cp.request(route.method, await concretePath(route.path), {
            key: publicKey,
            body: route.body,
            headers: { origin: 'https://app.example.com' },
          });
          expectAllowed(route, res);
        });
      } else {
        it('refuses the wrong key kind (public key) with 403 forbidden_scope', async () => {
          const res = await cp.request(route.method, await concretePath(route.path), {
            key: publicKey,
            body: route.body,
            headers: { origin: 'https://app.example.com' },
          });
          const error = expectError(res, 403, 'forbidden_scope');
          expect(error.message).toContain('public keys');
        });
      }

      if (route.scope) {
        it(`refuses a key without ${route.scope} with 403 naming the scope`, async () => {
          const key = route.scope === 'inference:read' ? computeReadKey : readOnlyKey;
          const res = await cp.request(route.method, await concretePath(route.path), { key, body: route.body });
          const error = expectError(res, 403, 'forbidden_scope');
          expect(error.message).toContain(route.scope);
        });
      } else {
        it('allows any valid secret key, test keys included', async () => {
          for (const key of [readOnlyKey, testKey]) {
            const res = await cp.request(route.method, await concretePath(route.path), { key, body: route.body });
            expect(res.status).toBe(200);
          }
        });
      }

      it('allows a key with the scope', async () => {
        const res = await cp.request(route.method, await concretePath(route.path), { key: adminKey, body: route.body });
        expectAllowed(route, res);
      });
    });
  }
});
