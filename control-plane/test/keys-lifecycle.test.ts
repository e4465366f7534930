// Key creation, rotation overlap and expiry (injectable clock), revocation and the
// key.revoked event, over real HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { hashKeyValue } from '../src/keys/api-key.js';
import { KeyService, MAX_ACTIVE_KEYS_PER_ORG, MAX_ACTIVE_TEST_KEYS_PER_ORG } from '../src/keys/key-service.js';
import { ChangeFeed } from '../src/changes.js';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

const clock = new ManualClock(Date.UTC(2026, 10, 21, 12));
let cp: TestControlPlane;
let admin: string;

beforeAll(async () => {
  cp = await startControlPlane({ clock });
  admin = await cp.key({ admin: true });
});
afterAll(() => cp.close());

const models = (key: string) => cp.request('GET', '/v1/models', { key });

describe('key creation', () => {
  it('cannot multiply its per-key limits without end: an org holds at most 1,000 active keys', async () => {
    const crowded = await cp.app.services.orgs.create('many-keys-org');
    const crowdedAdmin = await cp.key({ admin: true, orgId: crowded.id });
    for (let i = 0; i < MAX_ACTIVE_KEYS_PER_ORG - 2; i++) await cp.key({ orgId: crowded.id });
    const last = await cp.request('POST', '/v1/admin/keys', { key: crowdedAdmin, body: {} });
    expect(last.status).toBe(201);
    const full = expectError(await cp.request('POST', '/v1/admin/keys', { key: crowdedAdmin, body: {} }), 400, 'invalid_request');
    expect(full).toMatchObject({ code: 'too_many_keys', message: 'an organization has at most 1000 active API keys; revoke one first' });
    // A revoked key makes room; other orgs are not affected by a full one.
    expect((await cp.request('POST', `/v1/admin/keys/${last.body.key_id}/revoke`, { key: crowdedAdmin })).status).toBe(200);
    expect((await cp.request('POST', '/v1/admin/keys', { key: crowdedAdmin, body: {} })).status).toBe(201);
    expect((await cp.request('POST', '/v1/admin/keys', { key: admin, body: {} })).status).toBe(201);
  });

  it("cannot multiply the sandbox's free tokens: an org holds at most 20 active sandbox keys, live keys unaffected", async () => {
    const org = await cp.app.services.orgs.create('many-test-keys-org');
    const orgAdmin = await cp.key({ admin: true, orgId: org.id });
    const test = () => cp.request('POST', '/v1/admin/keys', { key: orgAdmin, body: { kind: 'test' } });
    const made: string[] = [];
    for (let i = 0; i < MAX_ACTIVE_TEST_KEYS_PER_ORG; i++) {
      const res = await test();
      expect(res.status).toBe(201);
      expect(res.body.key).toMatch(/^svc_sk_test_/);
      made.push(res.body.key_id);
    }
    const full = expectError(await test(), 400, 'invalid_request');
    expect(full).toMatchObject({
      code: 'too_many_keys',
      message: 'an organization has at most 20 active sandbox keys (svc_sk_test_), which are free up to their daily tokens each; revoke one first',
    });
    // A live key is still made, and a revoked sandbox key makes room for another.
    expect((await cp.request('POST', '/v1/admin/keys', { key: orgAdmin, body: {} })).status).toBe(201);
    expect((await cp.request('POST', `/v1/admin/keys/${made[0]}/revoke`, { key: orgAdmin })).status).toBe(200);
    expect((await test()).status).toBe(201);
    expectError(await test(), 400, 'invalid_request');
  });

  it('shows the value once, stores only its SHA-256 and lists prefix + last 4', async () => {
    const res = await cp.request('POST', '/v1/admin/keys', { key: admin, body: { name: 'ci' } });
    expect(res.status).toBe(201);
    const { key, key_id, last4, prefix, scopes, masked } = res.body;
    expect(key).toMatch(/^svc_sk_live_[0-9A-Za-z]{43}$/);
    expect(prefix).toBe('svc_sk_live_');
    expect(last4).toBe(key.slice(-4));
    expect(masked).toBe(`svc_sk_live_…${last4}`);
    expect(scopes).toEqual(['inference:write', 'inference:read']);

    const list = await cp.request('GET', '/v1/admin/keys', { key: admin });
    const listed = list.body.data.find((k: { key_id: string }) => k.key_id === key_id);
    expect(listed.last4).toBe(last4);
    expect(list.text).not.toContain(key);

    const rows = cp.store.db.prepare('SELECT hash FROM api_key_secrets WHERE key_id = ?').all(key_id) as Array<{ hash: Buffer }>;
    expect(rows).toHaveLength(1);
    expect(rows[0]!.hash.equals(hashKeyValue(key))).toBe(true);
    const dump = JSON.stringify(cp.store.db.prepare('SELECT * FROM api_keys').all());
    expect(dump).not.toContain(key.slice(12));
  });

  it('gives each kind its prefix and refuses admin:write on non-admin keys', async () => {
    for (const [kind, prefix] of [['test', 'svc_sk_test_'], ['public', 'svc_pk_live_']] as const) {
      const res = await cp.request('POST', '/v1/admin/keys', { key: admin, body: { kind } });
      expect(res.body.key.startsWith(prefix)).toBe(true);
    }
    const res = await cp.request('POST', '/v1/admin/keys', { key: admin, body: { scopes: ['admin:write'] } });
    expect(expectError(res, 400, 'invalid_request').param).toBe('scopes');
    const pub = await cp.request('POST', '/v1/admin/keys', { key: admin, body: { kind: 'public', scopes: ['compute:write'] } });
    expectError(pub, 400, 'invalid_request');
  });
});

