// X-Service-Idempotency-Key on POST, as DESIGN.md decides: replay with the replay
// header, concurrent duplicates execute once, a different body is refused, validation
// failures are not stored, the window expires.
import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { requestFingerprint } from '../src/pipeline/idempotency.js';
import { addReadyNode, expectError, startControlPlane, type TestControlPlane } from './harness.js';

const clock = new ManualClock(Date.UTC(2026, 10, 21));
let cp: TestControlPlane;
let admin: string;

beforeAll(async () => {
  cp = await startControlPlane({ clock, config: { webhookAllowedTargets: ['127.0.0.1'] } });
  admin = await cp.key({ admin: true });
});
afterAll(() => cp.close());

/** Claims `idemKey` for POST `path` (body {}) as another control-plane process would, with a lease until `leaseUntil`. */
async function claimElsewhere(path: string, idemKey: string, leaseUntil: number, body: unknown = {}): Promise<void> {
  const verified = await cp.app.services.verifier.verify(admin);
  if (!verified.ok) throw new Error(verified.reason);
  const hash = requestFingerprint('POST', path, {}, body);
  const holder = { owner: 'another-process', claim: randomUUID(), leaseUntil };
  await cp.store.idempotency.begin(verified.principal.key.id, idemKey, hash, clock.now(), clock.now() + 300_000, holder);
}

/** Every byte SQLite holds for the control plane: the database file, its WAL and shared memory. */
const databaseBytes = (): string =>
  readdirSync(cp.dataDir)
    .filter((name) => name.startsWith('control-plane.sqlite'))
    .map((name) => readFileSync(join(cp.dataDir, name)).toString('latin1'))
    .join('');

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
    expect(second.body).toEqual({ ...first.body, key: null, key_redacted: true });
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
    // Another process claimed this key for the same request, has not finished and is alive (renews its lease).
    await claimElsewhere(path, idem, clock.now() + 300_000);
    const pending = cp.request('POST', path, { key: admin, headers: { 'x-service-idempotency-key': idem } });
    // The waiter polls the store; move the clock past the 30 s wait.
    await new Promise((r) => setTimeout(r, 150));
    clock.advance(31_000);
    expectError(await pending, 409, 'conflict');
  });

  it('a claim whose process died (lease ran out) is taken over: the retry runs, once', async () => {
    const idem = randomUUID();
    const before = await keyCount();
    await claimElsewhere('/v1/admin/keys', idem, clock.now() - 1, { name: 'orphan', kind: 'live', admin: false });
    const retried = await createKey(idem, { name: 'orphan' });
    expect(retried.status, retried.text).toBe(201);
    expect(retried.headers.get('x-service-idempotent-replay')).toBeNull();
    const again = await createKey(idem, { name: 'orphan' });
    expect(again.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(again.body.key_id).toBe(retried.body.key_id);
    expect(await keyCount()).toBe(before + 1);
  });
});

