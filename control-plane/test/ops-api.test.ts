// The operator API (/ops/v1) over real HTTP: every route of the OpenAPI document x {no key,
// each customer key, operator:read, operator:write}; then what an attacker with a paid
// account tries: customer keys of every scope, prefix confusion, a read key on writes,
// revoked keys, and whether the key check leaks anything through what it looks up.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES, type Scope } from '../src/keys/scopes.js';
import { OperatorKeyService } from '../src/operators/operator-key-service.js';
import type { OperatorStore } from '../src/store/operator-store.js';
import { addReadyNode, expectError, startControlPlane, type TestControlPlane } from './harness.js';

interface OpsRoute {
  method: string;
  path: string;
  write: boolean;
}

let cp: TestControlPlane;
let routes: OpsRoute[];
let readKey: string;
let writeKey: string;
let writeKeyId: string;
const customerKeys: Array<{ label: string; value: string }> = [];

beforeAll(async () => {
  cp = await startControlPlane();
  const operators = new OperatorKeyService(cp.store.operators, cp.clock);
  readKey = (await operators.create({ scopes: ['operator:read'], name: 'read', createdBy: 'local' })).value;
  const write = await operators.create({ scopes: ['operator:write'], name: 'write', createdBy: 'local' });
  writeKey = write.value;
  writeKeyId = write.record.id;
  for (const scope of SCOPES) customerKeys.push({ label: `live ${scope}`, value: await cp.key({ scopes: [scope], admin: scope === 'admin:write' }) });
  customerKeys.push({ label: 'admin with every scope', value: await cp.key({ admin: true }) });
  customerKeys.push({ label: 'test (sandbox)', value: await cp.key({ kind: 'test', scopes: ['inference:write', 'compute:read'] as Scope[] }) });
  customerKeys.push({ label: 'public', value: await cp.key({ kind: 'public' }) });

  const doc = (await cp.request('GET', '/openapi.json')).body;
  routes = Object.entries(doc.paths as Record<string, Record<string, { tags?: string[]; operationId?: string }>>)
    .filter(([path]) => path.startsWith('/ops/v1/'))
    .flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([m]) => m !== 'head')
        .map(([m]) => ({ method: m.toUpperCase(), path, write: m !== 'get' })),
    );
  await addReadyNode(cp, { gpus: 2 });
});
afterAll(() => cp?.close());

/** Path parameters filled with ids that name nothing: auth is decided before any lookup. */
const concrete = (path: string): string => path.replace(/\{[^}]+\}/g, 'nothing_here');
const send = (route: OpsRoute, key?: string) =>
  cp.request(route.method, concrete(route.path) + (route.path.endsWith('/free-gpus') ? '?model=x' : ''), { key, body: route.method === 'GET' || route.method === 'DELETE' ? undefined : {} });

