// The user store on both engines (SQLite file, real PostgreSQL): unique emails per org,
// removal that revokes exactly the user's live keys with their events in one unit of
// work, and two replicas removing one user at once. Also the two columns migration 18
// adds elsewhere: a key's owner and an org's default pool.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { STORE_ENGINES, storeFixture, type StoreFixture } from '../../../test/support/postgres-stores.js';
import type { ApiKeyRecord, EventRecord } from './records.js';
import type { Store } from './store.js';
import type { UserRecord } from './user-store.js';

const user = (id: string, orgId: string, email: string, createdAt = 1): UserRecord => ({ id, orgId, email, role: 'developer', status: 'invited', invitedBy: null, createdAt });
const event = (id: string, type: string, subject: string): EventRecord => ({ id, type, orgId: 'org_1', subject, data: {}, createdAt: 1 });
const key = (id: string, userId: string | null, revokedAt: number | null = null): ApiKeyRecord => ({
  id,
  orgId: 'org_1',
  name: null,
  kind: 'live',
  admin: false,
  scopes: ['inference:read'],
  prefix: 'svc_sk_live_',
  last4: 'abcd',
  createdAt: 1,
  revokedAt,
  ...(userId ? { userId } : {}),
});
const secret = (keyId: string) => ({ hash: Buffer.from(keyId.padEnd(32, '0')), keyId, last4: 'abcd', createdAt: 1, expiresAt: null });
const keyEvent = (k: ApiKeyRecord) => event(`evt_${k.id}`, 'key.revoked', k.id);

