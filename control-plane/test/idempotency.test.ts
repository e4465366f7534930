// X-Service-Idempotency-Key on POST, as DESIGN.md decides: replay with the replay
// header, concurrent duplicates execute once, a different body is refused, validation
// failures are not stored, the window expires.
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { canonicalJson } from '../src/pipeline/canonical-json.js';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

const clock = new ManualClock(Date.UTC(2026, 10, 21));
let cp: TestControlPlane;
let admin: string;

beforeAll(async () => {
  cp = await startControlPlane({ clock });
  admin = await cp.key({ admin: true });
});
afterAll(() => cp.close());

const keyCount = async () => (await cp.app.services.keys.list(cp.org.id)).length;
const createKey = (idem: string, body: unknown = { name: 'idem' }, key = admin) =>
  cp.request('POST', '/v1/admin/keys', { key, body, headers: { 'x-service-idempotency-key': idem } });

describe('idempotency', () => {
  it('replays the stored response with X-Service-Idempotent-Replay and executes once', async () => {
    const idem = randomUUID();
    const before = await keyCount();
    const first = await createKey(idem);
    expect(first.status).toBe(201);
    expect(first.headers.get('x-service-idempotent-replay')).toBeNull();
    const second = await createKey(idem, { name: 'idem' });
    expect(second.status).toBe(201);
    expect(second.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(second.body).toEqual(first.body);
    expect(await keyCount()).toBe(before + 1);
  });

  it('treats bodies that differ only in key order as the same request', async () => {
    const idem = randomUUID();
    const first = await createKey(idem, { name: 'x', kind: 'test' });
    const second = await cp.request('POST', '/v1/admin/keys', {
      key: admin,
      rawBody: '{"kind":"test","name":"x"}',
      headers: { 'x-service-idempotency-key': idem, 'content-type': 'application/json' },
    });
    expect(second.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(second.body.key_id).toBe(first.body.key_id);
  });

  it('executes 100 concurrent duplicates once', async () => {
    const idem = randomUUID();
    const before = await keyCount();
    const responses = await Promise.all(Array.from({ length: 100 }, () => createKey(idem, { name: 'burst' })));
    expect(responses.map((r) => r.status)).toEqual(Array(100).fill(201));
    expect(new Set(responses.map((r) => r.body.key_id)).size).toBe(1);
    expect(responses.filter((r) => r.headers.get('x-service-idempotent-replay') === 'true')).toHaveLength(99);
    expect(await keyCount()).toBe(before + 1);
  });

  it('refuses the same key with a different body', async () => {
    const idem = randomUUID();
    await createKey(idem, { name: 'one' });
    const error = expectError(await createKey(idem, { name: 'two' }), 400, 'invalid_request');
    expect(error.code).toBe('idempotency_key_reused');
  });

  it('does not store requests that fail validation', async () => {
    const idem = randomUUID();
    expectError(await createKey(idem, { name: 'v', bogus: true }), 400, 'invalid_request');
    const ok = await createKey(idem, { name: 'v' });
    expect(ok.status).toBe(201);
    expect(ok.headers.get('x-service-idempotent-replay')).toBeNull();
  });

  it('replays an error once execution began', async () => {
    const idem = randomUUID();
    const call = () =>
      cp.request('POST', '/v1/admin/keys/key_missing/revoke', { key: admin, headers: { 'x-service-idempotency-key': idem } });
    expectError(await call(), 404, 'not_found');
    const replay = await call();
    expectError(replay, 404, 'not_found');
    expect(replay.headers.get('x-service-idempotent-replay')).toBe('true');
  });

  it('is scoped to the calling key and expires after 5 minutes', async () => {
    const idem = randomUUID();
    const otherAdmin = await cp.key({ admin: true });
    const a = await createKey(idem);
    const b = await createKey(idem, { name: 'idem' }, otherAdmin);
    expect(b.headers.get('x-service-idempotent-replay')).toBeNull();
    expect(b.body.key_id).not.toBe(a.body.key_id);

    clock.advance(299_000);
    expect((await createKey(idem)).headers.get('x-service-idempotent-replay')).toBe('true');
    clock.advance(1_000);
    const fresh = await createKey(idem);
    expect(fresh.headers.get('x-service-idempotent-replay')).toBeNull();
    expect(fresh.body.key_id).not.toBe(a.body.key_id);
  });

  it('requires the key to be a UUID', async () => {
    const error = expectError(await createKey('not-a-uuid'), 400, 'invalid_request');
    expect(error.param).toBe('X-Service-Idempotency-Key');
  });

  it('answers 409 conflict when the first request holds the key past the wait', async () => {
    const idem = randomUUID();
    const path = '/v1/admin/keys/key_held/revoke';
    // Another process claimed this key for the same request and has not finished.
    const hash = createHash('sha256').update(`POST ${path}\n${canonicalJson({})}`).digest('hex');
    const verified = await cp.app.services.verifier.verify(admin);
    if (!verified.ok) throw new Error(verified.reason);
    await cp.store.idempotency.begin(verified.principal.key.id, idem, hash, clock.now(), clock.now() + 300_000);
    const pending = cp.request('POST', path, { key: admin, headers: { 'x-service-idempotency-key': idem } });
    // The waiter polls the store; move the clock past the 30 s wait.
    await new Promise((r) => setTimeout(r, 150));
    clock.advance(31_000);
    expectError(await pending, 409, 'conflict');
  });
});