describe('the operator API in the OpenAPI document', () => {
  it('has every operator route, each with an operationId, a summary and the operator tag', async () => {
    const doc = (await cp.request('GET', '/openapi.json')).body;
    expect(routes.length).toBeGreaterThanOrEqual(30);
    for (const [path, ops] of Object.entries<Record<string, { operationId?: string; summary?: string; tags?: string[] }>>(doc.paths)) {
      if (!path.startsWith('/ops/v1/')) continue;
      for (const op of Object.values(ops)) {
        expect(op.operationId, path).toMatch(/^[a-z][A-Za-z]+$/);
        expect(op.summary, path).toBeTruthy();
        expect(op.tags).toEqual(['operator']);
      }
    }
    const ids = routes.map((r) => (doc.paths[r.path][r.method.toLowerCase()] as { operationId: string }).operationId);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('auth matrix: every /ops/v1 route', () => {
  it('answers 401 without a key and with a malformed or unknown one', async () => {
    for (const route of routes) {
      expectError(await send(route), 401, 'unauthorized');
      expectError(await send(route, 'svcop_short'), 401, 'unauthorized');
      expectError(await send(route, `svcop_${'A'.repeat(43)}`), 401, 'unauthorized');
    }
  });

  it('answers 403 to every customer key, whatever its kind and scopes', async () => {
    for (const route of routes) {
      for (const key of customerKeys) {
        const error = expectError(await send(route, key.value), 403, 'forbidden_scope');
        expect(error.message, `${key.label} on ${route.method} ${route.path}`).toMatch(/customer API keys cannot call the operator API/);
      }
    }
  });

  it('lets operator:read read and refuses it every write with 403', async () => {
    for (const route of routes) {
      const res = await send(route, readKey);
      if (route.write) {
        expect(expectError(res, 403, 'forbidden_scope').message).toContain('operator:write');
      } else {
        expect([200, 404], `${route.path}: ${res.text}`).toContain(res.status);
        if (!route.path.includes('{')) expect(res.status, `${route.path}: ${res.text}`).toBe(200);
      }
    }
  });

  it('lets operator:write call every route (its answers are about the request, not the key)', async () => {
    for (const route of routes) {
      const res = await send(route, writeKey);
      expect([200, 201, 400, 404], `${route.method} ${route.path}: ${res.text}`).toContain(res.status);
      if (res.status >= 400) expect(res.body.error.type).not.toMatch(/unauthorized|forbidden_scope/);
    }
  });
});

describe('what a tenant with a paid account tries', () => {
  it('cannot tell a valid customer key from a made-up one on the operator API', async () => {
    const real = await send({ method: 'GET', path: '/ops/v1/nodes', write: false }, customerKeys[0]!.value);
    const fake = await send({ method: 'GET', path: '/ops/v1/nodes', write: false }, `svc_sk_live_${'x'.repeat(43)}`);
    expect(fake.status).toBe(real.status);
    expect(fake.body.error.message).toBe(real.body.error.message);
  });

  it('gets nowhere by dressing a customer key as an operator key, or the reverse', async () => {
    const customer = customerKeys.find((k) => k.label === 'admin with every scope')!.value;
    const operatorSecret = writeKey.slice('svcop_'.length);
    const attempts = [
      `svcop_${customer.slice('svc_sk_live_'.length)}`,
      `svc_sk_live_${operatorSecret}`,
      `SVCOP_${operatorSecret}`,
      `svcop_${operatorSecret.slice(0, -1)}${operatorSecret.endsWith('a') ? 'b' : 'a'}`,
      `svcop_svcop_${operatorSecret}`,
      `${writeKey}x`,
    ];
    for (const value of attempts) {
      const res = await cp.request('GET', '/ops/v1/nodes', { key: value });
      expect([401, 403], value).toContain(res.status);
    }
    // An operator key on the customer API is refused, and says where it belongs.
    const onV1 = await cp.request('GET', '/v1/models', { key: writeKey });
    expect(expectError(onV1, 401, 'unauthorized').message).toMatch(/operator API \(\/ops\/v1\) only/);
  });

  it('cannot mint operator keys with a read key, and a revoked key stops at once', async () => {
    expectError(await cp.request('POST', '/ops/v1/operator-keys', { key: readKey, body: { scopes: ['operator:write'] } }), 403, 'forbidden_scope');
    const made = await cp.request('POST', '/ops/v1/operator-keys', { key: writeKey, body: { scopes: ['operator:read'], name: 'short-lived' } });
    expect(made.status).toBe(201);
    expect(made.body.key).toMatch(/^svcop_[0-9A-Za-z]{43}$/);
    expect((await cp.request('GET', '/ops/v1/nodes', { key: made.body.key })).status).toBe(200);
    expect((await cp.request('POST', `/ops/v1/operator-keys/${made.body.id}/revoke`, { key: writeKey, body: {} })).status).toBe(200);
    expect(expectError(await cp.request('GET', '/ops/v1/nodes', { key: made.body.key }), 401, 'unauthorized').message).toMatch(/revoked/);
    // Listing never shows a value.
    const listed = await cp.request('GET', '/ops/v1/operator-keys', { key: readKey });
    expect(listed.text).not.toContain(made.body.key);
    expect(listed.text).not.toContain(writeKey);
  });

  it('looks keys up only by their SHA-256 digest and answers a near miss like a random guess', async () => {
    const asked: unknown[] = [];
    const spy: OperatorStore = {
      ...cp.store.operators,
      findKeyByHash: (hash: Buffer) => {
        asked.push(hash);
        return cp.store.operators.findKeyByHash(hash);
      },
    } as OperatorStore;
    const service = new OperatorKeyService(spy, cp.clock);
    const nearMiss = `${writeKey.slice(0, -1)}${writeKey.endsWith('Z') ? 'Y' : 'Z'}`;
    const random = `svcop_${'Q'.repeat(43)}`;
    expect(await service.verify(nearMiss)).toEqual(await service.verify(random));
    expect((await service.verify(writeKey)).ok).toBe(true);
    expect(asked).toEqual([nearMiss, random, writeKey].map((v) => createHash('sha256').update(v).digest()));
    // What is stored is the digest, never the value.
    const row = cp.store.db.prepare('SELECT * FROM operator_keys WHERE id = ?').get(writeKeyId) as Record<string, unknown>;
    expect(JSON.stringify(row)).not.toContain(writeKey.slice(6));
  });
});

describe('operator writes', () => {
  it('act across orgs and each appends an audit entry naming the operator key', async () => {
    const org = await cp.request('POST', '/ops/v1/orgs', { key: writeKey, body: { name: 'acme', tier: 3 } });
    expect(org.status).toBe(201);
    const key = await cp.request('POST', '/ops/v1/keys', { key: writeKey, body: { org: 'acme', scopes: ['compute:read'] } });
    expect(key.status).toBe(201);
    expect(key.body.org_id).toBe(org.body.id);
    const node = (await cp.request('GET', '/ops/v1/nodes', { key: readKey })).body.data[0];
    const cordoned = await cp.request('POST', `/ops/v1/nodes/${node.id}/cordon`, { key: writeKey, body: {} });
    expect(cordoned.body).toMatchObject({ cordoned: true, schedulable: false });
    // The node's GPUs are gone from what a customer can place on.
    const skus = await cp.request('GET', '/v1/skus', { key: key.body.key });
    expect(skus.body.data.find((s: { id: string }) => s.id === 'h100-80gb').pools.every((p: { free_gpus: number }) => p.free_gpus === 0)).toBe(true);

    const audit = (await cp.request('GET', '/ops/v1/audit?limit=10', { key: readKey })).body.data as Array<{ actor: string; action: string; target: string }>;
    expect(audit.slice(0, 3).map((e) => [e.actor, e.action])).toEqual([
      [writeKeyId, 'cordonNode'],
      [writeKeyId, 'createKey'],
      [writeKeyId, 'createOrg'],
    ]);
    expect(audit[0]!.target).toBe(node.id);
    // Reads leave no trace, and the audit trail never reaches customers' webhooks.
    expect(audit.some((e) => e.action.startsWith('list') || e.action.startsWith('get'))).toBe(false);
    const events = await cp.store.events.list({ limit: 1000 });
    expect(events.some((e) => e.type.startsWith('operator'))).toBe(false);
  });

  it('refuses bad input with the envelope and a param', async () => {
    const bad = await cp.request('PATCH', '/ops/v1/orgs/acme', { key: writeKey, body: { tier: 7 } });
    expectError(bad, 400, 'invalid_request');
    for (const quota of [-1, 1.5, '8']) {
      expect(expectError(await cp.request('PATCH', '/ops/v1/orgs/acme', { key: writeKey, body: { gpu_quota: quota } }), 400, 'invalid_request').message).toContain('gpu_quota');
    }
    expect((await cp.request('PATCH', '/ops/v1/orgs/acme', { key: writeKey, body: { gpu_quota: 0 } })).body.gpu_quota).toBe(0);
    expect((await cp.request('PATCH', '/ops/v1/orgs/acme', { key: writeKey, body: { gpu_quota: null } })).body.gpu_quota).toBeNull();
    const unknown = await cp.request('POST', '/ops/v1/operator-keys', { key: writeKey, body: { scopes: ['admin:write'] } });
    expectError(unknown, 400, 'invalid_request');
    expectError(await cp.request('GET', '/ops/v1/instances?status=exploded', { key: readKey }), 400, 'invalid_request');
    expectError(await cp.request('GET', '/ops/v1/nodes/nope', { key: readKey }), 404, 'not_found');
  });
});
