// The key verifier on a real SQLite store: requests that arrive together with a key not
// cached share one lookup, and a lookup begun before a revoke is never joined by a
// request that arrives after it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { ChangeFeed } from '../changes.js';
import { OrgService } from '../orgs/org-service.js';
import { openSqliteStore, type SqliteStore } from '../store/sqlite/sqlite-store.js';
import { KeyService } from './key-service.js';
import { KeyVerifier } from './key-verifier.js';

let dir: string;
let store: SqliteStore;
const clock = new ManualClock(10_000_000);

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-key-verifier-'));
  store = openSqliteStore(dir);
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A verifier over the store whose key lookups are counted, and held until `open()` when `gated`. */
async function setup(gated = false) {
  const changes = new ChangeFeed();
  const keys = new KeyService(store, clock, changes);
  const { org } = await new OrgService(store, clock, changes).ensureDefaultOrg();
  const created = await keys.create({ orgId: org.id });
  let lookups = 0;
  let open: () => void = () => {};
  const gate = gated ? new Promise<void>((resolve) => (open = resolve)) : Promise.resolve();
  const find = store.keys.findBySecretHash.bind(store.keys);
  store.keys.findBySecretHash = async (hash) => {
    lookups++;
    await gate;
    return find(hash);
  };
  const verifier = new KeyVerifier(store, clock, 30_000, changes);
  return { verifier, keys, created, lookups: () => lookups, open: () => open() };
}

describe('KeyVerifier', () => {
  it('answers 50 concurrent requests with an uncached key from one store lookup, then from its cache', async () => {
    const { verifier, created, lookups } = await setup();
    const answers = await Promise.all(Array.from({ length: 50 }, () => verifier.verify(created.value)));
    expect(answers.every((a) => a.ok && a.principal.key.id === created.record.id)).toBe(true);
    expect(lookups()).toBe(1);

    expect(verifier.verifyCached(created.value)).toMatchObject({ ok: true });
    clock.advance(30_000); // the entry expires: the next burst shares one lookup again
    expect(verifier.verifyCached(created.value)).toBeUndefined();
    await Promise.all(Array.from({ length: 20 }, () => verifier.verify(created.value)));
    expect(lookups()).toBe(2);
  });

  it('does not let a request that arrives after a revoke join a lookup begun before it', async () => {
    const { verifier, keys, created, lookups, open } = await setup(true);
    const before = verifier.verify(created.value);
    await keys.revoke(created.record.id); // evicts: the change feed bumps the generation
    const after = verifier.verify(created.value);
    open();
    expect(await after).toEqual({ ok: false, reason: 'this API key has been revoked' });
    await before;
    expect(lookups()).toBe(2);
    // Neither answer was cached as valid: the key stays refused.
    expect((await verifier.verify(created.value)).ok).toBe(false);
  });

  it('shares the refusal of an unknown key among concurrent requests too', async () => {
    const { verifier, created, lookups } = await setup();
    const unknown = created.value.slice(0, -4) + (created.value.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    const answers = await Promise.all(Array.from({ length: 10 }, () => verifier.verify(unknown)));
    expect(answers).toEqual(Array.from({ length: 10 }, () => ({ ok: false, reason: 'invalid API key', unknown: true })));
    expect(lookups()).toBe(1);
  });
});