describe('idempotency holds no secrets', () => {
  it('a replayed key create or rotate has the record without the value, and the value is nowhere in the database', async () => {
    const idem = randomUUID();
    const first = await createKey(idem, { name: 'secret' });
    expect(first.body.key).toMatch(/^svc_sk_live_/);
    const replay = await createKey(idem, { name: 'secret' });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(replay.body).toEqual({ ...first.body, key: null, key_redacted: true });

    const rotateIdem = randomUUID();
    const rotate = () => cp.request('POST', `/v1/admin/keys/${first.body.key_id}/rotate`, { key: admin, body: {}, headers: { 'x-service-idempotency-key': rotateIdem } });
    const rotated = await rotate();
    expect(rotated.status, rotated.text).toBe(200);
    const rotatedReplay = await rotate();
    expect(rotatedReplay.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(rotatedReplay.body).toEqual({ ...rotated.body, key: null, key_redacted: true });

    const bytes = databaseBytes();
    expect(bytes).not.toContain(first.body.key);
    expect(bytes).not.toContain(rotated.body.key);
    // The check can see a value: the key id of the same answers is there.
    expect(bytes).toContain(first.body.key_id);
  });

  it('a replayed webhook create or secret rotation has no secret, and no stored answer holds one', async () => {
    const idem = randomUUID();
    const create = () => cp.request('POST', '/v1/webhooks', { key: admin, body: { url: 'http://127.0.0.1:9/hook', event_types: ['*'] }, headers: { 'x-service-idempotency-key': idem } });
    const first = await create();
    expect(first.status, first.text).toBe(201);
    expect(first.body.secret).toMatch(/^whsec_/);
    const replay = await create();
    expect(replay.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(replay.body).toEqual({ ...first.body, secret: null, secret_redacted: true });

    const rotateIdem = randomUUID();
    const rotate = () => cp.request('POST', `/v1/webhooks/${first.body.id}/rotate-secret`, { key: admin, body: {}, headers: { 'x-service-idempotency-key': rotateIdem } });
    const rotated = await rotate();
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect((await rotate()).body).toEqual({ ...rotated.body, secret: null, secret_redacted: true });

    // Signing needs the secret, so the subscription keeps it; the replay cache must not.
    const stored = (cp.store.db.prepare('SELECT body FROM idempotency_records').all() as Array<{ body: string | null }>).map((r) => r.body ?? '');
    expect(stored.length).toBeGreaterThan(0);
    for (const body of stored) {
      expect(body).not.toContain(first.body.secret);
      expect(body).not.toContain(rotated.body.secret);
      expect(body).not.toMatch(/svc_sk_(live|test)_[A-Za-z0-9]{20}|whsec_[A-Za-z0-9]/);
    }
  });
});

describe('idempotency and errors that ask for a retry', () => {
  it('no_capacity is not stored: the same key runs again once capacity exists, then replays', async () => {
    const compute = await cp.key({ scopes: ['compute:write', 'compute:read'] });
    const idem = randomUUID();
    const create = () => cp.request('POST', '/v1/instances', { key: compute, body: { sku: 'h100-80gb', gpus: 1 }, headers: { 'x-service-idempotency-key': idem } });
    expectError(await create(), 409, 'no_capacity');
    expectError(await create(), 409, 'no_capacity');
    await addReadyNode(cp, { gpus: 1 });
    const created = await create();
    expect(created.status, created.text).toBe(201);
    expect(created.headers.get('x-service-idempotent-replay')).toBeNull();
    const replay = await create();
    expect(replay.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(replay.body.id).toBe(created.body.id);
    const listed = await cp.request('GET', '/v1/instances', { key: compute });
    expect(listed.body.data.map((i: { id: string }) => i.id)).toEqual([created.body.id]);
  });
});

describe('idempotent extend', () => {
  it('a retried extend is replayed with its instance, without its Jupyter token, and charges once', async () => {
    const compute = await cp.key({ scopes: ['compute:write', 'compute:read', 'billing:read'] });
    const { nodeId } = await addReadyNode(cp, { gpus: 1, pool: 'eu' });
    cp.app.services.taskDispatcher.attach(() => true);
    const reserved = await cp.request('POST', '/v1/instances', { key: compute, body: { sku: 'h100-80gb', gpus: 1, pool: 'eu', duration_hours: 2 } });
    expect(reserved.status, reserved.text).toBe(201);
    // The node reports it running, with Jupyter: the instance's answers now carry the token.
    const token = `jupyter-token-${randomUUID()}`;
    const jupyter = { url: `http://127.0.0.1:8890/${reserved.body.id}/?token=${token}`, token };
    await cp.app.services.instances.onTaskState(nodeId, reserved.body.id, 'running', { access: { ssh: null, jupyter, jupyterUnavailableReason: null } });
    const idem = randomUUID();
    const extend = () => cp.request('POST', `/v1/instances/${reserved.body.id}/extend`, { key: compute, body: { hours: 3 }, headers: { 'x-service-idempotency-key': idem } });
    const first = await extend();
    expect(first.status, first.text).toBe(200);
    expect(first.body).toMatchObject({ status: 'ready', duration_hours: 5, jupyter });
    const again = await extend();
    expect(again.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(again.body).toEqual({ ...first.body, jupyter: null, jupyter_redacted: true });
    const stored = cp.store.db.prepare('SELECT body FROM idempotency_records WHERE idem_key = ?').get(idem) as { body: string };
    expect(stored.body).not.toContain(token);
    const charges = (await cp.request('GET', '/v1/billing/charges?limit=100', { key: compute })).body.data.filter(
      (c: { instance_id: string; kind: string }) => c.instance_id === reserved.body.id && c.kind === 'extension',
    );
    expect(charges).toHaveLength(1);
  });
});
