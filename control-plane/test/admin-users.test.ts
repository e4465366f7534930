// Users of an org and the org settings a customer owns, over real HTTP on real SQLite:
// invites, roles that cap key scopes, removal that revokes a user's keys at once, and
// what another org's admin or a non-admin key can reach.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addReadyNode, expectError, startControlPlane, type TestControlPlane } from './harness.js';
import type { Scope } from '../src/keys/scopes.js';
import type { Store } from '../src/store/store.js';
import { MAX_USERS_PER_ORG } from '../src/users/user-service.js';
import { WebhookReceiver, until } from './webhooks-support.js';

let cp: TestControlPlane;
let admin: string;
let otherOrgId: string;
let otherAdmin: string;
let receiver: WebhookReceiver | undefined;

beforeAll(async () => {
  // The webhook receiver listens on loopback, which only an operator exception allows.
  cp = await startControlPlane({ config: { webhookAllowedTargets: ['127.0.0.1'] } });
  admin = await cp.key({ admin: true });
  const other = await cp.app.services.orgs.create('other-org');
  otherOrgId = other.id;
  otherAdmin = await cp.key({ admin: true, orgId: other.id });
});
afterAll(async () => {
  await cp.close();
  await receiver?.stop();
});

const as = (key: string) => ({
  invite: (body: unknown) => cp.request('POST', '/v1/admin/users', { key, body }),
  list: () => cp.request('GET', '/v1/admin/users', { key }),
  get: (id: string) => cp.request('GET', `/v1/admin/users/${id}`, { key }),
  setRole: (id: string, role: string) => cp.request('PATCH', `/v1/admin/users/${id}`, { key, body: { role } }),
  remove: (id: string) => cp.request('DELETE', `/v1/admin/users/${id}`, { key }),
  createKey: (body: unknown) => cp.request('POST', '/v1/admin/keys', { key, body }),
  setOrg: (body: unknown) => cp.request('PATCH', '/v1/admin/org', { key, body }),
});
const a = () => as(admin);
const eventsOf = async (type: string) => (await cp.store.events.list({ type, limit: 1000 })).filter((e) => e.orgId === cp.org.id);

