// The store contract: every behaviour the control plane relies on, run against both
// engines (SQLite file, real PostgreSQL server). A second store opened on the same
// database stands for a second process or replica; the concurrency cases race two of
// them for the same row. SQLite-only mechanics (WAL checkpoints, its migration runner)
// are tested in sqlite/.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ApiError } from '@svc/shared';
import { STORE_ENGINES, storeFixture, type StoreFixture } from '../../../test/support/postgres-stores.js';
import type { ApiKeyRecord, EventRecord, IdempotencyOwner, KeySecretRecord, OrgRecord, StoredResponse } from './records.js';
import type { Store } from './store.js';
import type { EnrollmentTokenRecord, NodeRecord } from './node-store.js';
import { GpuAlreadyClaimed } from './instance-store.js';
import type { ChargeRecord, InstanceRecord } from '../instances/instance-record.js';
import { upFrontRefusal } from '../billing/spending.js';
import { grantRefusal } from '../billing/billing-service.js';
import type { ReplicaRecord } from '../replicas/replica-record.js';
import type { UsageRecord } from './usage-store.js';
import type { StoredResponseRecord } from './response-store.js';
import type { RemediationRecord } from './remediation-store.js';
import type { AccountAdmission, CreditRecord } from './ledger-store.js';
import type { HealthEventRecord } from './node-store.js';
import type { InvoiceDraft } from '../billing/invoice.js';
import type { HourRow } from '../billing/ledger.js';
import type { TestPostgres } from '../../../test/support/postgres.js';
import { openPostgresStore, type PostgresStore } from './postgres/postgres-store.js';
import { openSqliteStore, type SqliteStore } from './sqlite/sqlite-store.js';
import { appendEvent } from './postgres/node-store.js';
import { PG_MIGRATIONS } from './postgres/migrations.js';
import { gcraStep } from '../pipeline/gcra.js';
import { LISTED_ATTEMPTS_PER_DELIVERY } from '../webhooks/webhook-store.js';

const org = (id: string, createdAt = 1): OrgRecord => ({
  id,
  name: `name-${id}`,
  tier: 2,
  ipAllowlist: [],
  referrerAllowlist: [],
  allowedModels: null,
  createdAt,
});
const apiKey = (id: string, orgId = 'org_1', createdAt = 1): ApiKeyRecord => ({
  id,
  orgId,
  name: null,
  kind: 'live',
  admin: false,
  scopes: ['inference'],
  prefix: 'sk_live_',
  last4: 'aaaa',
  createdAt,
  revokedAt: null,
});
const secret = (value: string, keyId: string, createdAt = 1): KeySecretRecord => ({
  hash: Buffer.from(value),
  keyId,
  last4: value.slice(-4),
  createdAt,
  expiresAt: null,
});
const event = (id: string, type = 'test.event', subject: string | null = null, createdAt = 1): EventRecord => ({
  id,
  type,
  orgId: 'org_1',
  subject,
  data: { id, nested: { n: 1 } },
  createdAt,
});
const instance = (id: string, over: Partial<InstanceRecord> = {}): InstanceRecord => ({
  id,
  orgId: 'org_1',
  keyId: 'key_1',
  status: 'provisioning',
  failureReason: null,
  sku: 'h100x1',
  gpus: 1,
  pool: 'na',
  mode: 'reserved',
  durationHours: 1.5,
  image: 'img',
  sshKeys: ['ssh-ed25519 AAAA'],
  labels: { team: 'a' },
  nodeId: 'node_1',
  gpuUuids: [`GPU-${id}`],
  rateMicros: 2_000_000,
  progress: null,
  createdAt: 1,
  readyAt: null,
  expiresAt: null,
  terminatedAt: null,
  stop: null,
  access: null,
  updatedAt: 1,
  ...over,
});
/** A ready on-demand instance at 3.60 USD per GPU-hour (1,000 micro-dollars a second), ready at 1 s. */
const onDemand = (id: string, over: Partial<InstanceRecord> = {}): InstanceRecord =>
  instance(id, { mode: 'on_demand', durationHours: null, status: 'ready', readyAt: 1_000, rateMicros: 3_600_000, ...over });
const replica = (id: string, over: Partial<ReplicaRecord> = {}): ReplicaRecord => ({
  id,
  model: 'm',
  quantization: 'int4',
  pool: 'na',
  nodeId: 'node_1',
  gpuUuids: [`GPU-${id}`],
  engine: 'vllm',
  image: 'img',
  args: ['--x'],
  env: { A: 'b' },
  containerPort: 8000,
  healthPath: '/health',
  status: 'scheduled',
  endpoint: null,
  message: '',
  restarts: 0,
  createdAt: 1,
  readyAt: null,
  changedAt: 1,
  endedAt: null,
  ...over,
});
const usage = (i: number, over: Partial<UsageRecord> = {}): UsageRecord => ({
  id: `usage_${String(i).padStart(3, '0')}`,
  orgId: 'org_1',
  keyId: 'key_1',
  requestId: `req_${i}`,
  kind: 'chat',
  model: 'm',
  quantization: 'int4',
  pool: 'na',
  promptTokens: 10,
  completionTokens: 5,
  costNanos: 123_456_789_012,
  user: i % 2 ? 'alice' : null,
  sandbox: false,
  createdAt: 1_000 + Math.floor(i / 2),
  durationMs: i % 3 ? 250 + i : null,
  ...over,
});
const token = (id: string, hash: string, over: Partial<EnrollmentTokenRecord> = {}): EnrollmentTokenRecord => ({
  id,
  hash: Buffer.from(hash),
  pool: null,
  createdAt: 0,
  expiresAt: 1000,
  usedAt: null,
  usedByNode: null,
  revokedAt: null,
  ...over,
});
const node = (id: string): NodeRecord => ({
  id,
  hostname: id,
  pool: 'na',
  status: 'enrolled',
  cordoned: false,
  draining: false,
  hostFacts: null,
  agentVersion: '',
  protocolVersion: 1,
  enrolledAt: 0,
  connectedAt: null,
  lastSeenAt: null,
});
const holder = (owner: string, claim: string, leaseUntil: number): IdempotencyOwner => ({ owner, claim, leaseUntil });
const answer = (statusCode: number, body = '{}'): StoredResponse => ({ statusCode, headers: { 'content-type': 'application/json' }, body });