describe('a key makes no key stronger than itself', () => {
  const create = (key: string, body: unknown) => cp.request('POST', '/v1/admin/keys', { key, body });
  const rotate = (key: string, keyId: string) => cp.request('POST', `/v1/admin/keys/${keyId}/rotate`, { key, body: {} });

  it('an admin key narrowed to admin:write creates keys within its own scopes only (403 forbidden_scope naming the rest)', async () => {
    const narrow = (await create(admin, { admin: true, scopes: ['admin:write'], name: 'key-manager' })).body;
    expect(narrow.scopes).toEqual(['admin:write']);
    expectError(await cp.request('GET', '/v1/billing/balance', { key: narrow.key }), 403, 'forbidden_scope');

    const count = async () => (await cp.store.keys.list(cp.org.id)).length;
    const before = await count();
    const all = expectError(await create(narrow.key, { kind: 'live', admin: true }), 403, 'forbidden_scope');
    expect(all.message).toContain('billing:read');
    expect(all.message).toContain('compute:write');
    expect(all.param).toBe('scopes');
    const one = expectError(await create(narrow.key, { scopes: ['inference:read'] }), 403, 'forbidden_scope');
    expect(one.message).toContain('inference:read');
    expect(one.message).not.toContain('admin:write');
    expect(await count()).toBe(before);
    // Within its own scopes it still works.
    const same = await create(narrow.key, { admin: true, scopes: ['admin:write'] });
    expect(same.status).toBe(201);
    expect(same.body.scopes).toEqual(['admin:write']);
  });

  it('a sandbox admin key creates sandbox keys only: no live or public key, which real GPUs and models would bill', async () => {
    const sandbox = (await create(admin, { admin: true, kind: 'test', name: 'sandbox-admin' })).body;
    expect(sandbox.key).toMatch(/^svc_sk_test_/);
    for (const body of [{ kind: 'live', admin: true }, { kind: 'live', scopes: ['inference:read'] }, {}, { kind: 'public' }]) {
      const refused = expectError(await create(sandbox.key, body), 403, 'forbidden_scope');
      expect(refused.param).toBe('kind');
      expect(refused.message).toContain('svc_sk_test_');
    }
    const test = await create(sandbox.key, { kind: 'test', admin: true });
    expect(test.status).toBe(201);
    expect(test.body.key).toMatch(/^svc_sk_test_/);
    expectError(await cp.request('POST', '/v1/instances', { key: test.body.key, body: {} }), 403, 'forbidden_scope');
  });

  it('rotating hands over a value, so a key rotates only keys it holds at least as much as', async () => {
    const narrow = (await create(admin, { admin: true, scopes: ['admin:write'] })).body;
    const sandbox = (await create(admin, { admin: true, kind: 'test' })).body;
    const strong = (await create(admin, { admin: true })).body;
    const live = (await create(admin, { scopes: ['inference:read'] })).body;

    const refused = expectError(await rotate(narrow.key, strong.key_id), 403, 'forbidden_scope');
    expect(refused.message).toContain('billing:read');
    expect(expectError(await rotate(sandbox.key, live.key_id), 403, 'forbidden_scope').message).toContain('svc_sk_test_');
    // The refused rotations changed nothing: the old values alone still work, without expiry.
    for (const k of [strong, live]) expect((await models(k.key)).status).toBe(200);
    expect(cp.store.db.prepare('SELECT COUNT(*) AS n FROM api_key_secrets WHERE key_id IN (?, ?)').get(strong.key_id, live.key_id)).toEqual({ n: 2 });

    // Keys within the caller's power rotate as before.
    expect((await rotate(narrow.key, narrow.key_id)).status).toBe(200);
    const sandboxed = (await create(admin, { kind: 'test' })).body;
    expect((await rotate(sandbox.key, sandboxed.key_id)).status).toBe(200);
    expect((await rotate(admin, strong.key_id)).status).toBe(200);
  });
});