describe.each(STORE_ENGINES)('%s user store', (engine) => {
  let fixture: StoreFixture;
  let store: Store;

  beforeAll(async () => {
    fixture = await storeFixture(engine);
  });
  afterAll(() => fixture.close());
  beforeEach(async () => {
    await fixture.reset();
    store = await fixture.open();
    for (const id of ['org_1', 'org_2']) {
      await store.orgs.create({ id, name: `n-${id}`, tier: 2, ipAllowlist: [], referrerAllowlist: [], allowedModels: null, createdAt: 1 });
    }
  });

  it('invites once per email and org, with its event, and lists an org in creation order', async () => {
    expect(await store.users.invite(user('user_a', 'org_1', 'a@x.io', 2), event('e1', 'user.invited', 'user_a'))).toBe(true);
    expect(await store.users.invite(user('user_b', 'org_1', 'b@x.io', 1), event('e2', 'user.invited', 'user_b'))).toBe(true);
    expect(await store.users.invite(user('user_c', 'org_1', 'a@x.io'), event('e3', 'user.invited', 'user_c'))).toBe(false);
    expect(await store.users.invite(user('user_d', 'org_2', 'a@x.io'), event('e4', 'user.invited', 'user_d'))).toBe(true);
    expect((await store.users.list('org_1')).map((u) => u.id)).toEqual(['user_b', 'user_a']);
    expect(await store.users.get('user_a')).toEqual(user('user_a', 'org_1', 'a@x.io', 2));
    expect(await store.users.setRole('user_a', 'billing')).toEqual({ ...user('user_a', 'org_1', 'a@x.io', 2), role: 'billing' });
    expect(await store.users.setRole('user_missing', 'billing')).toBeUndefined();
    // The refused invite wrote no event.
    expect((await store.events.list({ type: 'user.invited' })).map((e) => e.id)).toEqual(['e1', 'e2', 'e4']);
  });

  it("removes the user, revoking exactly its live keys with one event each, in one unit", async () => {
    await store.users.invite(user('user_a', 'org_1', 'a@x.io'), event('e1', 'user.invited', 'user_a'));
    await store.users.invite(user('user_b', 'org_1', 'b@x.io'), event('e2', 'user.invited', 'user_b'));
    for (const k of [key('key_1', 'user_a'), key('key_2', 'user_a'), key('key_old', 'user_a', 1), key('key_b', 'user_b'), key('key_org', null)]) {
      await store.keys.create(k, secret(k.id));
    }
    expect((await store.keys.get('key_1'))?.userId).toBe('user_a');
    expect((await store.keys.get('key_org'))?.userId).toBeUndefined();

    const removed = await store.users.remove('user_a', 50, keyEvent, event('e_rm', 'user.removed', 'user_a'));
    expect(removed?.user.id).toBe('user_a');
    expect(removed?.revokedKeys.map((k) => [k.id, k.revokedAt])).toEqual([['key_1', 50], ['key_2', 50]]);
    expect((await store.keys.list('org_1')).map((k) => [k.id, k.revokedAt])).toEqual([
      ['key_1', 50], ['key_2', 50], ['key_b', null], ['key_old', 1], ['key_org', null],
    ]);
    expect((await store.events.list()).map((e) => e.id)).toEqual(['e1', 'e2', 'evt_key_1', 'evt_key_2', 'e_rm']);
    expect(await store.users.get('user_a')).toBeUndefined();
    expect(await store.users.remove('user_a', 60, keyEvent, event('e_rm2', 'user.removed', 'user_a'))).toBeUndefined();
  });

  it('two replicas removing one user at once: one removes it, the other finds nothing, each key revoked once', async () => {
    const second = await fixture.open({ poolSize: 2 });
    await store.users.invite(user('user_a', 'org_1', 'a@x.io'), event('e1', 'user.invited', 'user_a'));
    await store.keys.create(key('key_1', 'user_a'), secret('key_1'));
    const results = await Promise.all([
      store.users.remove('user_a', 50, keyEvent, event('rm1', 'user.removed', 'user_a')),
      second.users.remove('user_a', 51, (k) => event(`evt2_${k.id}`, 'key.revoked', k.id), event('rm2', 'user.removed', 'user_a')),
    ]);
    expect(results.filter((r) => r !== undefined)).toHaveLength(1);
    expect((await store.events.list({ type: 'key.revoked' })).length).toBe(1);
    expect((await store.events.list({ type: 'user.removed' })).length).toBe(1);
  });

  it('a role change racing a key made for the user: one of them is refused, never both applied', async () => {
    const second = await fixture.open({ poolSize: 2 });
    // The caller's rules, as the services pass them: only an admin owns an admin key,
    // and a role that would not cover a live key is refused.
    const mayOwn = (owner: UserRecord | undefined) => {
      if (owner?.role !== 'admin') throw new Error(`owner is ${owner?.role ?? 'gone'}`);
    };
    const covers = (keys: ApiKeyRecord[]) => {
      if (keys.some((k) => k.admin)) throw new Error('the user holds an admin key');
    };
    for (let i = 0; i < 20; i++) {
      const id = `user_r${i}`;
      await store.users.invite({ ...user(id, 'org_1', `r${i}@x.io`), role: 'admin' }, event(`e_r${i}`, 'user.invited', id));
      const adminKey = { ...key(`key_r${i}`, id), admin: true, scopes: ['admin:write'] };
      const [made, demoted] = await Promise.allSettled([
        (i % 2 ? second : store).keys.create(adminKey, secret(adminKey.id), mayOwn),
        (i % 2 ? store : second).users.setRole(id, 'viewer', covers),
      ]);
      expect([made.status, demoted.status].sort()).toEqual(['fulfilled', 'rejected']);
      const role = (await store.users.get(id))!.role;
      const live = (await store.keys.list('org_1')).filter((k) => k.userId === id && k.revokedAt === null);
      expect(role === 'viewer' ? live : []).toEqual([]);
    }
  });

  it('a key is made for a user only while the user exists, and a role change sees its live keys', async () => {
    const mayOwn = (owner: UserRecord | undefined) => {
      if (!owner) throw new Error('no such user');
    };
    await expect(store.keys.create(key('key_x', 'user_missing'), secret('key_x'), mayOwn)).rejects.toThrow('no such user');
    expect(await store.keys.get('key_x')).toBeUndefined();
    await store.users.invite(user('user_a', 'org_1', 'a@x.io'), event('e1', 'user.invited', 'user_a'));
    await store.keys.create(key('key_1', 'user_a'), secret('key_1'), mayOwn);
    await store.keys.create(key('key_old', 'user_a', 1), secret('key_old'));
    const seen: string[][] = [];
    expect(await store.users.setRole('user_a', 'viewer', (keys) => void seen.push(keys.map((k) => k.id)))).toMatchObject({ role: 'viewer' });
    expect(seen).toEqual([['key_1']]);
    await expect(store.users.setRole('user_a', 'billing', () => { throw new Error('refused'); })).rejects.toThrow('refused');
    expect((await store.users.get('user_a'))?.role).toBe('viewer');
  });

  it("keeps an org's default pool, and clears it", async () => {
    expect((await store.orgs.update('org_1', { defaultPool: 'eu' }))?.defaultPool).toBe('eu');
    expect((await store.orgs.get('org_1'))?.defaultPool).toBe('eu');
    expect((await store.orgs.update('org_1', { defaultPool: null }))?.defaultPool).toBeUndefined();
  });
});