describe('users', () => {
  it('invites by email with a role: stored lower-case, status invited, a user.invited event for the provider to mail', async () => {
    const res = await a().invite({ email: '  Ada.Lovelace@Example.COM ', role: 'developer' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ object: 'user', email: 'ada.lovelace@example.com', role: 'developer', status: 'invited', org_id: cp.org.id });
    expect(res.body.id).toMatch(/^user_/);
    const invited = (await eventsOf('user.invited')).find((e) => e.subject === res.body.id);
    expect(invited?.data).toMatchObject({ email: 'ada.lovelace@example.com', role: 'developer' });

    expect((await a().get(res.body.id)).body).toEqual(res.body);
    expect((await a().list()).body.data.map((u: { id: string }) => u.id)).toContain(res.body.id);
  });

  it('answers 409 for an email already in the org, whatever its case, and lets another org use it', async () => {
    expect((await a().invite({ email: 'grace@example.com', role: 'viewer' })).status).toBe(201);
    const dup = expectError(await a().invite({ email: 'GRACE@example.com', role: 'admin' }), 409, 'conflict');
    expect(dup.param).toBe('email');
    expect((await as(otherAdmin).invite({ email: 'grace@example.com', role: 'viewer' })).status).toBe(201);
  });

  it.each([
    [{ email: 'not-an-email', role: 'viewer' }, 'email'],
    [{ email: 'a@b', role: 'viewer' }, 'email'],
    [{ email: 'two@@example.com', role: 'viewer' }, 'email'],
    [{ email: `${'x'.repeat(300)}@example.com`, role: 'viewer' }, 'email'],
    [{ email: 'ok@example.com', role: 'owner' }, 'role'],
    [{ email: 'ok@example.com' }, 'role'],
    [{ email: 'ok@example.com', role: 'viewer', scopes: ['admin:write'] }, 'scopes'],
  ])('refuses %j with 400 naming %s', async (body, param) => {
    expect(expectError(await a().invite(body), 400, 'invalid_request').param).toBe(param);
  });

  it("keys belong to a user: scopes default to the role's, and a scope outside the role is refused", async () => {
    const dev = (await a().invite({ email: 'dev@example.com', role: 'developer' })).body;
    const key = await a().createKey({ user_id: dev.id });
    expect(key.status).toBe(201);
    expect(key.body).toMatchObject({ user_id: dev.id, admin: false });
    expect([...key.body.scopes].sort()).toEqual(['compute:read', 'compute:write', 'inference:read', 'inference:write']);
    const listed = (await cp.request('GET', '/v1/admin/keys', { key: admin })).body.data.find((k: { key_id: string }) => k.key_id === key.body.key_id);
    expect(listed.user_id).toBe(dev.id);

    const outside = expectError(await a().createKey({ user_id: dev.id, scopes: ['inference:write', 'billing:read'] }), 400, 'invalid_request');
    expect(outside).toMatchObject({ param: 'scopes' });
    expect(outside.message).toContain('billing:read');
    expect(expectError(await a().createKey({ user_id: dev.id, admin: true }), 400, 'invalid_request').param).toBe('admin');

    const billing = (await a().invite({ email: 'books@example.com', role: 'billing' })).body;
    const books = await a().createKey({ user_id: billing.id });
    expect(books.body.scopes).toEqual(['billing:read']);
    // A billing user's key reads the balance and cannot call a model.
    expect((await cp.request('GET', '/v1/billing/balance', { key: books.body.key })).status).toBe(200);
    const call = await cp.request('POST', '/v1/chat/completions', { key: books.body.key, body: { model: 'tiny-chat', messages: [{ role: 'user', content: 'hi' }] } });
    expect(expectError(call, 403, 'forbidden_scope').message).toContain('inference:write');

    const boss = (await a().invite({ email: 'boss@example.com', role: 'admin' })).body;
    const bossKey = await a().createKey({ user_id: boss.id, admin: true });
    expect(bossKey.body.scopes).toContain('admin:write');
  });

  it("changes a role; a narrower one is refused while the user's live keys need more", async () => {
    const user = (await a().invite({ email: 'mover@example.com', role: 'developer' })).body;
    const key = (await a().createKey({ user_id: user.id, scopes: ['compute:write'] })).body;
    const refused = expectError(await a().setRole(user.id, 'viewer'), 400, 'invalid_request');
    expect(refused.param).toBe('role');
    expect(refused.message).toContain(key.key_id);
    expect((await a().get(user.id)).body.role).toBe('developer');
    expect((await a().setRole(user.id, 'admin')).body.role).toBe('admin');
    await cp.request('POST', `/v1/admin/keys/${key.key_id}/revoke`, { key: admin, body: {} });
    expect((await a().setRole(user.id, 'billing')).body).toMatchObject({ id: user.id, role: 'billing' });
    expect(expectError(await a().setRole(user.id, 'root'), 400, 'invalid_request').param).toBe('role');
    expectError(await as(otherAdmin).setRole(user.id, 'admin'), 404, 'not_found');
    expect((await a().get(user.id)).body.role).toBe('billing');
  });

  it('removing a user revokes every key it owns at once, each with a key.revoked event; org keys live on', async () => {
    const user = (await a().invite({ email: 'leaver@example.com', role: 'developer' })).body;
    const k1 = (await a().createKey({ user_id: user.id })).body;
    const k2 = (await a().createKey({ user_id: user.id, scopes: ['inference:read'] })).body;
    const orgKey = (await a().createKey({})).body;
    for (const k of [k1, k2]) expect((await cp.request('GET', '/v1/models', { key: k.key })).status).toBe(200);

    const removed = await a().remove(user.id);
    expect(removed.status).toBe(200);
    expect(removed.body).toMatchObject({ id: user.id, object: 'user', deleted: true });
    expect([...removed.body.revoked_key_ids].sort()).toEqual([k1.key_id, k2.key_id].sort());

    for (const k of [k1, k2]) expectError(await cp.request('GET', '/v1/models', { key: k.key }), 401, 'unauthorized');
    expect((await cp.request('GET', '/v1/models', { key: orgKey.key })).status).toBe(200);
    const revokedEvents = (await eventsOf('key.revoked')).filter((e) => (e.data as { user_id?: string }).user_id === user.id).map((e) => e.subject);
    expect(revokedEvents.sort()).toEqual([k1.key_id, k2.key_id].sort());
    expect((await eventsOf('user.removed')).map((e) => e.subject)).toContain(user.id);

    expectError(await a().get(user.id), 404, 'not_found');
    expectError(await a().remove(user.id), 404, 'not_found');
    // The revoked keys still name their (former) owner; no new key can be made for it.
    const listed = (await cp.request('GET', '/v1/admin/keys', { key: admin })).body.data.find((k: { key_id: string }) => k.key_id === k1.key_id);
    expect(listed).toMatchObject({ revoked: true, user_id: user.id });
    expect(expectError(await a().createKey({ user_id: user.id }), 400, 'invalid_request').param).toBe('user_id');
    // The email is free again.
    expect((await a().invite({ email: 'leaver@example.com', role: 'viewer' })).status).toBe(201);
  });
});