describe.each(STORE_ENGINES)('%s store', (engine) => {
  let fx: StoreFixture;
  let store: Store;

  beforeAll(async () => {
    fx = await storeFixture(engine);
  });
  afterAll(async () => {
    await fx?.close();
  });
  beforeEach(async () => {
    await fx.reset();
    store = await fx.open();
    await store.orgs.create(org('org_1'));
  });

  describe('orgs and keys', () => {
    it('keeps orgs with their lists, finds them by name and patches only what is given', async () => {
      await store.orgs.create({ ...org('org_0', 0), ipAllowlist: ['10.0.0.0/8'], allowedModels: ['m1'] });
      expect((await store.orgs.list()).map((o) => o.id)).toEqual(['org_0', 'org_1']);
      expect(await store.orgs.getByName('name-org_0')).toMatchObject({ id: 'org_0', ipAllowlist: ['10.0.0.0/8'], allowedModels: ['m1'], tier: 2 });
      const updated = await store.orgs.update('org_0', { tier: 3, allowedModels: null });
      expect(updated).toMatchObject({ name: 'name-org_0', tier: 3, ipAllowlist: ['10.0.0.0/8'], allowedModels: null });
      expect(await store.orgs.update('org_missing', { tier: 3 })).toBeUndefined();
      await expect(store.orgs.create(org('org_0'))).rejects.toThrow();
    });

    it('finds a key by its secret hash; rotation expires the old value and revocation appends one event', async () => {
      await store.keys.create({ ...apiKey('key_1'), admin: true, scopes: ['admin', 'inference'] }, secret('old-value-1111', 'key_1'));
      expect(await store.keys.findBySecretHash(Buffer.from('old-value-1111'))).toEqual({
        key: { ...apiKey('key_1'), admin: true, scopes: ['admin', 'inference'] },
        secret: secret('old-value-1111', 'key_1'),
      });
      expect(await store.keys.findBySecretHash(Buffer.from('nope'))).toBeUndefined();

      const rotated = await store.keys.rotate('key_1', secret('new-value-2222', 'key_1', 5), 100);
      expect(rotated?.last4).toBe('2222');
      expect((await store.keys.findBySecretHash(Buffer.from('old-value-1111')))?.secret.expiresAt).toBe(100);
      expect((await store.keys.findBySecretHash(Buffer.from('new-value-2222')))?.secret.expiresAt).toBeNull();
      expect(await store.keys.rotate('key_missing', secret('x-3333', 'key_missing'), 100)).toBeUndefined();

      const first = await store.keys.revoke('key_1', 50, event('evt_revoke_1', 'api_key.revoked', 'key_1'));
      const again = await store.keys.revoke('key_1', 60, event('evt_revoke_2', 'api_key.revoked', 'key_1'));
      expect(first).toMatchObject({ alreadyRevoked: false, key: { revokedAt: 50 } });
      expect(again).toMatchObject({ alreadyRevoked: true, key: { revokedAt: 50 } });
      expect((await store.events.list({ type: 'api_key.revoked' })).map((e) => e.id)).toEqual(['evt_revoke_1']);
      expect(await store.keys.revoke('key_missing', 1, event('evt_x'))).toBeUndefined();
    });

    it('lists keys oldest first, per org or all', async () => {
      await store.orgs.create(org('org_2'));
      await store.keys.create(apiKey('key_b', 'org_1', 2), secret('b', 'key_b'));
      await store.keys.create(apiKey('key_a', 'org_1', 2), secret('a', 'key_a'));
      await store.keys.create(apiKey('key_c', 'org_2', 1), secret('c', 'key_c'));
      expect((await store.keys.list('org_1')).map((k) => k.id)).toEqual(['key_a', 'key_b']);
      expect((await store.keys.list()).map((k) => k.id)).toEqual(['key_c', 'key_a', 'key_b']);
    });
  });

  describe('events', () => {
    it('appends with increasing seq, lists after a seq, by type, up to a limit, data intact', async () => {
      const a = await store.events.append(event('evt_a', 't.one'));
      const b = await store.events.append(event('evt_b', 't.two'));
      const c = await store.events.append(event('evt_c', 't.one'));
      expect(a.seq).toBeLessThan(b.seq);
      expect(b.seq).toBeLessThan(c.seq);
      expect(await store.events.list({ afterSeq: a.seq })).toEqual([b, c]);
      expect((await store.events.list({ type: 't.one' })).map((e) => e.id)).toEqual(['evt_a', 'evt_c']);
      expect(await store.events.list({ limit: 1 })).toEqual([{ ...a, data: { id: 'evt_a', nested: { n: 1 } } }]);
      await expect(store.events.append(event('evt_a'))).rejects.toThrow();
    });

    it('nudges listeners after an append, and stops after unsubscribe', async () => {
      let heard = 0;
      const off = store.events.onAppend(() => heard++);
      await ready(store);
      await store.events.append(event('evt_1'));
      await expect.poll(() => heard, { timeout: 5_000 }).toBeGreaterThan(0);
      off();
      const before = heard;
      // A listener added now hears evt_2's nudge; by then the removed one would have too.
      let probe = 0;
      store.events.onAppend(() => probe++);
      await store.events.append(event('evt_2'));
      await expect.poll(() => probe, { timeout: 5_000 }).toBeGreaterThan(0);
      expect(heard).toBe(before);
    });
  });

  describe('idempotency claims', () => {
    const begin = (h: IdempotencyOwner, now: number, hash = 'h1', s: Store = store) => s.idempotency.begin('key_1', 'idem', hash, now, now + 300_000, h);

    it('takes a claim over only after its lease ran out, and only for the same request', async () => {
      expect(await begin(holder('p1', 'c1', 1_000), 0)).toEqual({ state: 'started', takenOver: false });
      expect(await begin(holder('p2', 'c2', 11_000), 999)).toEqual({ state: 'in_progress' });
      expect(await begin(holder('p2', 'c2', 11_000), 1_000, 'other')).toEqual({ state: 'mismatch' });
      expect(await begin(holder('p2', 'c2', 11_000), 1_000)).toEqual({ state: 'started', takenOver: true });
      // The first process's late answer is not stored: the claim is no longer its own.
      await store.idempotency.complete('key_1', 'idem', 'c1', answer(201, '{"from":"p1"}'), 300_000);
      await store.idempotency.complete('key_1', 'idem', 'c2', answer(201, '{"from":"p2"}'), 300_000);
      expect(await begin(holder('p3', 'c3', 20_000), 2_000)).toMatchObject({ state: 'completed', response: { body: '{"from":"p2"}' } });
    });

    it('renews the leases of the owner that is alive, not of others; expired rows count as absent', async () => {
      await store.idempotency.begin('key_1', 'a', 'h', 0, 300_000, holder('alive', 'ca', 1_000));
      await store.idempotency.begin('key_1', 'b', 'h', 0, 300_000, holder('dead', 'cb', 1_000));
      await store.idempotency.renew('alive', 50_000);
      expect(await store.idempotency.begin('key_1', 'a', 'h', 10_000, 310_000, holder('p', 'x', 20_000))).toEqual({ state: 'in_progress' });
      expect(await store.idempotency.begin('key_1', 'b', 'h', 10_000, 310_000, holder('p', 'y', 20_000))).toEqual({ state: 'started', takenOver: true });
      expect(await store.idempotency.begin('key_1', 'a', 'other', 300_000, 600_000, holder('q', 'z', 400_000))).toEqual({ state: 'started', takenOver: false });
      expect(await store.idempotency.purgeExpired(310_000)).toBe(1);
    });

    it('never expires a claim whose lease is renewed; its answer is kept a window from when it is stored', async () => {
      // Claimed at 0 with a window to 300_000; the process renews its lease past that.
      await begin(holder('p1', 'c1', 10_000), 0);
      await store.idempotency.renew('p1', 320_000);
      expect(await store.idempotency.purgeExpired(310_000)).toBe(0);
      expect(await begin(holder('p2', 'c2', 320_000), 310_000)).toEqual({ state: 'in_progress' });
      // Its answer at 315_000 is replayed until 615_000, and only then purged.
      await store.idempotency.complete('key_1', 'idem', 'c1', answer(200, '{"id":"slow"}'), 615_000);
      expect(await store.idempotency.purgeExpired(614_999)).toBe(0);
      expect(await begin(holder('p2', 'c2', 624_999), 614_999)).toMatchObject({ state: 'completed', response: { body: '{"id":"slow"}' } });
      expect(await store.idempotency.purgeExpired(615_000)).toBe(1);
      // An answer stored with its work gets its own expiry too.
      await begin(holder('p3', 'c3', 710_000), 700_000);
      await store.instances.create(instance('inst_1'), event('evt_1'), null, () => ({ keyId: 'key_1', idemKey: 'idem', claim: 'c3', response: answer(201, '{"id":"inst_1"}'), expiresAt: 1_200_000 }));
      expect(await begin(holder('p4', 'c4', 1_200_000), 1_100_000)).toMatchObject({ state: 'completed', response: { body: '{"id":"inst_1"}' } });
      // A claim past its expiry whose lease ran out (its process died) is gone.
      await store.idempotency.begin('key_1', 'dead', 'h1', 0, 300_000, holder('dead', 'cd', 10_000));
      expect(await store.idempotency.purgeExpired(1_200_000)).toBe(2);
    });

    it('find reports what begin would find, and claims nothing', async () => {
      const find = (now: number, hash = 'h1') => store.idempotency.find('key_1', 'idem', hash, now);
      expect(await find(0)).toEqual({ state: 'absent' });
      await begin(holder('p1', 'c1', 10_000), 0);
      expect(await find(1)).toEqual({ state: 'in_progress' });
      expect(await find(1, 'other')).toEqual({ state: 'mismatch' });
      // A dead claim: begin takes it over, so find says there is nothing to wait for.
      expect(await find(10_000)).toEqual({ state: 'absent' });
      expect(await begin(holder('p2', 'c2', 20_000), 10_000)).toEqual({ state: 'started', takenOver: true });
      await store.idempotency.complete('key_1', 'idem', 'c2', answer(201, '{"id":"x"}'), 310_000);
      expect(await find(309_999)).toMatchObject({ state: 'completed', response: { statusCode: 201, body: '{"id":"x"}' } });
      expect(await find(310_000)).toEqual({ state: 'absent' });
      // Finding an expired answer leaves it for begin and the purge to delete.
      expect(await store.idempotency.purgeExpired(310_000)).toBe(1);
    });

    it('rolls the work back when its answer finds the claim taken over', async () => {
      await begin(holder('p1', 'c1', 1_000), 0);
      await begin(holder('p2', 'c2', 20_000), 5_000);
      const stale = () => ({ keyId: 'key_1', idemKey: 'idem', claim: 'c1', response: answer(201), expiresAt: 300_000 });
      await expect(store.instances.create(instance('inst_1'), event('evt_1'), null, stale)).rejects.toThrow(ApiError);
      expect(await store.instances.get('inst_1')).toBeUndefined();
      expect(await store.events.list()).toEqual([]);
      expect(await store.instances.claimedGpuUuids()).toEqual(new Set());
      // The holder's own work and answer commit together.
      await store.instances.create(instance('inst_1'), event('evt_2'), null, () => ({ keyId: 'key_1', idemKey: 'idem', claim: 'c2', response: answer(201, '{"id":"x"}'), expiresAt: 300_000 }));
      expect((await store.events.list()).map((e) => e.id)).toEqual(['evt_2']);
      expect(await begin(holder('p3', 'c3', 30_000), 6_000)).toMatchObject({ state: 'completed', response: { statusCode: 201, body: '{"id":"x"}' } });
    });

    it('keeps an answer stored with its work over a later error, and a release never drops an answer', async () => {
      await begin(holder('p1', 'c1', 10_000), 0);
      await store.instances.create(instance('inst_1'), event('evt_1'), null, () => ({ keyId: 'key_1', idemKey: 'idem', claim: 'c1', response: answer(201, '{"id":"inst_1"}'), expiresAt: 300_000 }));
      await store.idempotency.complete('key_1', 'idem', 'c1', answer(500, '{"error":{}}'), 300_000);
      await store.idempotency.release('key_1', 'idem', 'c1');
      expect(await begin(holder('p2', 'c2', 20_000), 1_000)).toMatchObject({ state: 'completed', response: { statusCode: 201, body: '{"id":"inst_1"}' } });
      // A 2xx answer may replace the one stored with the work (the handler's final view).
      await store.idempotency.complete('key_1', 'idem', 'c1', answer(201, '{"id":"inst_1","status":"failed"}'), 300_000);
      expect(await begin(holder('p2', 'c2', 20_000), 1_000)).toMatchObject({ response: { body: '{"id":"inst_1","status":"failed"}' } });
    });

    it('release gives an unanswered claim up for the next request', async () => {
      await begin(holder('p1', 'c1', 10_000), 0);
      await store.idempotency.release('key_1', 'idem', 'other-claim');
      expect(await begin(holder('p2', 'c2', 20_000), 1)).toEqual({ state: 'in_progress' });
      await store.idempotency.release('key_1', 'idem', 'c1');
      expect(await begin(holder('p2', 'c2', 20_000), 2)).toEqual({ state: 'started', takenOver: false });
    });
  });

  describe('node registry', () => {
    it('uses a token once, atomically with the node insert', async () => {
      await store.nodes.createToken(token('ntk_a', 'a'));
      expect(await store.nodes.enroll(Buffer.from('a'), 10, node('node_1'), Buffer.from('s'))).toEqual({ enrolled: true });
      const second = await store.nodes.enroll(Buffer.from('a'), 11, node('node_2'), Buffer.from('s'));
      expect(second).toMatchObject({ enrolled: false, token: { id: 'ntk_a', usedAt: 10, usedByNode: 'node_1' } });
      expect((await store.nodes.listNodes()).map((n) => n.id)).toEqual(['node_1']);
      expect(await store.nodes.getNodeSecretHash('node_1')).toEqual(Buffer.from('s'));
      // Revoking a used token changes nothing.
      expect((await store.nodes.revokeToken('ntk_a', 20))!.revokedAt).toBeNull();
    });

    it('refuses expired and revoked tokens', async () => {
      await store.nodes.createToken(token('ntk_e', 'e'));
      await store.nodes.createToken(token('ntk_r', 'r'));
      expect((await store.nodes.revokeToken('ntk_r', 5))!.revokedAt).toBe(5);
      expect((await store.nodes.revokeToken('ntk_r', 6))!.revokedAt).toBe(5);
      expect((await store.nodes.enroll(Buffer.from('e'), 1000, node('node_1'), Buffer.from('s'))).enrolled).toBe(false);
      expect((await store.nodes.enroll(Buffer.from('r'), 10, node('node_2'), Buffer.from('s'))).enrolled).toBe(false);
      expect(await store.nodes.enroll(Buffer.from('missing'), 10, node('node_3'), Buffer.from('s'))).toEqual({ enrolled: false, token: undefined });
      expect(await store.nodes.listNodes()).toEqual([]);
      expect((await store.nodes.listTokens()).map((t) => t.id)).toEqual(['ntk_e', 'ntk_r']);
    });

    it('keeps sessions, flags, host facts and the first forget', async () => {
      await store.nodes.createToken(token('ntk_a', 'a'));
      await store.nodes.enroll(Buffer.from('a'), 10, node('node_1'), Buffer.from('s'));
      const up = { nodeId: 'node_1', gpuUuid: null, gpuIndex: null, kind: 'node_up' as const, xid: null, healthy: null, message: 'hello', at: 20 };
      await store.nodes.updateSession('node_1', { hostname: 'h1', agentVersion: '1.2.3', protocolVersion: 3, status: 'ready', connectedAt: 20, lastSeenAt: 20 }, up);
      await store.nodes.setHostFacts('node_1', { cpu_cores: 64 });
      expect(await store.nodes.setFlags('node_1', { draining: true })).toMatchObject({ cordoned: false, draining: true });
      expect(await store.nodes.getNode('node_1')).toMatchObject({ hostname: 'h1', agentVersion: '1.2.3', status: 'ready', hostFacts: { cpu_cores: 64 }, forgottenAt: null });
      await store.nodes.setStatus('node_1', 'unreachable', { ...up, kind: 'node_down', at: 30 });
      const down = { ...up, kind: 'node_down' as const, message: 'forgotten' };
      expect(await store.nodes.markForgotten('node_1', 40, down)).toMatchObject({ forgottenAt: 40, cordoned: true, status: 'unreachable' });
      expect(await store.nodes.markForgotten('node_1', 50, down)).toMatchObject({ forgottenAt: 40 });
      expect((await store.nodes.listHealthEvents('node_1', 10)).map((e) => [e.kind, e.at])).toEqual([
        ['node_down', 20],
        ['node_down', 30],
        ['node_up', 20],
      ]);
    });

    it('flushes samples, prunes vanished GPUs and keeps health events in order', async () => {
      await store.nodes.createToken(token('ntk_a', 'a'));
      await store.nodes.enroll(Buffer.from('a'), 10, node('node_1'), Buffer.from('s'));
      const gpu = (uuid: string, index: number) => ({
        uuid,
        index,
        name: 'NVIDIA L40S',
        memoryTotalBytes: 48e9,
        healthy: true,
        healthReason: '',
        sample: { utilization_gpu_percent: 5 },
        sampledAt: 100,
      });
      await store.nodes.flushTelemetry([{ nodeId: 'node_1', lastSeenAt: 100, gpus: [gpu('GPU-a', 0), gpu('GPU-b', 1)] }]);
      expect((await store.nodes.getNode('node_1'))!.lastSeenAt).toBe(100);
      expect((await store.nodes.listGpus())[0]).toEqual({ ...gpu('GPU-a', 0), nodeId: 'node_1' });
      await store.nodes.flushTelemetry([{ nodeId: 'node_1', lastSeenAt: 100, gpus: [gpu('GPU-ab', 2), gpu('GPU-a%', 3), gpu('GPU-b', 1)] }]);
      // A UUID prefix is a range of the key in byte order: no scan, no LIKE wildcards.
      expect((await store.nodes.findGpus('GPU-a', 10)).map((g) => g.uuid)).toEqual(['GPU-a', 'GPU-a%', 'GPU-ab']);
      expect((await store.nodes.findGpus('GPU-a%', 10)).map((g) => g.uuid)).toEqual(['GPU-a%']);
      expect((await store.nodes.findGpus('GPU-ab', 10))[0]).toMatchObject({ uuid: 'GPU-ab', nodeId: 'node_1', index: 2 });
      expect(await store.nodes.findGpus('GPU-A', 10)).toEqual([]);
      expect((await store.nodes.findGpus('GPU-', 2)).length).toBe(2);
      await store.nodes.pruneGpus('node_1', ['GPU-b']);
      expect((await store.nodes.listGpus('node_1')).map((g) => g.uuid)).toEqual(['GPU-b']);

      await store.nodes.recordHealthEvent({ nodeId: 'node_1', gpuUuid: 'GPU-b', gpuIndex: 1, kind: 'thermal', xid: null, healthy: false, message: 'too hot: 95 C', at: 200 });
      await store.nodes.recordHealthEvent({ nodeId: 'node_1', gpuUuid: null, gpuIndex: null, kind: 'node_down', xid: null, healthy: null, message: 'silent', at: 300 });
      expect((await store.nodes.listGpus('node_1'))[0]).toMatchObject({ healthy: false, healthReason: 'too hot: 95 C' });
      expect((await store.nodes.listHealthEvents('node_1', 10)).map((e) => e.kind)).toEqual(['node_down', 'thermal']);
      await store.nodes.pruneGpus('node_1', []);
      expect(await store.nodes.listGpus('node_1')).toEqual([]);
    });

    it('knows the latest XID of every GPU (DCGM_FI_DEV_XID_ERRORS)', async () => {
      await store.nodes.createToken(token('ntk_a', 'a'));
      await store.nodes.enroll(Buffer.from('a'), 10, node('node_1'), Buffer.from('s'));
      const xid = (gpuUuid: string, n: number, at: number) =>
        store.nodes.recordHealthEvent({ nodeId: 'node_1', gpuUuid, gpuIndex: 0, kind: 'xid', xid: n, healthy: n === 13, message: `XID ${n}`, at });
      expect(await store.nodes.lastXidByGpu()).toEqual(new Map());
      await xid('GPU-a', 79, 1);
      await xid('GPU-b', 13, 2);
      await xid('GPU-a', 48, 3);
      await store.nodes.recordHealthEvent({ nodeId: 'node_1', gpuUuid: 'GPU-a', gpuIndex: 0, kind: 'recovered', xid: null, healthy: true, message: 'reset', at: 4 });
      expect(await store.nodes.lastXidByGpu()).toEqual(new Map([['GPU-a', 48], ['GPU-b', 13]]));
    });

    it('queues commands, sends pending ones once and finishes them once', async () => {
      await store.nodes.createToken(token('ntk_a', 'a'));
      await store.nodes.enroll(Buffer.from('a'), 10, node('node_1'), Buffer.from('s'));
      const command = (id: string, createdAt: number) => ({
        id,
        nodeId: 'node_1',
        kind: 'reset_gpu_health' as const,
        args: { gpuUuid: 'GPU-a' },
        state: 'pending' as const,
        createdAt,
        sentAt: null,
        finishedAt: null,
        errorCode: null,
        errorMessage: null,
      });
      await store.nodes.createCommand(command('cmd_2', 2));
      await store.nodes.createCommand(command('cmd_1', 1));
      expect((await store.nodes.listCommands({ state: 'pending' })).map((c) => c.id)).toEqual(['cmd_1', 'cmd_2']);
      await store.nodes.markCommandSent('cmd_1', 5, null);
      await store.nodes.markCommandSent('cmd_1', 6, null);
      expect(await store.nodes.getCommand('cmd_1')).toMatchObject({ state: 'sent', sentAt: 5, args: { gpuUuid: 'GPU-a' } });
      await store.nodes.finishCommand('cmd_1', false, 7, { code: 'not_found', message: 'no such GPU' });
      await store.nodes.finishCommand('cmd_1', true, 8, null);
      expect(await store.nodes.getCommand('cmd_1')).toMatchObject({ state: 'failed', finishedAt: 7, errorCode: 'not_found' });
      expect((await store.nodes.listCommands({ nodeId: 'node_1', limit: 1 })).map((c) => c.id)).toEqual(['cmd_1']);
      expect((await store.nodes.listCommands({ nodeId: 'node_other' }))).toEqual([]);
    });

    it('queues relayed task commands and hands them to the holder once, oldest first; stale ones are dropped unsent', async () => {
      const relayed = (nodeId: string, command: string, createdAt: number) => ({ nodeId, command, createdAt });
      await store.nodes.queueRelayedCommand(relayed('node_1', '{"command_id":"stale"}', 1));
      await store.nodes.queueRelayedCommand(relayed('node_1', '{"command_id":"start"}', 20));
      await store.nodes.queueRelayedCommand(relayed('node_2', '{"command_id":"other"}', 21));
      await store.nodes.queueRelayedCommand(relayed('node_1', '{"command_id":"stop"}', 22));
      expect(await store.nodes.takeRelayedCommands([], 10)).toEqual([]);
      expect(await store.nodes.takeRelayedCommands(['node_1'], 10)).toEqual([relayed('node_1', '{"command_id":"start"}', 20), relayed('node_1', '{"command_id":"stop"}', 22)]);
      // Taken means gone: a second holder (or a second poll) gets nothing twice.
      expect(await store.nodes.takeRelayedCommands(['node_1'], 10)).toEqual([]);
      expect(await store.nodes.takeRelayedCommands(['node_1', 'node_2'], 10)).toEqual([relayed('node_2', '{"command_id":"other"}', 21)]);
    });

    it('claims no GPU that turned unhealthy, and none on a node no longer schedulable, since placement read them', async () => {
      await store.nodes.createToken(token('ntk_a', 'a'));
      await store.nodes.enroll(Buffer.from('a'), 10, node('node_1'), Buffer.from('s'));
      const up = { nodeId: 'node_1', gpuUuid: null, gpuIndex: null, kind: 'node_up' as const, xid: null, healthy: null, message: 'up', at: 20 };
      await store.nodes.setStatus('node_1', 'ready', up);
      const gpu = (uuid: string, index: number) => ({ uuid, index, name: 'NVIDIA H100 80GB HBM3', memoryTotalBytes: 80e9, healthy: true, healthReason: '', sample: {}, sampledAt: 20 });
      await store.nodes.flushTelemetry([{ nodeId: 'node_1', lastSeenAt: 20, gpus: [gpu('GPU-a', 0), gpu('GPU-b', 1), gpu('GPU-c', 2), gpu('GPU-d', 3)] }]);
      await store.nodes.recordHealthEvent({ nodeId: 'node_1', gpuUuid: 'GPU-b', gpuIndex: 1, kind: 'xid', xid: 79, healthy: false, message: 'XID 79', at: 21 });
      expect(await store.nodes.claimGpus('node_1', ['GPU-a', 'GPU-b'], 'rep_1', 22)).toBe(false);
      await expect(store.instances.create(instance('inst_1', { nodeId: 'node_1', gpuUuids: ['GPU-b'] }), event('evt_1'), null)).rejects.toBeInstanceOf(GpuAlreadyClaimed);
      await store.nodes.setFlags('node_1', { draining: true });
      await expect(store.instances.create(instance('inst_1', { nodeId: 'node_1', gpuUuids: ['GPU-c'] }), event('evt_1'), null)).rejects.toBeInstanceOf(GpuAlreadyClaimed);
      await store.nodes.setFlags('node_1', { draining: false, cordoned: true });
      expect(await store.nodes.claimGpus('node_1', ['GPU-c'], 'rep_1', 23)).toBe(false);
      await store.nodes.setFlags('node_1', { cordoned: false });
      await store.nodes.setStatus('node_1', 'unreachable', { ...up, kind: 'node_down', at: 24 });
      expect(await store.nodes.claimGpus('node_1', ['GPU-c'], 'rep_1', 25)).toBe(false);
      await store.nodes.setStatus('node_1', 'ready', { ...up, at: 26 });
      await store.instances.create(instance('inst_1', { nodeId: 'node_1', gpuUuids: ['GPU-c'] }), event('evt_1'), null);
      expect(await store.nodes.claimGpus('node_1', ['GPU-d'], 'rep_1', 27)).toBe(true);
      expect(await store.instances.claimedGpuUuids()).toEqual(new Set(['GPU-c', 'GPU-d']));
    });

    it('claims GPUs all or nothing and releases them by owner', async () => {
      expect(await store.nodes.claimGpus('node_1', ['GPU-a', 'GPU-b'], 'inst_1', 1)).toBe(true);
      expect(await store.nodes.claimGpus('node_1', ['GPU-c', 'GPU-b'], 'inst_2', 2)).toBe(false);
      expect((await store.nodes.listClaims()).map((c) => [c.gpuUuid, c.owner])).toEqual([
        ['GPU-a', 'inst_1'],
        ['GPU-b', 'inst_1'],
      ]);
      expect(await store.nodes.releaseClaims('inst_1')).toBe(2);
      expect(await store.nodes.claimGpus('node_1', ['GPU-c', 'GPU-b'], 'inst_2', 3)).toBe(true);
    });
  });

  describe('instances and charges', () => {
    const charge = (id: string, amountMicros: number, createdAt = 1) => ({
      id,
      orgId: 'org_1',
      instanceId: 'inst_1',
      kind: 'reservation' as const,
      amountMicros,
      description: id,
      createdAt,
    });

    it('creates with GPU claims, an event and a charge; a taken GPU fails the whole create', async () => {
      await store.instances.create(instance('inst_1', { gpuUuids: ['GPU-a', 'GPU-b'] }), event('evt_1'), charge('chg_1', 3_000_000));
      expect(await store.instances.get('inst_1')).toEqual(instance('inst_1', { gpuUuids: ['GPU-a', 'GPU-b'] }));
      expect(await store.instances.claimedGpuUuids()).toEqual(new Set(['GPU-a', 'GPU-b']));
      await expect(store.instances.create(instance('inst_2', { gpuUuids: ['GPU-c', 'GPU-b'] }), event('evt_2'), charge('chg_2', 1))).rejects.toBeInstanceOf(GpuAlreadyClaimed);
      expect(await store.instances.get('inst_2')).toBeUndefined();
      expect(await store.instances.claimedGpuUuids()).toEqual(new Set(['GPU-a', 'GPU-b']));
      expect((await store.events.list()).map((e) => e.id)).toEqual(['evt_1']);
      expect((await store.instances.chargesFor('inst_1')).map((c) => c.id)).toEqual(['chg_1']);
    });

    it('extends a reservation by each request\'s hours, concurrent ones too, each with its charge; refuses an ending, expired, on-demand or over-long one, writing nothing', async () => {
      const HOUR = 3_600_000;
      await store.instances.create(instance('inst_1', { status: 'ready', durationHours: 1.5, expiresAt: 10 * HOUR }), event('evt_1'), charge('chg_1', 3_000_000));
      const extend = (hours: number, now: number, id = 'inst_1', max = 720) =>
        store.instances.extend(id, { hours, maxTotalHours: max, now }, { ...charge(`chg_x${hours}_${now}_${Math.random()}`, hours * 1_000_000, now), kind: 'extension' });
      const extended = await Promise.all([10, 10, 10, 10].map((h) => extend(h, HOUR)));
      expect(extended.every((r) => r !== undefined)).toBe(true);
      expect(await store.instances.get('inst_1')).toMatchObject({ durationHours: 41.5, expiresAt: 50 * HOUR });
      expect((await store.instances.chargesFor('inst_1')).filter((c) => c.kind === 'extension')).toHaveLength(4);
      // Over the total, past the expiry, on demand: nothing changes, nothing is charged.
      expect(await extend(700, HOUR, 'inst_1', 720)).toBeUndefined();
      expect(await extend(1, 50 * HOUR)).toBeUndefined();
      await store.instances.create(onDemand('inst_2'), event('evt_2'), null);
      expect(await extend(1, HOUR, 'inst_2')).toBeUndefined();
      await store.instances.transition('inst_1', 'ready', { status: 'draining', updatedAt: 2 * HOUR }, () => event('evt_drain'), null);
      expect(await extend(1, 2 * HOUR)).toBeUndefined();
      expect(await store.instances.get('inst_1')).toMatchObject({ durationHours: 41.5, expiresAt: 50 * HOUR });
      expect((await store.instances.chargesFor('inst_1')).filter((c) => c.kind === 'extension')).toHaveLength(4);
      expect(await store.instances.chargesFor('inst_2')).toEqual([]);
    });

    it('expires a reservation only if it is still due: one extended meanwhile runs on', async () => {
      await store.instances.create(instance('inst_1', { status: 'ready', expiresAt: 1_000 }), event('evt_1'), null);
      const drain = (expiredBy: number) => store.instances.transition('inst_1', 'ready', { status: 'draining', updatedAt: expiredBy }, () => event(`evt_${expiredBy}`), null, expiredBy);
      expect(await drain(999)).toBeUndefined();
      expect(await store.instances.get('inst_1')).toMatchObject({ status: 'ready' });
      expect(await drain(1_000)).toMatchObject({ status: 'draining' });
    });

    it('transitions only from the expected status, releases GPUs when terminal and refunds what was charged', async () => {
      await store.instances.create(instance('inst_1', { expiresAt: 99 }), event('evt_1'), charge('chg_1', 3_000_000));
      await store.instances.update('inst_1', { updatedAt: 2 }, charge('chg_2', 1_500_000, 2));
      const ready = await store.instances.transition('inst_1', 'provisioning', { status: 'ready', readyAt: 3, updatedAt: 3 }, (i) => event('evt_ready', 'instance.lifecycle', i.id), null);
      expect(ready).toMatchObject({ status: 'ready', readyAt: 3, expiresAt: 99 });
      expect(await store.instances.transition('inst_1', 'provisioning', { status: 'failed', updatedAt: 4 }, () => event('evt_no'), null)).toBeUndefined();
      const failed = await store.instances.transition(
        'inst_1',
        'ready',
        { status: 'failed', failureReason: 'node lost', terminatedAt: 5, updatedAt: 5 },
        (i) => event('evt_failed', 'instance.lifecycle', i.id),
        { refund: true, id: 'chg_refund', orgId: 'org_1', instanceId: 'inst_1', description: 'refund', createdAt: 5 },
      );
      expect(failed).toMatchObject({ status: 'failed', failureReason: 'node lost' });
      expect(await store.instances.claimedGpuUuids()).toEqual(new Set());
      expect((await store.instances.chargesFor('inst_1')).map((c) => [c.id, c.kind, c.amountMicros])).toEqual([
        ['chg_1', 'reservation', 3_000_000],
        ['chg_2', 'reservation', 1_500_000],
        ['chg_refund', 'refund', -4_500_000],
      ]);
      expect((await store.events.list()).map((e) => e.id)).toEqual(['evt_1', 'evt_ready', 'evt_failed']);
      expect(await store.instances.listActive()).toEqual([]);
    });

    it('pages instances and charges newest first by keyset, filtered by status', async () => {
      for (let i = 0; i < 5; i++) {
        await store.instances.create(instance(`inst_${i}`, { createdAt: 10 + Math.floor(i / 2), status: i % 2 ? 'ready' : 'provisioning' }), event(`evt_${i}`), null);
      }
      const first = await store.instances.list('org_1', { limit: 2 });
      expect(first.data.map((i) => i.id)).toEqual(['inst_4', 'inst_3']);
      expect(first.hasMore).toBe(true);
      const second = await store.instances.list('org_1', { limit: 2, after: 'inst_3' });
      expect(second.data.map((i) => i.id)).toEqual(['inst_2', 'inst_1']);
      const last = await store.instances.list('org_1', { limit: 2, after: 'inst_1' });
      expect(last).toMatchObject({ data: [{ id: 'inst_0' }], hasMore: false });
      expect((await store.instances.list('org_1', { limit: 10, statuses: ['ready'] })).data.map((i) => i.id)).toEqual(['inst_3', 'inst_1']);
      expect(await store.instances.list('org_other', { limit: 10, after: 'inst_3' })).toEqual({ data: [], hasMore: false });
      expect((await store.instances.listActiveOnNode('node_1')).length).toBe(5);
      expect(await store.instances.listActiveOnNode('node_2')).toEqual([]);
    });

    it('accrues a running on-demand instance once per boundary; its end bills only the rest, with the 60 s minimum on the whole run', async () => {
      // 3.60 USD per GPU-hour: 1,000 micro-dollars a second.
      await store.instances.create(onDemand('inst_1'), event('evt_1'), null);
      expect(await store.instances.accrueOnDemand('inst_1', 30, { id: 'chg_a', createdAt: 30_999 })).toMatchObject({ kind: 'on_demand', amountMicros: 30_000, createdAt: 30_999 });
      // The month end run twice (a restart, a second replica), or an older boundary: nothing more.
      expect(await store.instances.accrueOnDemand('inst_1', 30, { id: 'chg_b', createdAt: 30_999 })).toBeUndefined();
      expect(await store.instances.accrueOnDemand('inst_1', 20, { id: 'chg_c', createdAt: 20_999 })).toBeUndefined();
      // It ends 10 s later: 40 s run, 60 s billed in all, so its end bills 30 s.
      const ended = await store.instances.transition('inst_1', 'ready', { status: 'terminated', terminatedAt: 41_000, updatedAt: 41_000 }, (i) => event('evt_end', 'instance.lifecycle', i.id), {
        onDemandSeconds: 60,
        id: 'chg_end',
        orgId: 'org_1',
        instanceId: 'inst_1',
        createdAt: 41_000,
      });
      expect(ended).toMatchObject({ status: 'terminated' });
      expect(await store.instances.accrueOnDemand('inst_1', 100, { id: 'chg_d', createdAt: 99_999 })).toBeUndefined();
      expect((await store.instances.chargesFor('inst_1')).map((c) => [c.id, c.kind, c.amountMicros])).toEqual([
        ['chg_a', 'on_demand', 30_000],
        ['chg_end', 'on_demand', 30_000],
      ]);
      expect((await store.ledger.account('org_1', '1970-01')).spentNanos).toBe(60_000_000);

      // Draining is billed too; a stop reported before the last boundary gives the difference back.
      await store.instances.create(onDemand('inst_2', { status: 'draining' }), event('evt_2'), null);
      expect(await store.instances.accrueOnDemand('inst_2', 3_600, { id: 'chg_2a', createdAt: 3_600_999 })).toMatchObject({ amountMicros: 3_600_000 });
      await store.instances.transition('inst_2', 'draining', { status: 'terminated', updatedAt: 3_700_000 }, (i) => event('evt_2end', 'instance.lifecycle', i.id), {
        onDemandSeconds: 3_000,
        id: 'chg_2end',
        orgId: 'org_1',
        instanceId: 'inst_2',
        createdAt: 3_700_000,
      });
      expect((await store.instances.chargesFor('inst_2')).map((c) => c.amountMicros)).toEqual([3_600_000, -600_000]);

      // Reservations, and instances not ready yet, are not accrued.
      await store.instances.create(instance('inst_3', { status: 'ready', readyAt: 1_000 }), event('evt_3'), null);
      await store.instances.create(onDemand('inst_4', { status: 'starting', readyAt: null }), event('evt_4'), null);
      expect(await store.instances.accrueOnDemand('inst_3', 3_600, { id: 'chg_3', createdAt: 1 })).toBeUndefined();
      expect(await store.instances.accrueOnDemand('inst_4', 3_600, { id: 'chg_4', createdAt: 1 })).toBeUndefined();
      expect(await store.instances.chargesFor('inst_3')).toEqual([]);
    });
  });

  describe('replicas', () => {
    it('inserts with GPU claims and changes only from the expected status, releasing GPUs at the end', async () => {
      await store.replicas.create(replica('rep_1'));
      await expect(store.replicas.create(replica('rep_2', { gpuUuids: ['GPU-rep_1'] }))).rejects.toBeInstanceOf(GpuAlreadyClaimed);
      await store.replicas.create(replica('rep_3', { createdAt: 2, gpuUuids: [] }));
      expect(await store.replicas.get('rep_1')).toEqual(replica('rep_1'));
      expect(await store.replicas.update('rep_1', 'running', { status: 'stopped', changedAt: 3 })).toBeUndefined();
      expect(await store.replicas.update('rep_1', 'scheduled', { status: 'running', endpoint: '127.0.0.1:9', changedAt: 3 })).toMatchObject({ status: 'running', endpoint: '127.0.0.1:9' });
      expect(await store.replicas.update('rep_1', 'running', { status: 'stopped', endedAt: 4, changedAt: 4 })).toMatchObject({ status: 'stopped' });
      expect(await store.instances.claimedGpuUuids()).toEqual(new Set());
      expect((await store.replicas.listActive()).map((r) => r.id)).toEqual(['rep_3']);
      expect((await store.replicas.list({ includeEnded: true, limit: 10 })).map((r) => r.id)).toEqual(['rep_3', 'rep_1']);
      expect((await store.replicas.list({ includeEnded: false, limit: 10 })).map((r) => r.id)).toEqual(['rep_3']);
    });
  });

  describe('operators', () => {
    it('keeps operator keys by hash, revokes once, and appends the audit trail newest first', async () => {
      const key = { id: 'opk_1', name: 'on-call', scopes: ['operator:read' as const], last4: 'abcd', createdAt: 5, createdBy: 'local', revokedAt: null };
      const hash = Buffer.alloc(32, 7);
      await store.operators.createKey(key, hash);
      await expect(store.operators.createKey({ ...key, id: 'opk_2' }, hash)).rejects.toThrow();
      expect(await store.operators.findKeyByHash(hash)).toEqual({ key, hash });
      expect(await store.operators.findKeyByHash(Buffer.alloc(32, 8))).toBeUndefined();
      expect((await store.operators.revokeKey('opk_1', 9))?.revokedAt).toBe(9);
      expect((await store.operators.revokeKey('opk_1', 99))?.revokedAt).toBe(9);
      expect((await store.operators.listKeys()).map((k) => k.id)).toEqual(['opk_1']);
      const first = await store.operators.appendAudit({ at: 1, actor: 'opk_1', action: 'cordon', target: 'node_1', detail: { why: 'xid 79' } });
      const second = await store.operators.appendAudit({ at: 2, actor: 'local', action: 'uncordon', target: null, detail: {} });
      expect(second.seq).toBeGreaterThan(first.seq);
      expect(await store.operators.listAudit(10)).toEqual([second, first]);
    });
  });

  describe('usage', () => {
    it('appends records in one batch and pages them newest first, filtered by model and key', async () => {
      await store.usage.append(Array.from({ length: 6 }, (_, i) => usage(i, { model: i < 4 ? 'm' : 'other', keyId: i === 1 ? 'key_2' : 'key_1' })));
      const page = await store.usage.list('org_1', { limit: 3 });
      expect(page.data.map((u) => u.id)).toEqual(['usage_005', 'usage_004', 'usage_003']);
      expect(page.data[1]).toEqual(usage(4, { model: 'other' }));
      expect((await store.usage.list('org_1', { limit: 3, after: 'usage_003' })).data.map((u) => u.id)).toEqual(['usage_002', 'usage_001', 'usage_000']);
      expect((await store.usage.list('org_1', { limit: 10, model: 'm', keyId: 'key_1' })).data.map((u) => u.id)).toEqual(['usage_003', 'usage_002', 'usage_000']);
      await store.usage.append([]);
      await expect(store.usage.append([usage(0)])).rejects.toThrow();
    });

    it("keeps a batch whose tenant-written text holds U+0000 (PostgreSQL text cannot: it stores U+FFFD)", async () => {
      await store.usage.append([usage(1, { user: 'a\u0000b' }), usage(2)]);
      const stored = (await store.usage.list('org_1', { limit: 10 })).data;
      expect(stored.map((u) => u.id)).toEqual(['usage_002', 'usage_001']);
      expect(stored[1]!.user).toBe(engine === 'postgres' ? 'a\uFFFDb' : 'a\u0000b');
      await store.keys.create({ ...apiKey('key_nul'), name: 'x\u0000' }, secret('nul-value', 'key_nul'));
      expect((await store.keys.get('key_nul'))?.name).toHaveLength(2);
    });

    it('keeps tenant text with array-literal characters, and a batch past 65,535 values, intact and in full', async () => {
      const odd = ['{a,b}', 'say "hi"', 'back\\slash', 'NULL', '', ' padded ', 'é ✓'];
      await store.usage.append(odd.map((user, i) => usage(i, { user })));
      const stored = (await store.usage.list('org_1', { limit: 10 })).data;
      expect(stored.map((u) => u.user).reverse()).toEqual(odd);

      const big = Array.from({ length: 5_000 }, (_, i) => usage(1_000 + i, { id: `usage_big_${i}`, orgId: 'org_2', costNanos: 3 }));
      await store.usage.append(big);
      let count = 0;
      for (let after: string | undefined; ; ) {
        const page = await store.usage.list('org_2', { limit: 100, ...(after ? { after } : {}) });
        count += page.data.length;
        if (!page.hasMore) break;
        after = page.data.at(-1)!.id;
      }
      expect(count).toBe(5_000);
    });

    it('filters by a time range and finds the newest record of a request, in its org only', async () => {
      await store.usage.append(Array.from({ length: 6 }, (_, i) => usage(i, { createdAt: 1_000 + i * 10 })));
      await store.usage.append([usage(6, { requestId: 'req_2', createdAt: 1_100 }), usage(7, { orgId: 'org_2', requestId: 'req_x', createdAt: 1_200 })]);
      expect((await store.usage.list('org_1', { limit: 10, from: 1_010, to: 1_040 })).data.map((u) => u.id)).toEqual(['usage_003', 'usage_002', 'usage_001']);
      expect((await store.usage.list('org_1', { limit: 10, from: 1_050 })).data.map((u) => u.id)).toEqual(['usage_006', 'usage_005']);
      expect((await store.usage.list('org_1', { limit: 2, to: 1_030, after: 'usage_002' })).data.map((u) => u.id)).toEqual(['usage_001', 'usage_000']);
      expect(await store.usage.byRequest('org_1', 'req_2')).toEqual(usage(6, { requestId: 'req_2', createdAt: 1_100 }));
      expect((await store.usage.byRequest('org_1', 'req_1'))?.durationMs).toBe(251);
      expect(await store.usage.byRequest('org_1', 'req_x')).toBeUndefined();
      expect((await store.usage.byRequest('org_2', 'req_x'))?.id).toBe('usage_007');
    });

    it('refuses to change, remove or truncate a usage record: the ledger is append-only', async () => {
      /** Raw SQL as a tool or a careless migration would run it, bypassing the store. */
      const exec = async (sql: string): Promise<void> => {
        if (engine === 'sqlite') (store as SqliteStore).db.prepare(sql).run();
        else await (store as PostgresStore).pool.query(sql);
      };
      const records = [usage(1, { costNanos: 700 }), usage(2, { costNanos: 0, sandbox: true })];
      await store.usage.append(records);
      const before = await store.ledger.account('org_1', '1970-01');
      await expect(exec("UPDATE usage_records SET cost_nanos = 0 WHERE id = 'usage_001'")).rejects.toThrow(/append-only/);
      // Not even a redaction of the tenant's own `user` field, nor a sandbox record.
      await expect(exec(`UPDATE usage_records SET "user" = NULL WHERE id = 'usage_001'`)).rejects.toThrow(/append-only/);
      await expect(exec("DELETE FROM usage_records WHERE id = 'usage_002'")).rejects.toThrow(/append-only/);
      await expect(exec('DELETE FROM usage_records')).rejects.toThrow(/append-only/);
      if (engine === 'postgres') await expect(exec('TRUNCATE usage_records')).rejects.toThrow(/append-only/);
      expect((await store.usage.list('org_1', { limit: 10 })).data).toEqual([...records].reverse());
      expect(await store.ledger.account('org_1', '1970-01')).toEqual(before);
      expect(before.spentNanos).toBe(700);
    });

    it('counts sandbox tokens per key and day without passing the cap', async () => {
      expect(await store.usage.takeSandboxTokens('key_1', '2026-11-24', 60, 100)).toEqual({ used: 0, taken: true });
      expect(await store.usage.takeSandboxTokens('key_1', '2026-11-24', 50, 100)).toEqual({ used: 60, taken: false });
      expect(await store.usage.takeSandboxTokens('key_1', '2026-11-24', 40, 100)).toEqual({ used: 60, taken: true });
      expect(await store.usage.takeSandboxTokens('key_1', '2026-11-25', 100, 100)).toEqual({ used: 0, taken: true });
      expect(await store.usage.takeSandboxTokens('key_2', '2026-11-24', 101, 100)).toEqual({ used: 0, taken: false });
      expect(await store.usage.sandboxTokensUsed('key_1', '2026-11-24')).toBe(100);
      expect(await store.usage.sandboxTokensUsed('key_2', '2026-11-24')).toBe(0);
    });
  });

  describe('webhooks', () => {
    const sub = (id: string) => ({ id, orgId: 'org_1', url: 'https://example.test/hook', eventTypes: ['*'], description: null, status: 'enabled' as const, disabledReason: null, createdAt: 1 });
    const whsec = (subscriptionId: string, value: string, createdAt = 1) => ({ subscriptionId, secret: value, createdAt, expiresAt: null });
    const planAll = (events: { seq: number; subject: string | null }[], subs: { id: string; fromSeq: number }[]) =>
      events.flatMap((e) => subs.filter((s) => e.seq > s.fromSeq).map((s) => ({ id: `del_${s.id}_${e.seq}`, subscriptionId: s.id, eventSeq: e.seq, subject: e.subject, nextAttemptAt: 0, createdAt: 1 })));

    it('subscriptions receive the events after them, fanned out once, in subject order', async () => {
      const before = await store.events.append(event('evt_0'));
      const created = await store.webhooks.createSubscription(sub('wh_1'), whsec('wh_1', 'whsec_a'));
      expect(created.fromSeq).toBe(before.seq);
      const e1 = await store.events.append(event('evt_1', 't', 'inst_1'));
      const e2 = await store.events.append(event('evt_2', 't', 'inst_1'));
      expect(await store.webhooks.fanOut(100, planAll)).toBe(3);
      expect(await store.webhooks.fanOut(100, planAll)).toBe(0);
      // The second event of a subject waits for the first.
      const due = await store.webhooks.dueDeliveries(10, 10);
      expect(due.map((d) => [d.delivery.eventSeq, d.event.id, d.subscription.id])).toEqual([[e1.seq, 'evt_1', 'wh_1']]);
      expect(due[0]!.event.data).toEqual({ id: 'evt_1', nested: { n: 1 } });
      const id1 = `del_wh_1_${e1.seq}`;
      await store.webhooks.recordAttempt(
        { deliveryId: id1, attempt: 1, startedAt: 10, durationMs: 5, statusCode: 500, error: null, nextAttemptAt: 20 },
        { status: 'pending', failedInRun: 1, nextAttemptAt: 20 },
      );
      expect(await store.webhooks.dueDeliveries(10, 10)).toEqual([]);
      await store.webhooks.recordAttempt(
        { deliveryId: id1, attempt: 2, startedAt: 20, durationMs: 5, statusCode: 200, error: null, nextAttemptAt: null },
        { status: 'succeeded', failedInRun: 1, nextAttemptAt: null },
      );
      expect((await store.webhooks.dueDeliveries(20, 10)).map((d) => d.delivery.eventSeq)).toEqual([e2.seq]);
      const history = await store.webhooks.listDeliveries('wh_1', { limit: 10 });
      expect(history.map((h) => [h.eventId, h.delivery.status, h.attempts.map((a) => a.statusCode)])).toEqual([
        ['evt_2', 'pending', []],
        ['evt_1', 'succeeded', [500, 200]],
      ]);
      expect((await store.webhooks.listDeliveries('wh_1', { limit: 10, after: `del_wh_1_${e2.seq}` })).map((h) => h.eventId)).toEqual(['evt_1']);
      expect(await store.webhooks.redeliver(id1, 30)).toMatchObject({ status: 'pending', failedInRun: 0, finishedAt: null, attemptCount: 2 });
      expect(await store.webhooks.redeliver('del_missing', 30)).toBeUndefined();
    });

    it(`lists a delivery's latest ${LISTED_ATTEMPTS_PER_DELIVERY} attempts, oldest first, and counts its attempts since a time`, async () => {
      await store.webhooks.createSubscription(sub('wh_1'), whsec('wh_1', 'whsec_a'));
      const e = await store.events.append(event('evt_1'));
      await store.webhooks.fanOut(10, planAll);
      const id = `del_wh_1_${e.seq}`;
      const total = LISTED_ATTEMPTS_PER_DELIVERY + 5;
      for (let attempt = 1; attempt <= total; attempt++) {
        await store.webhooks.recordAttempt(
          { deliveryId: id, attempt, startedAt: 100 * attempt, durationMs: 1, statusCode: 500, error: null, nextAttemptAt: 100 * attempt + 50 },
          { status: 'pending', failedInRun: attempt, nextAttemptAt: 100 * attempt + 50 },
        );
      }
      const [history] = await store.webhooks.listDeliveries('wh_1', { limit: 10 });
      expect(history!.delivery.attemptCount).toBe(total);
      expect(history!.attempts.map((a) => a.attempt)).toEqual(Array.from({ length: LISTED_ATTEMPTS_PER_DELIVERY }, (_, i) => total - LISTED_ATTEMPTS_PER_DELIVERY + 1 + i));
      expect(await store.webhooks.attemptsSince(id, 100 * (total - 2))).toEqual({ count: 3, oldestAt: 100 * (total - 2) });
      expect(await store.webhooks.attemptsSince(id, 100 * total + 1)).toEqual({ count: 0, oldestAt: null });
    });

    it('finds due deliveries past the organizations a caller excludes', async () => {
      await store.orgs.create(org('org_2'));
      await store.webhooks.createSubscription(sub('wh_1'), whsec('wh_1', 'whsec_a'));
      await store.webhooks.createSubscription({ ...sub('wh_2'), orgId: 'org_2' }, whsec('wh_2', 'whsec_b'));
      await store.events.append(event('evt_1'));
      await store.webhooks.fanOut(10, planAll);
      const subscriptionsOf = async (exclude?: string[]) => (await store.webhooks.dueDeliveries(10, 10, exclude)).map((d) => d.subscription.id).sort();
      expect(await subscriptionsOf()).toEqual(['wh_1', 'wh_2']);
      expect(await subscriptionsOf([])).toEqual(['wh_1', 'wh_2']);
      expect(await subscriptionsOf(['org_1'])).toEqual(['wh_2']);
      expect(await subscriptionsOf(['org_1', 'org_2'])).toEqual([]);
    });

    it('rotates secrets, disables on request, and deletes a subscription with everything under it', async () => {
      await store.webhooks.createSubscription(sub('wh_1'), whsec('wh_1', 'whsec_a', 1));
      expect(await store.webhooks.rotateSecret('wh_1', whsec('wh_1', 'whsec_b', 2), 50)).toBe(true);
      expect(await store.webhooks.rotateSecret('wh_missing', whsec('wh_missing', 'x'), 50)).toBe(false);
      expect((await store.webhooks.activeSecrets('wh_1', 10)).map((s) => s.secret)).toEqual(['whsec_b', 'whsec_a']);
      expect((await store.webhooks.activeSecrets('wh_1', 50)).map((s) => s.secret)).toEqual(['whsec_b']);
      // Rotations while an overlap runs end the earlier one: two secrets sign at most.
      for (let i = 0; i < 5; i++) expect(await store.webhooks.rotateSecret('wh_1', whsec('wh_1', `whsec_c${i}`, 3 + i), 1_000)).toBe(true);
      expect((await store.webhooks.activeSecrets('wh_1', 8)).map((s) => s.secret)).toEqual(['whsec_c4', 'whsec_c3']);
      expect((await store.webhooks.activeSecrets('wh_1', 1_000)).map((s) => s.secret)).toEqual(['whsec_c4']);
      const e = await store.events.append(event('evt_1'));
      await store.webhooks.fanOut(10, planAll);
      await store.webhooks.recordAttempt(
        { deliveryId: `del_wh_1_${e.seq}`, attempt: 1, startedAt: 1, durationMs: 1, statusCode: 410, error: null, nextAttemptAt: null },
        { status: 'failed', failedInRun: 1, nextAttemptAt: null, disableReason: 'endpoint answered 410' },
      );
      expect(await store.webhooks.getSubscription('wh_1')).toMatchObject({ status: 'disabled', disabledReason: 'endpoint answered 410' });
      expect((await store.webhooks.listSubscriptions('org_1')).map((s) => s.id)).toEqual(['wh_1']);
      expect(await store.webhooks.deleteSubscription('wh_1')).toBe(true);
      expect(await store.webhooks.deleteSubscription('wh_1')).toBe(false);
      expect(await store.webhooks.getDelivery(`del_wh_1_${e.seq}`)).toBeUndefined();
      // An attempt that finishes after its subscription was deleted records nothing.
      await store.webhooks.recordAttempt(
        { deliveryId: `del_wh_1_${e.seq}`, attempt: 2, startedAt: 1, durationMs: 1, statusCode: 200, error: null, nextAttemptAt: null },
        { status: 'succeeded', failedInRun: 0, nextAttemptAt: null },
      );
      expect(await store.webhooks.listSubscriptions()).toEqual([]);
    });

    it('counts the pending deliveries of enabled subscriptions as the backlog, with the oldest', async () => {
      expect(await store.webhooks.deliveryBacklog()).toEqual({ pending: 0, oldestCreatedAt: null });
      await store.webhooks.createSubscription(sub('wh_1'), whsec('wh_1', 'whsec_a'));
      await store.webhooks.createSubscription(sub('wh_2'), whsec('wh_2', 'whsec_b'));
      const seqs = [];
      for (let i = 0; i < 3; i++) seqs.push((await store.events.append(event(`evt_${i}`))).seq);
      const plan = (events: { seq: number; subject: string | null }[], subs: { id: string; fromSeq: number }[]) =>
        events.flatMap((e) => subs.map((s) => ({ id: `del_${s.id}_${e.seq}`, subscriptionId: s.id, eventSeq: e.seq, subject: null, nextAttemptAt: 0, createdAt: 100 + e.seq })));
      await store.webhooks.fanOut(100, plan);
      expect(await store.webhooks.deliveryBacklog()).toEqual({ pending: 6, oldestCreatedAt: 100 + seqs[0]! });
      await store.webhooks.recordAttempt(
        { deliveryId: `del_wh_1_${seqs[0]}`, attempt: 1, startedAt: 1, durationMs: 1, statusCode: 200, error: null, nextAttemptAt: null },
        { status: 'succeeded', failedInRun: 0, nextAttemptAt: null },
      );
      // A disabled endpoint's deliveries wait for it, not for us.
      await store.webhooks.recordAttempt(
        { deliveryId: `del_wh_2_${seqs[0]}`, attempt: 1, startedAt: 1, durationMs: 1, statusCode: 410, error: null, nextAttemptAt: null },
        { status: 'failed', failedInRun: 1, nextAttemptAt: null, disableReason: 'endpoint answered 410' },
      );
      expect(await store.webhooks.deliveryBacklog()).toEqual({ pending: 2, oldestCreatedAt: 100 + seqs[1]! });
    });

    it('announces a deprecation once', async () => {
      expect(await store.webhooks.announceDeprecation('m', '2027-01-01', event('evt_dep_1'))).toBe(true);
      expect(await store.webhooks.announceDeprecation('m', '2027-01-01', event('evt_dep_2'))).toBe(false);
      expect(await store.webhooks.announcedDeprecations()).toEqual(new Set(['m 2027-01-01']));
      expect((await store.events.list()).map((e) => e.id)).toEqual(['evt_dep_1']);
    });
  });

  describe('stored responses', () => {
    const stored = (id: string, over: Partial<StoredResponseRecord> = {}): StoredResponseRecord => ({
      id,
      orgId: 'org_1',
      response: { id, object: 'response', output: [{ type: 'message', content: [{ type: 'output_text', text: 'hi \u00e9' }] }] },
      history: [{ role: 'user', content: 'hello' }, { role: 'assistant', content: 'hi' }],
      createdAt: 10,
      expiresAt: 100,
      ...over,
    });

    it('reads a response back in its org only, until it expires; deletes and purges', async () => {
      await store.responses.put(stored('resp_1'));
      await store.responses.put(stored('resp_2', { orgId: 'org_2' }));
      await store.responses.put(stored('resp_3', { expiresAt: 50 }));
      expect(await store.responses.get('org_1', 'resp_1', 99)).toEqual(stored('resp_1'));
      expect(await store.responses.getResponse('org_1', 'resp_1', 99)).toEqual(stored('resp_1').response);
      expect(await store.responses.get('org_1', 'resp_1', 100)).toBeUndefined();
      expect(await store.responses.get('org_1', 'resp_2', 10)).toBeUndefined();
      expect(await store.responses.getResponse('org_1', 'resp_2', 10)).toBeUndefined();
      expect(await store.responses.delete('org_1', 'resp_2', 10)).toBe(false);
      expect(await store.responses.delete('org_1', 'resp_3', 50)).toBe(false);
      expect(await store.responses.delete('org_1', 'resp_1', 10)).toBe(true);
      expect(await store.responses.delete('org_1', 'resp_1', 10)).toBe(false);
      await expect(store.responses.put(stored('resp_2'))).rejects.toThrow();
      expect(await store.responses.purgeExpired(50)).toBe(1);
      expect(await store.responses.get('org_2', 'resp_2', 10)).toEqual(stored('resp_2', { orgId: 'org_2' }));
    });
  });

  describe('remediations', () => {
    const remediation = (id: string, over: Partial<RemediationRecord> = {}): RemediationRecord => ({
      id,
      nodeId: 'node_1',
      gpuUuid: 'GPU-a',
      gpuIndex: 0,
      xid: 48,
      action: 'RESET_GPU' as RemediationRecord['action'],
      kind: 'reset_gpu',
      stage: 'waiting_idle',
      fault: 'XID 48: double-bit ECC error',
      detail: 'waiting for the GPU to be idle',
      commandId: null,
      holders: ['inst_1'],
      triggerSeq: 1,
      openedAt: 10,
      updatedAt: 10,
      closedAt: null,
      outcome: null,
      ...over,
    });
    const timeline = (message: string, at: number): HealthEventRecord => ({ nodeId: 'node_1', gpuUuid: 'GPU-a', gpuIndex: 0, kind: 'remediation', xid: 48, healthy: null, message, at });

    beforeEach(async () => {
      await store.nodes.createToken(token('ntk_a', 'a'));
      await store.nodes.enroll(Buffer.from('a'), 10, node('node_1'), Buffer.from('s'));
    });

    it('commits a step at once: the row, its timeline, events, the reset command, the drain and the cursor', async () => {
      expect(await store.remediations!.cursor()).toBe(0);
      const xid = await store.nodes.recordHealthEvent({ ...timeline('XID 48', 5), kind: 'xid', healthy: false });
      expect((await store.remediations!.healthEventsAfter(0, 10)).map((e) => e.seq)).toEqual([xid.seq]);
      await store.remediations!.apply({
        cursor: xid.seq,
        records: [remediation('rem_1', { triggerSeq: xid.seq })],
        timeline: [timeline('remediation opened', 10)],
        events: [event('evt_health', 'instance.health', 'inst_1')],
        command: { id: 'cmd_1', nodeId: 'node_1', kind: 'reset_gpu', args: { gpuUuid: 'GPU-a' }, state: 'pending', createdAt: 10, sentAt: null, finishedAt: null, errorCode: null, errorMessage: null },
        drainNode: 'node_1',
      });
      expect(await store.remediations!.cursor()).toBe(xid.seq);
      expect(await store.remediations!.listOpen()).toEqual([remediation('rem_1', { triggerSeq: xid.seq })]);
      expect((await store.remediations!.healthEventsAfter(xid.seq, 10)).map((e) => [e.kind, e.message])).toEqual([['remediation', 'remediation opened']]);
      expect((await store.events.list()).map((e) => e.id)).toEqual(['evt_health']);
      expect(await store.nodes.getCommand('cmd_1')).toMatchObject({ kind: 'reset_gpu', state: 'pending', args: { gpuUuid: 'GPU-a' } });
      expect(await store.nodes.getNode('node_1')).toMatchObject({ cordoned: true, draining: true });

      // The next step updates the row in place; the cursor never goes back.
      await store.remediations!.apply({ cursor: 0, records: [remediation('rem_1', { triggerSeq: xid.seq, stage: 'closed', closedAt: 20, updatedAt: 20, outcome: 'reset', holders: [] })] });
      expect(await store.remediations!.cursor()).toBe(xid.seq);
      expect(await store.remediations!.listOpen()).toEqual([]);
      await store.remediations!.apply({ records: [remediation('rem_2', { gpuUuid: 'GPU-b', openedAt: 30 })] });
      expect((await store.remediations!.list({ limit: 10 })).map((r) => [r.id, r.stage])).toEqual([['rem_2', 'waiting_idle'], ['rem_1', 'closed']]);
      expect((await store.remediations!.list({ gpuUuid: 'GPU-a', limit: 10 })).map((r) => r.id)).toEqual(['rem_1']);
      expect((await store.remediations!.list({ nodeId: 'node_1', gpuUuid: 'GPU-b', limit: 10 })).map((r) => r.id)).toEqual(['rem_2']);
      expect(await store.remediations!.list({ nodeId: 'node_2', limit: 10 })).toEqual([]);
      expect((await store.remediations!.list({ limit: 1 })).map((r) => r.id)).toEqual(['rem_2']);
    });

    it('rolls a failing step back whole', async () => {
      const bad = { ...remediation('rem_1'), kind: 'explode' as RemediationRecord['kind'] };
      await expect(store.remediations!.apply({ cursor: 7, records: [bad], events: [event('evt_1')], drainNode: 'node_1' })).rejects.toThrow();
      expect(await store.remediations!.cursor()).toBe(0);
      expect(await store.events.list()).toEqual([]);
      expect(await store.nodes.getNode('node_1')).toMatchObject({ cordoned: false, draining: false });
    });
  });

  describe('ledger', () => {
    const NOV = Date.UTC(2026, 10, 1);
    const DEC = Date.UTC(2026, 11, 1);
    const credit = (id: string, over: Partial<CreditRecord> = {}): CreditRecord => ({
      id,
      orgId: 'org_1',
      kind: 'grant',
      amountNanos: 5_000_000_000,
      instanceId: null,
      period: null,
      description: 'welcome credit',
      createdBy: 'operator',
      createdAt: NOV + 10,
      ...over,
    });
    const charge = (id: string, amountMicros: number, createdAt: number, instanceId = 'inst_1') => ({
      id,
      orgId: 'org_1',
      instanceId,
      kind: 'reservation' as const,
      amountMicros,
      description: id,
      createdAt,
    });
    const draft = (orgId: string, period: string, totalNanos: number): InvoiceDraft => ({
      orgId,
      period,
      periodStart: NOV,
      periodEnd: DEC,
      items: [],
      subtotalNanos: totalNanos,
      creditsNanos: 0,
      totalNanos,
      amountDueCents: Math.round(totalNanos / 1e7),
    });

    it('keeps the account: mode, limits, running totals of charges, live usage and credits, by month', async () => {
      expect(await store.ledger.account('org_1', '2026-11')).toEqual({
        orgId: 'org_1', mode: 'postpaid', creditLimitNanos: null, lowBalanceNanos: null, spentNanos: 0, creditedNanos: 0, periodNanos: 0,
      });
      await store.ledger.setAccount('org_1', { mode: 'prepaid', lowBalanceNanos: 1_000 });
      await store.ledger.setAccount('org_1', { creditLimitNanos: 9 });
      await store.ledger.setAccount('org_1', {});
      await store.instances.create(instance('inst_1', { createdAt: NOV }), event('evt_1'), charge('chg_1', 2_000_000, NOV + 1));
      await store.instances.update('inst_1', { updatedAt: DEC - 1 }, charge('chg_2', 1_000_000, DEC - 1));
      await store.usage.append([
        usage(1, { createdAt: NOV + 2, costNanos: 700 }),
        usage(2, { createdAt: DEC + 2, costNanos: 300, orgId: 'org_2' }),
        usage(3, { createdAt: DEC + 3, costNanos: 50 }),
        usage(4, { createdAt: NOV + 4, costNanos: 999, sandbox: true }),
      ]);
      expect(await store.ledger.addCredit(credit('cr_1'))).toBe(true);
      expect(await store.ledger.addCredit(credit('cr_1'))).toBe(false);
      const spent = 3_000_000_000 + 700 + 50;
      expect(await store.ledger.account('org_1', '2026-11')).toEqual({
        orgId: 'org_1', mode: 'prepaid', creditLimitNanos: 9, lowBalanceNanos: 1_000, spentNanos: spent, creditedNanos: 5_000_000_000, periodNanos: 3_000_000_700 - 5_000_000_000,
      });
      expect((await store.ledger.account('org_1', '2026-12')).periodNanos).toBe(50);
      expect((await store.ledger.account('org_1', '2027-01')).periodNanos).toBe(0);
      await store.ledger.setAccount('org_1', { creditLimitNanos: null });
      expect((await store.ledger.account('org_1', '2026-11')).creditLimitNanos).toBeNull();
      await expect(store.ledger.account('org_missing', '2026-11')).rejects.toThrow();
    });

    it('reads one ledger of charges, live usage and credits, oldest first by keyset, and sums it by hour', async () => {
      await store.instances.create(instance('inst_1', { createdAt: NOV, labels: { 'team.name': 'ml' } }), event('evt_1'), charge('chg_1', 4_000_000, NOV));
      await store.usage.append([usage(1, { createdAt: NOV + 1, costNanos: 11 }), usage(2, { createdAt: NOV + 3_600_000, costNanos: 13, sandbox: true })]);
      await store.ledger.addCredit(credit('cr_1', { createdAt: NOV + 2, kind: 'sla_credit', instanceId: 'inst_1', period: '2026-11', amountNanos: 5 }));
      await store.ledger.addCredit(credit('cr_2', { createdAt: DEC }));
      const lines = await store.ledger.lines('org_1', { from: NOV, to: DEC }, { limit: 2 });
      expect(lines.map((l) => [l.id, l.kind, l.amountNanos])).toEqual([['chg_1', 'reservation', 4_000_000_000], ['usage_001', 'inference', 11]]);
      expect(lines[0]).toMatchObject({ instanceId: 'inst_1', keyId: 'key_1', sku: 'h100x1', pool: 'na', labels: { 'team.name': 'ml' }, gpuSeconds: 4 * 3_600 / 2, requests: 0 });
      expect(lines[1]).toMatchObject({ requestId: 'req_1', model: 'm', inputTokens: 10, outputTokens: 5, requests: 1, description: 'chat m', labels: {} });
      const rest = await store.ledger.lines('org_1', { from: NOV, to: DEC }, { limit: 10, after: { createdAt: lines[1]!.createdAt, id: lines[1]!.id } });
      expect(rest).toEqual([expect.objectContaining({ id: 'cr_1', kind: 'sla_credit', amountNanos: -5, sku: 'h100x1', labels: { 'team.name': 'ml' }, gpuSeconds: 0 })]);
      expect(await store.ledger.lines('org_2', { from: NOV, to: DEC }, { limit: 10 })).toEqual([]);

      const hours = await store.ledger.hourly('org_1', { from: NOV, to: DEC + 1 }, ['kind', 'label:team.name']);
      const byKey = (rows: HourRow[]) => [...rows].sort((a, b) => a.hourStart - b.hourStart || String(a.group).localeCompare(String(b.group)));
      expect(byKey(hours)).toEqual([
        { hourStart: NOV, group: ['inference', null], amountNanos: 11, inputTokens: 10, outputTokens: 5, gpuSeconds: 0, requests: 1, lines: 1 },
        { hourStart: NOV, group: ['reservation', 'ml'], amountNanos: 4_000_000_000, inputTokens: 0, outputTokens: 0, gpuSeconds: 7_200, requests: 0, lines: 1 },
        { hourStart: NOV, group: ['sla_credit', 'ml'], amountNanos: -5, inputTokens: 0, outputTokens: 0, gpuSeconds: 0, requests: 0, lines: 1 },
        { hourStart: DEC, group: ['grant', null], amountNanos: -5_000_000_000, inputTokens: 0, outputTokens: 0, gpuSeconds: 0, requests: 0, lines: 1 },
      ]);
      // A label name is data, never SQL: one that looks like an injection matches no label.
      const odd = await store.ledger.hourly('org_1', { from: NOV, to: DEC }, [`label:x') OR 1=1 --` as `label:${string}`]);
      expect(odd.map((r) => r.group)).toEqual([[null]]);
      expect(await store.ledger.orgsWithLines({ from: NOV, to: DEC })).toEqual(['org_1']);
      expect(await store.ledger.orgsWithLines({ from: DEC + 1, to: DEC + 2 })).toEqual([]);
      expect((await store.ledger.credits('org_1', { from: NOV, to: DEC })).map((c) => [c.id, c.kind, c.amountNanos])).toEqual([['cr_1', 'sla_credit', 5]]);
    });

    it('gives an instance one SLA credit per month, whatever its id', async () => {
      const sla = (id: string, period: string) => credit(id, { kind: 'sla_credit', instanceId: 'inst_1', period, amountNanos: 7 });
      expect(await store.ledger.addCredit(sla('cr_a', '2026-11'))).toBe(true);
      expect(await store.ledger.addCredit(sla('cr_b', '2026-11'))).toBe(false);
      expect(await store.ledger.addCredit(sla('cr_c', '2026-12'))).toBe(true);
      expect(await store.ledger.addCredit(credit('cr_d', { instanceId: 'inst_1', period: '2026-11' }))).toBe(true);
      expect((await store.ledger.account('org_1', '2026-11')).creditedNanos).toBe(7 + 7 + 5_000_000_000);
    });

    it('finalizes an org month once, numbered from one sequence, and keeps it to its org', async () => {
      const number = (n: number) => `INV-${n}`;
      const first = await store.ledger.finalizeInvoice('inv_1', draft('org_1', '2026-11', 1_234), number, 50);
      expect(first).toMatchObject({ id: 'inv_1', number: 'INV-1', finalizedAt: 50, totalNanos: 1_234 });
      expect(await store.ledger.finalizeInvoice('inv_2', draft('org_1', '2026-11', 9), number, 51)).toBeUndefined();
      expect(await store.ledger.finalizeInvoice('inv_3', draft('org_2', '2026-11', 5), number, 52)).toMatchObject({ number: 'INV-2' });
      expect(await store.ledger.finalizeInvoice('inv_4', { ...draft('org_1', '2026-12', 6), periodStart: DEC }, number, 53)).toMatchObject({ number: 'INV-3' });
      expect((await store.ledger.listInvoices('org_1')).map((i) => [i.id, i.period])).toEqual([['inv_4', '2026-12'], ['inv_1', '2026-11']]);
      expect(await store.ledger.getInvoice('org_1', 'inv_1')).toEqual(first);
      expect(await store.ledger.getInvoice('org_1', 'inv_3')).toBeUndefined();
    });

    it('lists the instances the SLA measures, with how each one ended', async () => {
      const move = (id: string, from: InstanceRecord['status'], status: InstanceRecord['status'], at: number, extra: Partial<InstanceRecord> = {}) =>
        store.instances.transition(id, from, { status, updatedAt: at, ...extra }, (i) => event(`evt_${id}_${status}`, 'instance.lifecycle', i.id), null);
      for (const id of ['inst_a', 'inst_b', 'inst_c', 'inst_d', 'inst_f']) await store.instances.create(instance(id, { createdAt: NOV }), event(`evt_${id}`), null);
      for (const id of ['inst_a', 'inst_b', 'inst_c', 'inst_f']) await move(id, 'provisioning', 'ready', NOV + 10, { readyAt: NOV + 10 });
      await move('inst_a', 'ready', 'failed', NOV + 20, { terminatedAt: NOV + 20, failureReason: 'node lost' });
      // Drained and ended in the same millisecond: the later row is the last transition.
      await move('inst_b', 'ready', 'draining', NOV + 30);
      await move('inst_b', 'draining', 'terminated', NOV + 30, { terminatedAt: NOV + 30 });
      // Drained with a reason (its node came back without the container), ended later: unasked, left ready when drained.
      await move('inst_f', 'ready', 'draining', NOV + 40, { failureReason: 'its container was no longer running when its node reconnected' });
      await move('inst_f', 'draining', 'terminated', NOV + 50, { terminatedAt: NOV + 50 });
      // An operator terminated inst_b (the audit trail names it); another action on it, or a terminate of another instance, does not count.
      await store.operators.appendAudit({ at: NOV + 29, actor: 'opkey_1', action: 'terminateInstance', target: 'inst_b', detail: { force: false } });
      await store.operators.appendAudit({ at: NOV + 29, actor: 'opkey_1', action: 'showInstance', target: 'inst_c', detail: {} });
      await store.operators.appendAudit({ at: NOV + 29, actor: 'opkey_1', action: 'terminateInstance', target: 'inst_zz', detail: {} });
      const inRange = await store.ledger.slaInstances({ from: NOV + 15, to: DEC });
      expect(inRange.map((i) => [i.id, i.status, i.readyAt, i.endedAt, i.leftReadyAt, i.leftReadyUnasked, i.terminatedByOperator]).sort()).toEqual([
        ['inst_a', 'failed', NOV + 10, NOV + 20, NOV + 20, true, false],
        ['inst_b', 'terminated', NOV + 10, NOV + 30, NOV + 30, false, true],
        ['inst_c', 'ready', NOV + 10, null, null, false, false],
        ['inst_f', 'terminated', NOV + 10, NOV + 50, NOV + 40, true, false],
      ]);
      expect((await store.ledger.slaInstances({ from: NOV + 25, to: DEC })).map((i) => i.id).sort()).toEqual(['inst_b', 'inst_c', 'inst_f']);
      // A reservation its provider ended in November was still owed its December hours: measured in December too.
      await store.instances.create(instance('inst_e', { createdAt: NOV, expiresAt: DEC + 5 * 86_400_000 }), event('evt_inst_e'), null);
      await move('inst_e', 'provisioning', 'ready', NOV + 10, { readyAt: NOV + 10 });
      await move('inst_e', 'ready', 'failed', NOV + 20, { terminatedAt: NOV + 20, failureReason: 'node lost' });
      expect((await store.ledger.slaInstances({ from: DEC, to: DEC + 31 * 86_400_000 })).map((i) => i.id).sort()).toEqual(['inst_c', 'inst_e']);
      expect(await store.ledger.slaInstances({ instanceId: 'inst_d' })).toEqual([
        { id: 'inst_d', orgId: 'org_1', mode: 'reserved', nodeId: 'node_1', gpuUuids: ['GPU-inst_d'], gpus: 1, rateMicros: 2_000_000, readyAt: null, endedAt: null, expiresAt: null, billedSeconds: 0, status: 'provisioning', leftReadyAt: null, leftReadyUnasked: false, terminatedByOperator: false },
      ]);
    });

    it('tells the SLA how many seconds an on-demand instance was billed, seconds given back at its end deducted', async () => {
      // Billed 2 h while its node was away; the node came back without it and its end gave back all but 1 h.
      await store.instances.create(onDemand('inst_1', { readyAt: NOV }), event('evt_1'), null);
      await store.instances.accrueOnDemand('inst_1', 7_200, { id: 'chg_a', createdAt: NOV + 7_200_000 - 1 });
      expect((await store.ledger.slaInstances({ instanceId: 'inst_1' }))[0]).toMatchObject({ billedSeconds: 7_200, endedAt: null });
      await store.instances.transition('inst_1', 'ready', { status: 'terminated', terminatedAt: NOV + 9_000_000, updatedAt: NOV + 9_000_000 }, (i) => event('evt_end', 'instance.lifecycle', i.id), {
        onDemandSeconds: 3_600,
        id: 'chg_end',
        orgId: 'org_1',
        instanceId: 'inst_1',
        createdAt: NOV + 9_000_000,
      });
      expect((await store.ledger.slaInstances({ from: NOV, to: DEC }))[0]).toMatchObject({ id: 'inst_1', billedSeconds: 3_600, endedAt: NOV + 9_000_000 });
    });
  });

  describe('two processes on one database', () => {
    it('race for one idempotency key: exactly one starts, the other sees it in progress, then replays its answer', async () => {
      const other = await fx.open();
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) => (i % 2 ? other : store).idempotency.begin('key_1', 'idem', 'h1', 0, 300_000, holder(`p${i % 2}`, `c${i}`, 10_000))),
      );
      expect(results.filter((r) => r.state === 'started')).toHaveLength(1);
      expect(results.filter((r) => r.state === 'in_progress')).toHaveLength(5);
      const winner = `c${results.findIndex((r) => r.state === 'started')}`;
      await store.idempotency.complete('key_1', 'idem', winner, answer(201, '{"id":"once"}'), 300_000);
      expect(await other.idempotency.begin('key_1', 'idem', 'h1', 1, 300_001, holder('p1', 'c9', 10_000))).toMatchObject({
        state: 'completed',
        response: { body: '{"id":"once"}' },
      });
    });

    it('race to take over a dead claim: one of them runs the work again', async () => {
      const other = await fx.open();
      await store.idempotency.begin('key_1', 'idem', 'h1', 0, 300_000, holder('dead', 'c0', 1_000));
      const results = await Promise.all([store, other, store, other].map((s, i) => s.idempotency.begin('key_1', 'idem', 'h1', 5_000, 305_000, holder(`p${i}`, `c${i + 1}`, 20_000))));
      expect(results.filter((r) => r.state === 'started')).toEqual([{ state: 'started', takenOver: true }]);
    });

    it('a key revoked by one process stops validating on the other, and is revoked once', async () => {
      const other = await fx.open();
      await store.keys.create(apiKey('key_1'), secret('value-1111', 'key_1'));
      expect((await other.keys.findBySecretHash(Buffer.from('value-1111')))?.key.revokedAt).toBeNull();
      const revokes = await Promise.all([store, other, store, other].map((s, i) => s.keys.revoke('key_1', 10 + i, event(`evt_rev_${i}`, 'api_key.revoked', 'key_1'))));
      expect(revokes.filter((r) => r && !r.alreadyRevoked)).toHaveLength(1);
      const revokedAt = revokes.find((r) => r && !r.alreadyRevoked)!.key.revokedAt;
      expect((await other.keys.findBySecretHash(Buffer.from('value-1111')))?.key.revokedAt).toBe(revokedAt);
      expect(await store.events.list({ type: 'api_key.revoked' })).toHaveLength(1);
    });

    it('a command relayed by one process is taken by exactly one of two racing takers', async () => {
      const other = await fx.open();
      for (let i = 0; i < 20; i++) await store.nodes.queueRelayedCommand({ nodeId: 'node_1', command: `{"n":${i}}`, createdAt: 100 + i });
      const taken = await Promise.all([store, other, store, other].map((s) => s.nodes.takeRelayedCommands(['node_1'], 50)));
      const all = taken.flat().map((c) => c.command);
      expect(all.sort()).toEqual(Array.from({ length: 20 }, (_, i) => `{"n":${i}}`).sort());
      // Each taker's share comes oldest first.
      for (const share of taken) expect(share.map((c) => c.createdAt)).toEqual([...share.map((c) => c.createdAt)].sort((a, b) => a - b));
    });

    it('concurrent transitions of one instance: one wins, its event and refund are written once', async () => {
      const other = await fx.open();
      await store.instances.create(instance('inst_1'), event('evt_1'), { id: 'chg_1', orgId: 'org_1', instanceId: 'inst_1', kind: 'reservation', amountMicros: 7, description: 'r', createdAt: 1 });
      const moves = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          (i % 2 ? other : store).instances.transition(
            'inst_1',
            'provisioning',
            { status: i < 3 ? 'failed' : 'ready', updatedAt: 2 + i },
            (u) => event(`evt_t${i}`, 'instance.lifecycle', u.id),
            i < 3 ? { refund: true, id: `chg_refund_${i}`, orgId: 'org_1', instanceId: 'inst_1', description: 'refund', createdAt: 2 } : null,
          ),
        ),
      );
      const won = moves.filter((m) => m !== undefined);
      expect(won).toHaveLength(1);
      expect((await store.instances.get('inst_1'))!.status).toBe(won[0]!.status);
      expect(await store.events.list({ type: 'instance.lifecycle' })).toHaveLength(1);
      const total = (await store.instances.chargesFor('inst_1')).reduce((sum, c) => sum + c.amountMicros, 0);
      expect(total).toBe(won[0]!.status === 'failed' ? 0 : 7);
    });

    it('up-front charges racing on one prepaid balance: only what it covers is admitted, creates and extends, on either process', async () => {
      const other = await fx.open();
      const reservation = (id: string, amountMicros: number): ChargeRecord => ({ id, orgId: 'org_1', instanceId: id.replace('chg', 'inst'), kind: 'reservation', amountMicros, description: id, createdAt: 5 });
      // The admission the billing rules give (billing/spending.ts): refused, nothing written, past the balance.
      const admission = (amountMicros: number): AccountAdmission => ({
        period: '1970-01',
        admit(account) {
          const refusal = upFrontRefusal(account, amountMicros * 1_000);
          if (refusal) throw new ApiError('insufficient_quota', refusal);
        },
      });
      await store.ledger.setAccount('org_1', { mode: 'prepaid' });
      await store.ledger.addCredit({ id: 'cr_1', orgId: 'org_1', kind: 'grant', amountNanos: 100_000_000_000, instanceId: null, period: null, description: 'top-up', createdBy: null, createdAt: 1 });
      const creates = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) =>
          (i % 2 ? other : store).instances.create(instance(`inst_${i}`), event(`evt_${i}`), reservation(`chg_${i}`, 99_000_000), undefined, undefined, admission(99_000_000)),
        ),
      );
      expect(creates.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of creates.filter((c) => c.status === 'rejected')) expect((r as PromiseRejectedResult).reason).toMatchObject({ type: 'insufficient_quota' });
      const winner = `inst_${creates.findIndex((r) => r.status === 'fulfilled')}`;
      expect((await store.instances.list('org_1', { limit: 10 })).data.map((i) => i.id)).toEqual([winner]);
      expect((await store.ledger.account('org_1', '1970-01')).spentNanos).toBe(99_000_000_000);

      // $1 left, then $10 more: one $10 extension of the winner fits, never two.
      await store.instances.transition(winner, 'provisioning', { status: 'ready', readyAt: 10, expiresAt: 3_600_000, updatedAt: 10 }, (u) => event('evt_ready', 'instance.lifecycle', u.id), null);
      await store.ledger.addCredit({ id: 'cr_2', orgId: 'org_1', kind: 'grant', amountNanos: 10_000_000_000, instanceId: null, period: null, description: 'top-up', createdBy: null, createdAt: 2 });
      const extends_ = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) =>
          (i % 2 ? other : store).instances.extend(winner, { hours: 1, maxTotalHours: 720, now: 20 }, { ...reservation(`chg_x${i}`, 10_000_000), instanceId: winner, kind: 'extension' }, undefined, admission(10_000_000)),
        ),
      );
      expect(extends_.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      expect((await store.instances.get(winner))!.durationHours).toBe(1.5 + 1);
      const account = await store.ledger.account('org_1', '1970-01');
      expect(account.creditedNanos - account.spentNanos).toBe(1_000_000_000);
    });

    it('grants racing past what an account can hold: only those within it are written, on either process', async () => {
      const other = await fx.open();
      const admission: AccountAdmission = {
        period: '1970-01',
        admit(account) {
          const refusal = grantRefusal(account, 2_000_000_000_000_000);
          if (refusal) throw new ApiError('invalid_request', refusal);
        },
      };
      // $2M each: four fit under $9,007,199.25, a fifth would not.
      const grants = await Promise.allSettled(
        Array.from({ length: 6 }, (_, i) =>
          (i % 2 ? other : store).ledger.addCredit(
            { id: `cr_${i}`, orgId: 'org_1', kind: 'grant', amountNanos: 2_000_000_000_000_000, instanceId: null, period: null, description: 'big', createdBy: 'op', createdAt: 1 + i },
            admission,
          ),
        ),
      );
      expect(grants.filter((g) => g.status === 'fulfilled')).toHaveLength(4);
      for (const g of grants.filter((r) => r.status === 'rejected')) expect((g as PromiseRejectedResult).reason).toMatchObject({ type: 'invalid_request' });
      expect((await store.ledger.account('org_1', '1970-01')).creditedNanos).toBe(8_000_000_000_000_000);
    });

    it('month-end accrual on two replicas racing terminations: every second billed once', async () => {
      const other = await fx.open();
      const ids = Array.from({ length: 6 }, (_, i) => `inst_${i}`);
      for (const id of ids) await store.instances.create(onDemand(id), event(`evt_${id}`), null);
      await Promise.all(
        ids.flatMap((id, i) => [
          store.instances.accrueOnDemand(id, 3_600, { id: `chg_a_${i}`, createdAt: 3_600_999 }),
          other.instances.accrueOnDemand(id, 3_600, { id: `chg_b_${i}`, createdAt: 3_600_999 }),
          (i % 2 ? other : store).instances.transition(id, 'ready', { status: 'terminated', updatedAt: 3_701_000 }, (u) => event(`evt_end_${i}`, 'instance.lifecycle', u.id), {
            onDemandSeconds: 3_700,
            id: `chg_end_${i}`,
            orgId: 'org_1',
            instanceId: id,
            createdAt: 3_701_000,
          }),
        ]),
      );
      for (const id of ids) {
        const lines = await store.instances.chargesFor(id);
        // An accrual that won is followed by the rest; one that lost found the instance ended.
        expect(lines.map((c) => c.amountMicros)).toSatisfy((a: number[]) => (a.length === 1 && a[0] === 3_700_000) || (a.length === 2 && a[0] === 3_600_000 && a[1] === 100_000));
      }
      expect((await store.ledger.account('org_1', '1970-01')).spentNanos).toBe(6 * 3_700_000_000);
    });

    it('two creates for one GPU: one instance gets it', async () => {
      const other = await fx.open();
      const creates = await Promise.allSettled(
        Array.from({ length: 4 }, (_, i) => (i % 2 ? other : store).instances.create(instance(`inst_${i}`, { gpuUuids: ['GPU-x', `GPU-own-${i}`] }), event(`evt_${i}`), null)),
      );
      expect(creates.filter((c) => c.status === 'fulfilled')).toHaveLength(1);
      expect(creates.filter((c) => c.status === 'rejected').every((c) => (c as PromiseRejectedResult).reason instanceof GpuAlreadyClaimed)).toBe(true);
      expect((await store.instances.claimedGpuUuids()).size).toBe(2);
    });

    it('one enrollment token, two enrolling processes: one node', async () => {
      const other = await fx.open();
      await store.nodes.createToken(token('ntk_a', 'a'));
      const results = await Promise.all([store, other, store, other].map((s, i) => s.nodes.enroll(Buffer.from('a'), 10, node(`node_${i}`), Buffer.from('s'))));
      expect(results.filter((r) => r.enrolled)).toHaveLength(1);
      expect(await other.nodes.listNodes()).toHaveLength(1);
    });

    it('sandbox tokens taken concurrently never pass the cap', async () => {
      const other = await fx.open();
      const takes = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 ? other : store).usage.takeSandboxTokens('key_1', '2026-11-24', 10, 55)));
      expect(takes.filter((t) => t.taken)).toHaveLength(5);
      expect(await store.usage.takeSandboxTokens('key_1', '2026-11-24', 5, 55)).toEqual({ used: 50, taken: true });
    });

    it('events appended by both are fanned out once each, none skipped', async () => {
      const other = await fx.open();
      await store.webhooks.createSubscription(
        { id: 'wh_1', orgId: 'org_1', url: 'https://example.test/h', eventTypes: ['*'], description: null, status: 'enabled', disabledReason: null, createdAt: 1 },
        { subscriptionId: 'wh_1', secret: 's', createdAt: 1, expiresAt: null },
      );
      const plan = (events: { seq: number }[]) => events.map((e) => ({ id: `del_${e.seq}`, subscriptionId: 'wh_1', eventSeq: e.seq, subject: null, nextAttemptAt: 0, createdAt: 1 }));
      // Fan-out runs on both while events are appended on both.
      const appends = Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? other : store).events.append(event(`evt_${i}`))));
      let fanned = 0;
      const fanOuts = (async () => {
        for (let i = 0; i < 20; i++) fanned += (await Promise.all([store.webhooks.fanOut(5, plan), other.webhooks.fanOut(5, plan)])).reduce((a, b) => a + b, 0);
      })();
      await Promise.all([appends, fanOuts]);
      for (let n = 1; n > 0; ) fanned += n = await store.webhooks.fanOut(100, plan);
      expect(fanned).toBe(30);
      expect((await store.webhooks.listDeliveries('wh_1', { limit: 100 })).map((d) => d.eventId).sort()).toEqual(Array.from({ length: 30 }, (_, i) => `evt_${i}`).sort());
    });

    it('replicas finalizing one org month together: one invoice, one number used', async () => {
      const other = await fx.open();
      const d = { orgId: 'org_1', period: '2026-11', periodStart: 0, periodEnd: 1, items: [], subtotalNanos: 1, creditsNanos: 0, totalNanos: 1, amountDueCents: 0 };
      const results = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 ? other : store).ledger.finalizeInvoice(`inv_${i}`, d, (n) => `INV-${n}`, i)));
      expect(results.filter((r) => r !== undefined).map((r) => r!.number)).toEqual(['INV-1']);
      expect(await store.ledger.finalizeInvoice('inv_next', { ...d, orgId: 'org_2' }, (n) => `INV-${n}`, 9)).toMatchObject({ number: 'INV-2' });
    });

    it('usage batches of many orgs flushed by both at once: no deadlock, totals exact', async () => {
      const other = await fx.open();
      const orgs = Array.from({ length: 8 }, (_, i) => `org_${i}`);
      for (const id of orgs.filter((o) => o !== 'org_1')) await store.orgs.create(org(id));
      // Each batch names the orgs in a different order.
      const batch = (n: number) => orgs.map((orgId, i) => usage(n * 100 + i, { orgId, costNanos: 10 + i, createdAt: Date.UTC(2026, 10, 1) }));
      const batches = Array.from({ length: 8 }, (_, n) => (n % 2 ? batch(n).reverse() : batch(n)));
      await Promise.all(batches.map((b, n) => (n % 2 ? other : store).usage.append(b)));
      for (const [i, orgId] of orgs.entries()) {
        expect(await store.ledger.account(orgId, '2026-11')).toMatchObject({ spentNanos: 8 * (10 + i), periodNanos: 8 * (10 + i) });
      }
    });

    it('an event appended by one process nudges the listeners of the other', async () => {
      const other = await fx.open();
      let heard = 0;
      other.events.onAppend(() => heard++);
      await ready(other);
      await store.events.append(event('evt_1'));
      if (engine === 'postgres') {
        await expect.poll(() => heard, { timeout: 5_000 }).toBeGreaterThan(0);
      } else {
        // SQLite nudges in-process only; another process finds the event by polling.
        await store.events.append(event('evt_2'));
        expect(heard).toBe(0);
        expect(await other.events.list()).toHaveLength(2);
      }
    });
  });
  // Registered only for PostgreSQL (not skipped for SQLite): its migration runner and types.
  if (engine === 'postgres') {
    describe('postgres only', () => {
      const server = (): TestPostgres => fx.server!;

      it('five replicas opening one empty database together all start; the migrations run once', async () => {
        const url = await server().createDatabase();
        const stores = await Promise.all(Array.from({ length: 5 }, () => openPostgresStore(url, { poolSize: 2 })));
        try {
          const newest = Math.max(...PG_MIGRATIONS.map((m) => m.version));
          expect(await Promise.all(stores.map((s) => s.schemaVersion()))).toEqual([newest, newest, newest, newest, newest]);
          const rows = await stores[0]!.pool.query('SELECT version, COUNT(*)::int AS n FROM schema_migrations GROUP BY version ORDER BY version');
          expect(rows.rows).toEqual(PG_MIGRATIONS.map((m) => ({ version: m.version, n: 1 })));
        } finally {
          await Promise.all(stores.map((s) => s.close()));
        }
      });

      it('applies a lower version added later (migrations merged from parallel branches), each once', async () => {
        const url = await server().createDatabase();
        const m = (version: number) => ({ version, name: `m${version}`, sql: `CREATE TABLE t${version} (x BIGINT)` });
        await (await openPostgresStore(url, { migrations: [m(1), m(3)] })).close();
        const store = await openPostgresStore(url, { migrations: [m(1), m(2), m(3)] });
        try {
          expect(await store.schemaVersion()).toBe(3);
          expect((await store.pool.query(`SELECT to_regclass('t2') IS NOT NULL AS present`)).rows[0].present).toBe(true);
        } finally {
          await store.close();
        }
        // A failing migration leaves nothing half-applied and says which one failed.
        await expect(openPostgresStore(url, { migrations: [m(1), m(2), m(3), { version: 4, name: 'bad', sql: 'CREATE TABLE t4 (x BIGINT); SELECT nope' }] })).rejects.toThrow(/nope/);
        const after = await openPostgresStore(url, { migrations: [m(1)] });
        try {
          expect(await after.schemaVersion()).toBe(3);
          expect((await after.pool.query(`SELECT to_regclass('t4') IS NOT NULL AS present`)).rows[0].present).toBe(false);
        } finally {
          await after.close();
        }
      });

      it('health-timeline rows commit in seq order, so the remediation cursor never passes one that commits late', async () => {
        const pgStore = store as PostgresStore;
        await store.nodes.createToken(token('ntk_a', 'a'));
        await store.nodes.enroll(Buffer.from('a'), 10, node('node_1'), Buffer.from('s'));
        const row = (message: string) => ({ nodeId: 'node_1', gpuUuid: null, gpuIndex: null, kind: 'other' as const, xid: null, healthy: null, message, at: 1 });
        const slow = await pgStore.pool.connect();
        try {
          await slow.query('BEGIN');
          const first = await appendEvent(slow, row('first, committed last'));
          const other = await fx.open({ poolSize: 2 });
          const second = other.nodes.recordHealthEvent(row('second'));
          // The second writer waits for the first to commit instead of committing a higher seq before it.
          await expect
            .poll(async () => Number((await pgStore.pool.query(`SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)).rows[0].n), { timeout: 10_000 })
            .toBe(1);
          expect(await store.remediations!.healthEventsAfter(0, 10)).toEqual([]);
          await slow.query('COMMIT');
          expect((await second).seq).toBeGreaterThan(first.seq);
          expect((await store.remediations!.healthEventsAfter(0, 10)).map((e) => e.message)).toEqual(['first, committed last', 'second']);
        } finally {
          await slow.query('ROLLBACK').catch(() => {});
          slow.release();
        }
      });

      it('has the schema SQLite has: the same migrations from 13 on, tables, views and columns', async () => {
        const dir = mkdtempSync(join(tmpdir(), 'svc-schema-'));
        const sqlite = openSqliteStore(dir);
        try {
          const sqliteColumns = sqlite.db
            .prepare(
              `SELECT m.name AS t, c.name AS c FROM sqlite_master m, pragma_table_info(m.name) c
                WHERE m.type IN ('table', 'view') AND m.name NOT LIKE 'sqlite_%' AND m.name <> 'schema_migrations'`,
            )
            .all() as { t: string; c: string }[];
          const pgColumns = (
            await (store as PostgresStore).pool.query(
              `SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_schema = 'public' AND table_name <> 'schema_migrations'`,
            )
          ).rows as { t: string; c: string }[];
          // PostgreSQL has no rowid: insertion order is a column of its own there.
          const pgOnly = new Set(['charges.ord', 'instance_transitions.ord']);
          const names = (rows: { t: string; c: string }[]) => rows.map((r) => `${r.t}.${r.c}`).filter((n) => !pgOnly.has(n)).sort();
          expect(names(pgColumns)).toEqual(names(sqliteColumns));
          const sqliteVersions = (sqlite.db.prepare('SELECT version FROM schema_migrations WHERE version >= 13 ORDER BY version').all() as { version: number }[]).map((r) => r.version);
          expect(PG_MIGRATIONS.map((m) => m.version).sort((x, y) => x - y)).toEqual(sqliteVersions);
        } finally {
          await sqlite.close();
          rmSync(dir, { recursive: true, force: true });
        }
      });

      describe('rate limits: a request slot and its tokens in one statement', () => {
        const NOW = 1_000_000;
        const row = async (keyId: string, kind: string) =>
          (await (store as PostgresStore).pool.query('SELECT tat, admitted FROM rate_limits WHERE key_id = $1 AND kind = $2', [keyId, kind])).rows[0] as
            | { tat: number; admitted: boolean }
            | undefined;

        it('takes the tokens only when the request is admitted, and spends the request slot when the tokens are refused', async () => {
          const limits = store.rateLimits!;
          // 2 requests (30 s each) and 100 tokens (600 ms each) per minute.
          expect(await limits.takeRequestAndTokens('k', 2, 100, NOW, 60)).toEqual({
            requests: { tat: NOW + 30_000, admitted: true },
            tokens: { tat: NOW + 36_000, admitted: true },
          });
          // 60 more tokens do not fit: the request slot is spent all the same.
          expect(await limits.takeRequestAndTokens('k', 2, 100, NOW, 60)).toEqual({
            requests: { tat: NOW + 60_000, admitted: true },
            tokens: { tat: NOW + 36_000, admitted: false },
          });
          // No request slot left: the token row is not touched, though 1 token would fit.
          expect(await limits.takeRequestAndTokens('k', 2, 100, NOW, 1)).toEqual({ requests: { tat: NOW + 60_000, admitted: false }, tokens: null });
          expect(await row('k', 'tokens')).toEqual({ tat: NOW + 36_000, admitted: false });
          // A key whose requests are spent before it ever spent tokens gets no token row at all.
          await limits.take('fresh', 'requests', 1, NOW, 1);
          expect(await limits.takeRequestAndTokens('fresh', 1, 100, NOW, 10)).toEqual({ requests: { tat: NOW + 60_000, admitted: false }, tokens: null });
          expect(await row('fresh', 'tokens')).toBeUndefined();
          // A fresh key asking for more than its token limit: the slot is spent, the tokens refused.
          expect(await limits.takeRequestAndTokens('big', 10, 100, NOW, 500)).toEqual({
            requests: { tat: NOW + 6_000, admitted: true },
            tokens: { tat: NOW, admitted: false },
          });
        });

        it('a lease takes its block of slots and tokens only while the headroom asked for stays in both rows', async () => {
          const limits = store.rateLimits!;
          // 60 requests (1 s each) and 600 tokens (100 ms each) per minute; blocks keep 15 s free.
          const lease = (key: string, requests: number, tokens: number) => limits.takeRequestAndTokens(key, 60, 600, NOW, tokens, { requests, headroomMs: 15_000 });
          // A fresh key: 20 slots (20 s) and 200 tokens (20 s) fit.
          expect(await lease('l', 20, 200)).toEqual({ requests: { tat: NOW + 20_000, admitted: true }, tokens: { tat: NOW + 20_000, admitted: true } });
          // 25 more slots would leave 15 s: still fits; then even one slot more would not.
          expect(await lease('l', 25, 10)).toMatchObject({ requests: { tat: NOW + 45_000, admitted: true }, tokens: { admitted: true } });
          expect(await lease('l', 1, 1)).toEqual({ requests: { tat: NOW + 45_000, admitted: false }, tokens: null });
          // The exact step still admits what the headroom kept back.
          expect((await limits.takeRequestAndTokens('l', 60, 600, NOW, 1)).requests).toEqual({ tat: NOW + 46_000, admitted: true });
          // Slots that fit with tokens that would not: the slots are taken, the tokens refused (the caller gives the slots back).
          expect(await lease('m', 1, 500)).toEqual({ requests: { tat: NOW + 1_000, admitted: true }, tokens: { tat: NOW, admitted: false } });
          // A fresh key whose block alone would break the headroom gets no row changed but its refusal.
          expect(await lease('n', 46, 1)).toEqual({ requests: { tat: NOW, admitted: false }, tokens: null });
          expect(await row('n', 'requests')).toMatchObject({ admitted: false });
        });

        it('is the GCRA step twice, in order: requests, then tokens only if admitted', async () => {
          const limits = store.rateLimits!;
          let requests: number | undefined;
          let tokens: number | undefined;
          for (let i = 0; i < 60; i++) {
            const now = NOW + i * 1_700;
            const cost = ((i * 37) % 90) + 1;
            const request = gcraStep(requests, 7, now, 1);
            requests = request.tat;
            const token = request.admitted ? gcraStep(tokens, 250, now, cost) : null;
            if (token) tokens = token.tat;
            expect(await limits.takeRequestAndTokens('k', 7, 250, now, cost)).toEqual({ requests: request, tokens: token });
          }
        });

        it('two processes racing never admit more than either limit between them', async () => {
          const other = await fx.open();
          // 20 requests and 10 estimates of 100 tokens per minute; 10 of the requests are a plain route's.
          const calls = await Promise.all(
            Array.from({ length: 50 }, (_, i) => {
              const limits = (i % 2 ? other : store).rateLimits!;
              return i % 5 === 4
                ? limits.take('k', 'requests', 20, NOW, 1).then((requests) => ({ requests, tokens: null }))
                : limits.takeRequestAndTokens('k', 20, 1_000, NOW, 100);
            }),
          );
          expect(calls.filter((c) => c.requests.admitted)).toHaveLength(20);
          expect(calls.filter((c) => c.tokens?.admitted)).toHaveLength(10);
          // Tokens were asked for by admitted requests only.
          expect(calls.every((c) => c.tokens === null || c.requests.admitted)).toBe(true);
          expect(await row('k', 'requests')).toMatchObject({ tat: NOW + 60_000 });
          expect(await row('k', 'tokens')).toMatchObject({ tat: NOW + 60_000 });
        });

        it('admissions that arrive while a statement is on its way go together in the next: each key admitted in arrival order, in far fewer statements', async () => {
          const pool = (store as PostgresStore).pool;
          const query = pool.query.bind(pool);
          let statements = 0;
          const counting = ((...args: Parameters<typeof pool.query>) => {
            statements++;
            return (query as (...a: unknown[]) => unknown)(...args);
          }) as typeof pool.query;
          pool.query = counting;
          try {
            // 3 keys flooding, 40 arrivals each, and a quiet tenant's 3 among them: 10
            // requests and 1,000 tokens per minute each.
            const flood = Array.from({ length: 120 }, (_, i) => ({ key: `k${i % 3}`, cost: 50 + (i % 7) * 10, tokens: i % 4 !== 3 }));
            const arrivals = [...flood.slice(0, 40), { key: 'quiet', cost: 100, tokens: true }, ...flood.slice(40, 80), { key: 'quiet', cost: 100, tokens: true }, ...flood.slice(80), { key: 'quiet', cost: 100, tokens: false }];
            const results = await Promise.all(
              arrivals.map((a) =>
                a.tokens
                  ? store.rateLimits!.takeRequestAndTokens(a.key, 10, 1_000, NOW, a.cost)
                  : store.rateLimits!.take(a.key, 'requests', 10, NOW, 1).then((requests) => ({ requests, tokens: null })),
              ),
            );
            // What the steps one at a time, in arrival order, would have answered.
            const state = new Map<string, { requests?: number; tokens?: number }>();
            const expected = arrivals.map((a) => {
              const s = state.get(a.key) ?? {};
              const request = gcraStep(s.requests, 10, NOW, 1);
              s.requests = request.tat;
              const token = a.tokens && request.admitted ? gcraStep(s.tokens, 1_000, NOW, a.cost) : null;
              if (token) s.tokens = token.tat;
              state.set(a.key, s);
              return { requests: request, tokens: token };
            });
            expect(results).toEqual(expected);
            expect(results.filter((r) => r.requests.admitted)).toHaveLength(33);
            // The floods sharing its statements cost the quiet tenant nothing.
            expect(results.filter((_, i) => arrivals[i]!.key === 'quiet').map((r) => [r.requests.admitted, r.tokens?.admitted ?? null])).toEqual([
              [true, true],
              [true, true],
              [true, null],
            ]);
            expect(statements).toBeLessThan(arrivals.length / 4);
          } finally {
            pool.query = query;
          }
        });
      });

      it('settles many keys from two processes at once without a deadlock, each credit applied once', async () => {
        // The plan a large rate_limits table gets: the settlement's rows visited in the order
        // they were sent (a nested loop over an index), not in the table's order.
        const planner = encodeURIComponent('-c enable_seqscan=off -c enable_hashjoin=off -c enable_mergejoin=off');
        const [one, two] = await Promise.all([1, 2].map(() => openPostgresStore(`${fx.location}?options=${planner}`, { poolSize: 5 })));
        try {
          const keys = Array.from({ length: 40 }, (_, i) => `key_${String(i).padStart(2, '0')}`);
          // Every key spent 100 of its 1,000 tokens a minute (60 ms a token).
          for (const k of keys) await store.rateLimits!.take(k, 'tokens', 1_000, 1_000_000, 100);
          // Two replicas settle the same keys in opposite orders, again and again, 1 token each.
          const credits = keys.map((keyId) => ({ keyId, kind: 'tokens' as const, limit: 1_000, amount: 1 }));
          await Promise.all(
            Array.from({ length: 20 }, (_, i) => (i % 2 ? two! : one!).rateLimits!.credit(i % 2 ? [...credits].reverse() : credits, 1_000_000)),
          );
          const rows = (await (store as PostgresStore).pool.query("SELECT tat FROM rate_limits WHERE kind = 'tokens' AND key_id LIKE 'key_%'")).rows as Array<{ tat: number }>;
          // 100 taken, 20 given back: 80 tokens of 60 ms left on each.
          expect(rows.map((r) => r.tat)).toEqual(keys.map(() => 1_000_000 + 80 * 60));
        } finally {
          await Promise.all([one!.close(), two!.close()]);
        }
      });

      it('reads bigint columns as numbers and refuses values past the safe integer range', async () => {
        const url = await server().createDatabase();
        const store = await openPostgresStore(url);
        try {
          await store.orgs.create(org('org_1'));
          const big = Number.MAX_SAFE_INTEGER;
          await store.usage.append([usage(1, { costNanos: big })]);
          expect((await store.usage.list('org_1', { limit: 1 })).data[0]!.costNanos).toBe(big);
          // Usage records are append-only: the value past the range comes in as a new row.
          await store.pool.query(
            `INSERT INTO usage_records (id, org_id, key_id, request_id, kind, model, quantization, pool, prompt_tokens, completion_tokens, cost_nanos, sandbox, created_at)
             VALUES ('usage_big', 'org_1', 'key_1', 'req_big', 'chat', 'm', 'int4', 'na', 1, 1, $1::bigint + 1, FALSE, 2000)`,
            [String(big)],
          );
          await expect(store.usage.list('org_1', { limit: 1 })).rejects.toThrow(/safe integer range/);
        } finally {
          await store.close();
        }
      });
    });
  }
});

/** Waits until the store's event listener is in place (PostgreSQL: its LISTEN connection). */
async function ready(store: Store): Promise<void> {
  const notifications = (store as { notifications?: { ready(): Promise<void> } }).notifications;
  await notifications?.ready();
}
