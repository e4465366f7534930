// Idempotency claims on a real SQLite file: leases are taken over only when they ran
// out, an answer written inside another transaction is fenced by its claim, a stored
// 2xx is not replaced by a later error, and a release never drops a stored answer.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiError } from '@svc/shared';
import type { IdempotencyOwner, StoredResponse } from '../records.js';
import { insertEvent } from './event-rows.js';
import { completeClaim } from './idempotency-store.js';
import { openSqliteStore, type SqliteStore } from './sqlite-store.js';

let dir: string;
let store: SqliteStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-idemstore-'));
  store = openSqliteStore(dir);
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const holder = (owner: string, claim: string, leaseUntil: number): IdempotencyOwner => ({ owner, claim, leaseUntil });
const answer = (statusCode: number, body = '{}'): StoredResponse => ({ statusCode, headers: { 'content-type': 'application/json' }, body });
const begin = (h: IdempotencyOwner, now: number, hash = 'h1') => store.idempotency.begin('key_1', 'idem', hash, now, now + 300_000, h);
const eventCount = () => (store.db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n;

describe('sqlite idempotency claims', () => {
  it('takes a claim over only after its lease ran out, and only for the same request', async () => {
    expect(await begin(holder('p1', 'c1', 1_000), 0)).toEqual({ state: 'started', takenOver: false });
    expect(await begin(holder('p2', 'c2', 11_000), 999)).toEqual({ state: 'in_progress' });
    expect(await begin(holder('p2', 'c2', 11_000), 1_000, 'other')).toEqual({ state: 'mismatch' });
    expect(await begin(holder('p2', 'c2', 11_000), 1_000)).toEqual({ state: 'started', takenOver: true });
    // The first process's late answer is not stored: the claim is no longer its own.
    await store.idempotency.complete('key_1', 'idem', 'c1', answer(201, '{"from":"p1"}'));
    await store.idempotency.complete('key_1', 'idem', 'c2', answer(201, '{"from":"p2"}'));
    expect(await begin(holder('p3', 'c3', 20_000), 2_000)).toMatchObject({ state: 'completed', response: { body: '{"from":"p2"}' } });
  });

  it('renews the leases of the owner that is alive, not of others', async () => {
    await store.idempotency.begin('key_1', 'a', 'h', 0, 300_000, holder('alive', 'ca', 1_000));
    await store.idempotency.begin('key_1', 'b', 'h', 0, 300_000, holder('dead', 'cb', 1_000));
    await store.idempotency.renew('alive', 50_000);
    expect(await store.idempotency.begin('key_1', 'a', 'h', 10_000, 310_000, holder('p', 'x', 20_000))).toEqual({ state: 'in_progress' });
    expect(await store.idempotency.begin('key_1', 'b', 'h', 10_000, 310_000, holder('p', 'y', 20_000))).toEqual({ state: 'started', takenOver: true });
  });

  it('rolls the work back when its answer finds the claim taken over', async () => {
    await begin(holder('p1', 'c1', 1_000), 0);
    await begin(holder('p2', 'c2', 20_000), 5_000);
    const before = eventCount();
    const work = store.db.transaction(() => {
      insertEvent(store.db, { id: 'evt_1', type: 'x', orgId: null, subject: null, data: {}, createdAt: 5_000 });
      completeClaim(store.db, { keyId: 'key_1', idemKey: 'idem', claim: 'c1', response: answer(201) });
    });
    expect(() => work()).toThrow(ApiError);
    expect(eventCount()).toBe(before);
    // The holder's own work and answer commit together.
    store.db.transaction(() => {
      insertEvent(store.db, { id: 'evt_2', type: 'x', orgId: null, subject: null, data: {}, createdAt: 5_000 });
      completeClaim(store.db, { keyId: 'key_1', idemKey: 'idem', claim: 'c2', response: answer(201, '{"id":"x"}') });
    })();
    expect(eventCount()).toBe(before + 1);
    expect(await begin(holder('p3', 'c3', 30_000), 6_000)).toMatchObject({ state: 'completed', response: { statusCode: 201, body: '{"id":"x"}' } });
  });

  it('keeps an answer stored with its work over a later error, and a release never drops an answer', async () => {
    await begin(holder('p1', 'c1', 10_000), 0);
    store.db.transaction(() => completeClaim(store.db, { keyId: 'key_1', idemKey: 'idem', claim: 'c1', response: answer(201, '{"id":"inst_1"}') }))();
    await store.idempotency.complete('key_1', 'idem', 'c1', answer(500, '{"error":{}}'));
    await store.idempotency.release('key_1', 'idem', 'c1');
    expect(await begin(holder('p2', 'c2', 20_000), 1_000)).toMatchObject({ state: 'completed', response: { statusCode: 201, body: '{"id":"inst_1"}' } });
    // A 2xx answer may replace the one stored with the work (the handler's final view).
    await store.idempotency.complete('key_1', 'idem', 'c1', answer(201, '{"id":"inst_1","status":"failed"}'));
    expect(await begin(holder('p2', 'c2', 20_000), 1_000)).toMatchObject({ response: { body: '{"id":"inst_1","status":"failed"}' } });
  });
});