describe('webhooks', () => {
  it("delivers user.invited (the provider's cue to send the email), then key.revoked and user.removed, signed", async () => {
    receiver = await WebhookReceiver.start();
    const hook = await cp.request('POST', '/v1/webhooks', { key: admin, body: { url: receiver.url, event_types: ['user.invited', 'user.removed', 'key.revoked'] } });
    expect(hook.status).toBe(201);
    receiver.secrets = [hook.body.secret];
    const user = (await a().invite({ email: 'Hooked@Example.com', role: 'viewer' })).body;
    const key = (await a().createKey({ user_id: user.id })).body;
    await a().remove(user.id);
    const mine = () => receiver!.requests.filter((r) => r.event.data.id === user.id || r.event.data.user_id === user.id);
    await until('three deliveries', () => mine().length >= 3);
    // Deliveries of different subjects may overlap: their arrival order is not asserted.
    const byType = new Map(mine().map((r) => [r.event.type, r]));
    expect([...byType.keys()].sort()).toEqual(['key.revoked', 'user.invited', 'user.removed']);
    expect(mine()).toHaveLength(3);
    expect(mine().every((r) => r.verifiedWith.length === 1)).toBe(true);
    expect(byType.get('user.invited')!.event.data).toMatchObject({ email: 'hooked@example.com', role: 'viewer', status: 'invited', org_id: cp.org.id });
    expect(byType.get('key.revoked')!.event.data).toMatchObject({ key_id: key.key_id, user_id: user.id });
  });
});