describe('rotation', () => {
  it('keeps both values valid for overlap_seconds, then the old one fails with 401', async () => {
    const created = await cp.request('POST', '/v1/admin/keys', { key: admin, body: {} });
    const oldValue = created.body.key;
    const rotated = await cp.request('POST', `/v1/admin/keys/${created.body.key_id}/rotate`, {
      key: admin,
      body: { overlap_seconds: 3600 },
    });
    expect(rotated.status).toBe(200);
    const newValue = rotated.body.key;
    expect(newValue).not.toBe(oldValue);
    expect(rotated.body.old_key_expires_at).toBe(new Date(clock.now() + 3600_000).toISOString());
    expect(rotated.body.last4).toBe(newValue.slice(-4));

    expect((await models(oldValue)).status).toBe(200);
    expect((await models(newValue)).status).toBe(200);
    clock.advance(3599_000);
    expect((await models(oldValue)).status).toBe(200);
    clock.advance(1_000);
    const error = expectError(await models(oldValue), 401, 'unauthorized');
    expect(error.message).toContain('rotated');
    expect((await models(newValue)).status).toBe(200);
  });

  it('defaults to a 24-hour overlap', async () => {
    const created = await cp.request('POST', '/v1/admin/keys', { key: admin, body: {} });
    const rotated = await cp.request('POST', `/v1/admin/keys/${created.body.key_id}/rotate`, { key: admin });
    expect(Date.parse(rotated.body.old_key_expires_at) - clock.now()).toBe(86_400_000);
    clock.advance(86_399_000);
    expect((await models(created.body.key)).status).toBe(200);
    clock.advance(1_000);
    expectError(await models(created.body.key), 401, 'unauthorized');
  });

  it('answers 404 not_found for an unknown key id', async () => {
    expectError(await cp.request('POST', '/v1/admin/keys/key_nope/rotate', { key: admin }), 404, 'not_found');
  });
});

describe('revocation', () => {
  it('takes effect at once, is idempotent and records a key.revoked event', async () => {
    const created = await cp.request('POST', '/v1/admin/keys', { key: admin, body: {} });
    const value = created.body.key;
    expect((await models(value)).status).toBe(200); // now cached

    const first = await cp.request('POST', `/v1/admin/keys/${created.body.key_id}/revoke`, { key: admin });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ key_id: created.body.key_id, revoked: true });
    expect(expectError(await models(value), 401, 'unauthorized').message).toContain('revoked');

    clock.advance(5_000);
    const again = await cp.request('POST', `/v1/admin/keys/${created.body.key_id}/revoke`, { key: admin });
    expect(again.status).toBe(200);
    expect(again.body.revoked_at).toBe(first.body.revoked_at);

    const events = await cp.store.events.list({ type: 'key.revoked' });
    const mine = events.filter((e) => e.subject === created.body.key_id);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.data).toEqual({
      key_id: created.body.key_id,
      prefix: 'svc_sk_live_',
      last4: value.slice(-4),
      revoked_at: first.body.revoked_at,
    });
  });

  it('made by another process (svcctl) takes effect within the key cache time', async () => {
    const created = await cp.request('POST', '/v1/admin/keys', { key: admin, body: {} });
    expect((await models(created.body.key)).status).toBe(200);
    const other = openSqliteStore(cp.dataDir);
    await new KeyService(other, clock, new ChangeFeed()).revoke(created.body.key_id);
    await other.close();
    clock.advance(2_000);
    expectError(await models(created.body.key), 401, 'unauthorized');
  });

  it('cannot touch keys of another org', async () => {
    const otherOrg = await cp.app.services.orgs.create('other-org');
    const foreign = (await cp.app.services.keys.create({ orgId: otherOrg.id })).record.id;
    expectError(await cp.request('POST', `/v1/admin/keys/${foreign}/revoke`, { key: admin }), 404, 'not_found');
  });
});