describe('what an attacker can reach', () => {
  it("another org's admin gets 404 for this org's user and cannot remove it or attach keys to it", async () => {
    const mine = (await a().invite({ email: 'mine@example.com', role: 'developer' })).body;
    const mineKey = (await a().createKey({ user_id: mine.id })).body;
    const intruder = as(otherAdmin);
    expectError(await intruder.get(mine.id), 404, 'not_found');
    expectError(await intruder.remove(mine.id), 404, 'not_found');
    expect(expectError(await intruder.createKey({ user_id: mine.id }), 400, 'invalid_request').param).toBe('user_id');
    expect((await intruder.list()).body.data.map((u: { id: string }) => u.id)).not.toContain(mine.id);
    // Nothing changed for the victim.
    expect((await a().get(mine.id)).status).toBe(200);
    expect((await cp.request('GET', '/v1/models', { key: mineKey.key })).status).toBe(200);
    const theirs = (await intruder.invite({ email: 'theirs@example.com', role: 'admin' })).body;
    expect(theirs.org_id).toBe(otherOrgId);
    expectError(await a().get(theirs.id), 404, 'not_found');
  });

  it("a user's admin key makes keys for that user only, so none it makes outlives the user", async () => {
    const leaver = (await a().invite({ email: 'leaver-admin@example.com', role: 'admin' })).body;
    const colleague = (await a().invite({ email: 'colleague@example.com', role: 'admin' })).body;
    const userKey = (await a().createKey({ user_id: leaver.id, admin: true })).body;
    const theirs = as(userKey.key);

    // Without user_id the key is the caller's user's, with the same checks as an explicit one.
    const minted = await theirs.createKey({ admin: true, name: 'ci' });
    expect(minted.status).toBe(201);
    expect(minted.body).toMatchObject({ admin: true, user_id: leaver.id });
    expect((await theirs.createKey({ user_id: leaver.id, scopes: ['inference:read'] })).body.user_id).toBe(leaver.id);
    // Another user's key, or one of the org itself, is refused: its value would outlive this user.
    const other = expectError(await theirs.createKey({ user_id: colleague.id, admin: true }), 403, 'forbidden_scope');
    expect(other).toMatchObject({ param: 'user_id' });
    expect(other.message).toContain(leaver.id);
    expect(expectError(await theirs.createKey({ user_id: null, admin: true }), 400, 'invalid_request').param).toBe('user_id');
    // Rotating hands over a value too: only the user's own keys.
    const orgKey = (await a().createKey({})).body;
    const colleagueKey = (await a().createKey({ user_id: colleague.id, scopes: ['inference:read'] })).body;
    for (const keyId of [orgKey.key_id, colleagueKey.key_id]) {
      const refused = cp.request('POST', `/v1/admin/keys/${keyId}/rotate`, { key: userKey.key, body: {} });
      expect(expectError(await refused, 403, 'forbidden_scope').message).toContain(leaver.id);
    }
    expect((await cp.request('POST', `/v1/admin/keys/${minted.body.key_id}/rotate`, { key: userKey.key, body: {} })).status).toBe(200);
    // The org's own admin key still makes keys for any user, and for the org.
    expect((await a().createKey({ user_id: colleague.id, admin: true })).body.user_id).toBe(colleague.id);
    expect((await a().createKey({ admin: true })).body.user_id).toBeNull();

    const removed = await a().remove(leaver.id);
    expect(removed.body.revoked_key_ids).toContain(minted.body.key_id);
    for (const key of [userKey.key, minted.body.key]) expectError(await as(key).list(), 401, 'unauthorized');
  });

  it('cannot fill the database with invites: an org holds at most 1,000 users', async () => {
    const crowded = await cp.app.services.orgs.create('crowded-org');
    const crowdedAdmin = await cp.key({ admin: true, orgId: crowded.id });
    const insert = cp.store.db.prepare("INSERT INTO org_users (id, org_id, email, role, status, invited_by, created_at) VALUES (?, ?, ?, 'viewer', 'invited', NULL, 1)");
    cp.store.db.transaction(() => {
      for (let i = 0; i < MAX_USERS_PER_ORG - 1; i++) insert.run(`user_fill_${i}`, crowded.id, `u${i}@example.com`);
    })();
    expect((await as(crowdedAdmin).invite({ email: 'last@example.com', role: 'viewer' })).status).toBe(201);
    const full = expectError(await as(crowdedAdmin).invite({ email: 'one-more@example.com', role: 'viewer' }), 400, 'invalid_request');
    expect(full.code).toBe('too_many_users');
    expect((await as(crowdedAdmin).list()).body.data).toHaveLength(MAX_USERS_PER_ORG);
    // Other orgs are not affected by a full one.
    expect((await a().invite({ email: 'still-room@example.com', role: 'viewer' })).status).toBe(201);
  });

  it('a key without admin:write gets 403 on every users route, a user key included', async () => {
    const dev = (await a().invite({ email: 'dev2@example.com', role: 'developer' })).body;
    const devKey = (await a().createKey({ user_id: dev.id })).body.key as string;
    const every: Scope[] = ['inference:write', 'inference:read', 'compute:write', 'compute:read', 'billing:read'];
    const broad = await cp.key({ scopes: every });
    for (const key of [devKey, broad]) {
      const who = as(key);
      for (const res of [
        await who.invite({ email: 'x@example.com', role: 'admin' }),
        await who.list(),
        await who.get(dev.id),
        await who.setRole(dev.id, 'admin'),
        await who.remove(dev.id),
        await who.createKey({ user_id: dev.id, admin: true }),
        await who.setOrg({ name: 'stolen' }),
      ]) {
        expect(expectError(res, 403, 'forbidden_scope').message).toContain('admin:write');
      }
    }
    expect((await a().get(dev.id)).status).toBe(200);
  });
});

describe('org settings', () => {
  it('renames the org: validated, and 409 when another org has the name', async () => {
    const renamed = await a().setOrg({ name: 'acme-labs' });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ id: cp.org.id, name: 'acme-labs' });
    expect((await cp.request('GET', '/v1/admin/org', { key: admin })).body.name).toBe('acme-labs');
    expect(expectError(await a().setOrg({ name: 'other-org' }), 409, 'conflict').param).toBe('name');
    expect(expectError(await a().setOrg({ name: 'Acme Labs!' }), 400, 'invalid_request').param).toBe('name');
    expect((await a().setOrg({ name: 'acme-labs' })).status).toBe(200);
  });

  it.each(['tier', 'credit_limit', 'billing_mode', 'allowed_models', 'gpu_quota'])('refuses %s with 400 naming it: the provider sets it', async (field) => {
    const before = (await cp.request('GET', '/v1/admin/org', { key: admin })).body;
    const value = field === 'tier' ? 3 : field === 'allowed_models' ? ['llama-3.1-8b-instruct'] : field === 'billing_mode' ? 'postpaid' : 1_000_000;
    const error = expectError(await a().setOrg({ [field]: value, name: 'sneaky' }), 400, 'invalid_request');
    expect(error.param).toBe(field);
    expect(error.message).toContain('provider');
    expect((await cp.request('GET', '/v1/admin/org', { key: admin })).body).toEqual(before);
  });

  it('sets the low-balance alert in USD, shown on the balance; null turns it off, and a bad amount is refused', async () => {
    const set = await a().setOrg({ low_balance_threshold: 12.5 });
    expect(set.body.low_balance_threshold).toBe(12.5);
    const balance = await cp.request('GET', '/v1/billing/balance', { key: admin });
    expect(balance.body.low_balance_threshold).toBe(12.5);
    expect((await a().setOrg({ low_balance_threshold: null })).body.low_balance_threshold).toBeNull();
    for (const bad of [-1, 1e12, 0.0000000001, '5']) {
      expect(expectError(await a().setOrg({ low_balance_threshold: bad }), 400, 'invalid_request').param).toBe('low_balance_threshold');
    }
    expect((await cp.request('GET', '/v1/billing/balance', { key: admin })).body.low_balance_threshold).toBeNull();
  });

  it('places an instance that names no pool in the default pool; an explicit pool still wins', async () => {
    await addReadyNode(cp, { pool: 'na', gpus: 8 });
    await addReadyNode(cp, { pool: 'eu', gpus: 8 });
    cp.app.services.taskDispatcher.attach(() => true);
    const compute = await cp.key({ scopes: ['compute:write', 'compute:read'] });
    const create = (body: unknown) => cp.request('POST', '/v1/instances', { key: compute, body });

    expect(expectError(await a().setOrg({ default_pool: 'mars' }), 400, 'invalid_request').param).toBe('default_pool');
    const set = await a().setOrg({ default_pool: 'eu' });
    expect(set.body.default_pool).toBe('eu');
    expect((await create({ sku: 'h100-80gb', gpus: 1 })).body.pool).toBe('eu');
    expect((await create({ sku: 'h100-80gb', gpus: 1, pool: 'na' })).body.pool).toBe('na');

    await a().setOrg({ default_pool: null });
    expect((await cp.request('GET', '/v1/admin/org', { key: admin })).body.default_pool).toBeNull();
  });

  it('routes a chat completion that sends no X-Service-Pool to the default pool', async () => {
    const live = await cp.key();
    const chat = () =>
      cp.request('POST', '/v1/chat/completions', { key: live, body: { model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'hi' }] } });
    await a().setOrg({ default_pool: 'apac' });
    const pinned = await chat();
    await a().setOrg({ default_pool: null });
    const header = await cp.request('POST', '/v1/chat/completions', {
      key: live,
      headers: { 'x-service-pool': 'apac' },
      body: { model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'hi' }] },
    });
    // No replicas run here: the router's refusal names the pool it was held to, as with the header.
    expect(pinned.status).toBe(header.status);
    expect(pinned.body.error.message).toBe(header.body.error.message);
    expect(pinned.body.error.message).toContain('apac');
    const unpinned = await chat();
    expect(unpinned.body.error.message).not.toContain('apac');
  });
});

describe('on PostgreSQL, a role change racing a key create', () => {
  let pg: TestControlPlane<Store> | undefined;
  afterAll(async () => {
    await pg?.close();
  });

  it('never leaves a viewer owning an admin key: the create or the role change is refused', async () => {
    pg = await startControlPlane({ engine: 'postgres' });
    const owner = await pg.key({ admin: true });
    const call = (method: string, path: string, body: unknown) => pg!.request(method, path, { key: owner, body });
    const outcomes = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      const user = (await call('POST', '/v1/admin/users', { email: `racer${i}@example.com`, role: 'admin' })).body;
      const [made, demoted] = await Promise.all([
        call('POST', '/v1/admin/keys', { user_id: user.id, admin: true }),
        new Promise((r) => setTimeout(r, (i % 10) * 0.25)).then(() => call('PATCH', `/v1/admin/users/${user.id}`, { role: 'viewer' })),
      ]);
      const outcome = `${made.status}/${demoted.status}`;
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      expect(['201/400', '400/200']).toContain(outcome);
      const role = (await call('GET', `/v1/admin/users/${user.id}`, undefined)).body.role;
      const live = (await pg.store.keys.list(pg.org.id)).filter((k) => k.userId === user.id && k.revokedAt === null);
      expect({ role, admin: live.some((k) => k.admin) }).toEqual(role === 'viewer' ? { role, admin: false } : { role: 'admin', admin: true });
    }
  }, 120_000);
});
