// The instance API over real HTTP: validation with `param`, idempotent creates,
// pagination and status filters, SKU capacity and the charges ledger. Nodes are
// registered through the registry's store; the Docker-backed lifecycle is in
// test/instances.e2e.test.ts. The whole file runs on both store engines: the API on
// PostgreSQL answers exactly as on SQLite.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { addReadyNode, expectError, startControlPlane, type TestControlPlane } from './harness.js';
import { STORE_ENGINES } from '../../test/support/postgres-stores.js';
import type { Store } from '../src/store/store.js';

describe.each(STORE_ENGINES)('on %s', (engine) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 12));
  let cp: TestControlPlane<Store>;
  let key: string;
  const sent: Array<{ nodeId: string; kind: string }> = [];

  beforeAll(async () => {
    cp = await startControlPlane({ clock, engine });
    key = await cp.key({ scopes: ['compute:write', 'compute:read', 'billing:read'] });
    await addReadyNode(cp, { pool: 'eu', gpus: 8 });
    cp.app.services.taskDispatcher.attach((nodeId, command) => {
      sent.push({ nodeId, kind: command.start_task ? 'start' : 'stop' });
      return true;
    });
  });
  afterAll(() => cp.close());

  const create = (body: unknown, headers: Record<string, string> = {}) => cp.request('POST', '/v1/instances', { key, body, headers });

  describe('POST /v1/instances', () => {
    it('answers 201 with the instance, placed in the first pool with capacity', async () => {
      const res = await create({ sku: 'h100-80gb', gpus: 2, labels: { team: 'ml' } });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({
        object: 'instance',
        status: 'provisioning',
        sku: 'h100-80gb',
        gpus: 2,
        pool: 'eu',
        mode: 'on_demand',
        labels: { team: 'ml' },
        ssh: null,
        jupyter: null,
        price: { currency: 'usd', per_gpu_hour: 2.69, per_hour: 5.38 },
      });
      expect(sent.at(-1)).toEqual({ nodeId: res.body.node_id, kind: 'start' });
    });

    it.each([
      [{ sku: 'nope', gpus: 1 }, 'sku'],
      [{ sku: 'h100-80gb', gpus: 3 }, 'gpus'],
      [{ sku: 'h100-80gb', gpus: 1, pool: 'mars' }, 'pool'],
      [{ sku: 'h100-80gb', gpus: 1, duration_hours: 0.5 }, 'duration_hours'],
      [{ sku: 'h100-80gb', gpus: 1, duration_hours: 169 }, 'duration_hours'],
      [{ sku: 'h100-80gb', gpus: 1, image: 'UPPER/case' }, 'image'],
      [{ sku: 'h100-80gb', gpus: 1, image: `sha256:${'c'.repeat(64)}` }, 'image'],
      [{ sku: 'h100-80gb', gpus: 1, ssh_keys: ['ssh-rsa AAAAB3NzaC1yc2E'] }, 'ssh_keys[0]'],
      [{ sku: 'h100-80gb', gpus: 1, labels: { k: 7 } }, 'labels.k'],
      [{ sku: 'h100-80gb', gpus: 1, labels: { k: 'a\u0000b' } }, 'labels.k'],
      [{ sku: 'h100-80gb', gpus: 1, colour: 'red' }, 'colour'],
      [{ gpus: 1 }, 'sku'],
    ])('refuses %j with 400 and param %s', async (body, param) => {
      expect(expectError(await create(body), 400, 'invalid_request').param).toBe(param);
    });

    it('answers 409 no_capacity when the pinned pool has no such GPUs', async () => {
      expectError(await create({ sku: 'h100-80gb', gpus: 1, pool: 'na' }), 409, 'no_capacity');
      expectError(await create({ sku: 'h100-80gb', gpus: 8 }), 409, 'no_capacity');
    });

    it('never makes a second instance for a retried create', async () => {
      const idem = randomUUID();
      const before = (await cp.request('GET', '/v1/instances?limit=100', { key })).body.data.length;
      const [a, b] = await Promise.all([
        create({ sku: 'h100-80gb', gpus: 1 }, { 'x-service-idempotency-key': idem }),
        create({ sku: 'h100-80gb', gpus: 1 }, { 'x-service-idempotency-key': idem }),
      ]);
      expect(a.body.id).toBe(b.body.id);
      expect((await cp.request('GET', '/v1/instances?limit=100', { key })).body.data.length).toBe(before + 1);
    });
  });

  describe('reads', () => {
    it('lists newest first with cursor pagination and a status filter', async () => {
      for (let i = 0; i < 2; i++) {
        clock.advance(1000);
        expect((await create({ sku: 'h100-80gb', gpus: 1 })).status).toBe(201);
      }
      const page1 = await cp.request('GET', '/v1/instances?limit=2', { key });
      expect(page1.body).toMatchObject({ object: 'list', has_more: true });
      const page2 = await cp.request('GET', `/v1/instances?limit=2&after=${page1.body.next_cursor}`, { key });
      const ids = [...page1.body.data, ...page2.body.data].map((i: { id: string }) => i.id);
      expect(ids).toHaveLength(4);
      expect(new Set(ids).size).toBe(4);
      const created = [...page1.body.data, ...page2.body.data].map((i: { created_at: string }) => i.created_at);
      expect([...created].sort().reverse()).toEqual(created);

      const one = page1.body.data[0].id;
      await cp.app.services.instances.onTaskState(page1.body.data[0].node_id, one, 'running', {});
      const ready = await cp.request('GET', '/v1/instances?status=ready,draining', { key });
      expect(ready.body.data.map((i: { id: string }) => i.id)).toEqual([one]);
      expect(expectError(await cp.request('GET', '/v1/instances?status=ready,sleeping', { key }), 400, 'invalid_request').param).toBe('status');
      expect((await cp.request('GET', `/v1/instances/${one}`, { key })).body.status).toBe('ready');
      expectError(await cp.request('GET', '/v1/instances/inst_nope', { key }), 404, 'not_found');
    });

    it('shows free capacity per pool on GET /v1/skus', async () => {
      const skus = await cp.request('GET', '/v1/skus', { key });
      const h100 = skus.body.data.find((s: { id: string }) => s.id === 'h100-80gb');
      const eu = h100.pools.find((p: { pool: string }) => p.pool === 'eu');
      const claimed = (await cp.store.instances.claimedGpuUuids()).size;
      expect(eu).toMatchObject({ price_per_gpu_hour: 2.69, free_gpus: 8 - claimed, largest_free_block: 8 - claimed });
      expect(h100).toMatchObject({ vcpus_per_gpu: 26, memory_gib_per_gpu: 225, shm_gib_per_gpu: 32, disk_gib_per_gpu: 500, network_gbps_per_gpu: 10 });
      expect(h100.pools.find((p: { pool: string }) => p.pool === 'na')).toMatchObject({ free_gpus: 0 });
    });
  });

  describe('terminate, extend and charges', () => {
    // Room for this block's instances beside those the blocks before left running.
    beforeAll(() => addReadyNode(cp, { pool: 'eu', gpus: 32 }));

    it('terminates with force in the body or the query, repeatably, and bills on demand', async () => {
      const inst = (await create({ sku: 'h100-80gb', gpus: 1 })).body;
      await cp.app.services.instances.onTaskState(inst.node_id, inst.id, 'running', {});
      clock.advance(30_000);
      const draining = await cp.request('POST', `/v1/instances/${inst.id}/terminate?force=true`, { key });
      expect(draining.body.status).toBe('draining');
      expect((await cp.request('POST', `/v1/instances/${inst.id}/terminate`, { key, body: { force: true } })).status).toBe(200);
      await cp.app.services.instances.onTaskState(inst.node_id, inst.id, 'gone', {});
      const done = await cp.request('GET', `/v1/instances/${inst.id}`, { key });
      expect(done.body).toMatchObject({ status: 'terminated' });
      const charges = await cp.request('GET', '/v1/billing/charges', { key });
      // 60 s minimum at $2.69 per GPU-hour.
      expect(charges.body.data.find((c: { instance_id: string }) => c.instance_id === inst.id)).toMatchObject({ kind: 'on_demand', amount: 0.044833, currency: 'usd' });
    });

    it('an idempotency key names one request, query included: a forced terminate is not answered with the graceful one it reuses the key of', async () => {
      const inst = (await create({ sku: 'h100-80gb', gpus: 1 })).body;
      await cp.app.services.instances.onTaskState(inst.node_id, inst.id, 'running', {});
      const idem = randomUUID();
      const graceful = await cp.request('POST', `/v1/instances/${inst.id}/terminate`, { key, headers: { 'x-service-idempotency-key': idem } });
      expect(graceful.status).toBe(200);
      const forced = await cp.request('POST', `/v1/instances/${inst.id}/terminate?force=true`, { key, headers: { 'x-service-idempotency-key': idem } });
      expect(expectError(forced, 400, 'invalid_request').code).toBe('idempotency_key_reused');
      const again = await cp.request('POST', `/v1/instances/${inst.id}/terminate`, { key, headers: { 'x-service-idempotency-key': idem } });
      expect(again.headers.get('x-service-idempotent-replay')).toBe('true');
    });

    it('extends reservations only, charging up front', async () => {
      const onDemand = (await create({ sku: 'h100-80gb', gpus: 1 })).body;
      expect(expectError(await cp.request('POST', `/v1/instances/${onDemand.id}/extend`, { key, body: { hours: 2 } }), 400, 'invalid_request').param).toBe('hours');
      const reserved = (await create({ sku: 'h100-80gb', gpus: 1, duration_hours: 24 })).body;
      expect(reserved.price.reservation_total).toBeCloseTo(24 * 2.69 * 0.7, 6);
      const extended = await cp.request('POST', `/v1/instances/${reserved.id}/extend`, { key, body: { hours: 24 } });
      expect(extended.body).toMatchObject({ duration_hours: 48 });
      const kinds = (await cp.request('GET', '/v1/billing/charges?limit=100', { key })).body.data
        .filter((c: { instance_id: string }) => c.instance_id === reserved.id)
        .map((c: { kind: string }) => c.kind)
        .sort();
      expect(kinds).toEqual(['extension', 'reservation']);
      expectError(await cp.request('POST', `/v1/instances/${reserved.id}/extend`, { key, body: { hours: 0 } }), 400, 'invalid_request');
    });

    const chargesOf = async (id: string): Promise<Array<{ kind: string; amount: number }>> =>
      (await cp.request('GET', '/v1/billing/charges?limit=100', { key })).body.data.filter((c: { instance_id: string }) => c.instance_id === id);
    const extend = (id: string, hours: number) => cp.request('POST', `/v1/instances/${id}/extend`, { key, body: { hours } });

    it('takes a reservation of a fractional number of hours (the spec\'s duration_hours is a number), charged for them', async () => {
      const res = await create({ sku: 'h100-80gb', gpus: 1, duration_hours: 1.1 });
      expect(res.status).toBe(201);
      expect(res.body.duration_hours).toBe(1.1);
      expect(Date.parse(res.body.expires_at) - Date.parse(res.body.created_at)).toBe(3_960_000);
      expect((await chargesOf(res.body.id)).map((c) => c.amount)).toEqual([Number((1.1 * 2.69).toFixed(6))]);
    });

    it('adds the hours of concurrent extensions, each charged once: four of 10 h make 64 h, not 34 h charged four times', async () => {
      const reserved = (await create({ sku: 'h100-80gb', gpus: 1, duration_hours: 24 })).body;
      await cp.app.services.instances.onTaskState(reserved.node_id, reserved.id, 'running', {});
      const answers = await Promise.all([1, 2, 3, 4].map(() => extend(reserved.id, 10)));
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
      expect(answers.map((a) => a.body.duration_hours).sort()).toEqual([34, 44, 54, 64]);
      const after = (await cp.request('GET', `/v1/instances/${reserved.id}`, { key })).body;
      expect(after.duration_hours).toBe(64);
      expect(Date.parse(after.expires_at) - Date.parse(reserved.expires_at)).toBe(40 * 3_600_000);
      const extensions = (await chargesOf(reserved.id)).filter((c) => c.kind === 'extension');
      expect(extensions).toHaveLength(4);
      expect(extensions.reduce((sum, c) => sum + c.amount, 0)).toBeCloseTo(40 * 2.69 * 0.7, 6);
    });

    it('an extension racing a failed provision never leaves a charge: the ledger of a failed reservation nets to zero', async () => {
      for (let round = 0; round < 3; round++) {
        const reserved = (await create({ sku: 'h100-80gb', gpus: 1, duration_hours: 24 })).body;
        const [, extended] = await Promise.all([
          cp.app.services.instances.onTaskState(reserved.node_id, reserved.id, 'failed', { message: 'pull failed' }),
          extend(reserved.id, 24),
        ]);
        expect([200, 400]).toContain(extended.status);
        expect((await cp.request('GET', `/v1/instances/${reserved.id}`, { key })).body.status).toBe('failed');
        expect((await chargesOf(reserved.id)).reduce((sum, c) => sum + c.amount, 0)).toBeCloseTo(0, 9);
      }
      // Once failed, an extension is refused and charges nothing.
      const failed = (await create({ sku: 'h100-80gb', gpus: 1, duration_hours: 24 })).body;
      await cp.app.services.instances.onTaskState(failed.node_id, failed.id, 'failed', { message: 'pull failed' });
      expect(expectError(await extend(failed.id, 24), 400, 'invalid_request').message).toBe(`instance ${failed.id} is failed and cannot be extended`);
      expect((await chargesOf(failed.id)).reduce((sum, c) => sum + c.amount, 0)).toBeCloseTo(0, 9);
    });

    it('a reservation past its end is not extended, even before the expiry sweep drains it; an extension racing the sweep either keeps it running or is refused', async () => {
      const reserved = (await create({ sku: 'h100-80gb', gpus: 1, duration_hours: 1 })).body;
      await cp.app.services.instances.onTaskState(reserved.node_id, reserved.id, 'running', {});
      clock.advance(3_600_000);
      expect(expectError(await extend(reserved.id, 24), 400, 'invalid_request').message).toBe(`instance ${reserved.id}'s reservation ended at ${reserved.expires_at} and cannot be extended`);
      await cp.app.services.instances.expireDue();
      expect((await cp.request('GET', `/v1/instances/${reserved.id}`, { key })).body.status).toBe('draining');
      expect((await chargesOf(reserved.id)).map((c) => c.kind)).toEqual(['reservation']);

      const racing = (await create({ sku: 'h100-80gb', gpus: 1, duration_hours: 1 })).body;
      await cp.app.services.instances.onTaskState(racing.node_id, racing.id, 'running', {});
      clock.advance(3_600_000 - 1);
      const [extended] = await Promise.all([extend(racing.id, 24), (async () => { clock.advance(1); await cp.app.services.instances.expireDue(); })()]);
      const status = (await cp.request('GET', `/v1/instances/${racing.id}`, { key })).body.status;
      const extensions = (await chargesOf(racing.id)).filter((c) => c.kind === 'extension');
      // Paid for 24 more hours only if it runs them.
      expect({ extended: extended.status === 200, running: status === 'ready', charged: extensions.length === 1 }).toEqual(
        extended.status === 200 ? { extended: true, running: true, charged: true } : { extended: false, running: false, charged: false },
      );
    });
  });

  describe("an org's GPU quota (SVC_ORG_MAX_GPUS)", () => {
    const QUOTA = 4;
    let limited: TestControlPlane<Store>;
    beforeAll(async () => {
      limited = await startControlPlane({ clock, engine, config: { orgMaxGpus: QUOTA } });
      for (const pool of ['na', 'eu', 'apac'] as const) await addReadyNode(limited, { pool, gpus: 16 });
      limited.app.services.taskDispatcher.attach(() => true);
    });
    afterAll(() => limited.close());
    const createIn = (orgKey: string, gpus: number, pool?: string) => limited.request('POST', '/v1/instances', { key: orgKey, body: { sku: 'h100-80gb', gpus, ...(pool ? { pool } : {}) } });
    const keyOfNewOrg = async (name: string) => limited.key({ scopes: ['compute:write', 'compute:read'], orgId: (await limited.app.services.orgs.create(name)).id });

    it('refuses a create past the quota with 403 quota_exceeded, saying how many GPUs the org holds; other orgs are not held to it', async () => {
      const mine = await keyOfNewOrg('quota-a');
      expect((await createIn(mine, 2)).status).toBe(201);
      expect((await createIn(mine, 2)).status).toBe(201);
      const past = await createIn(mine, 1);
      expectError(past, 403, 'quota_exceeded');
      expect(past.body.error).toMatchObject({
        param: 'gpus',
        message: "your organization's instances hold 4 of its 4 GPUs, so 1 more would pass its quota; terminate an instance, or ask your provider to raise the quota",
      });
      // GPUs are free on the nodes: the refusal is the quota, not capacity. Another org gets them.
      expect((await createIn(await keyOfNewOrg('quota-b'), 4)).status).toBe(201);
    });

    it("an org's own quota, set by the provider, replaces the default both ways; null goes back to it", async () => {
      const orgId = (await limited.app.services.orgs.create('quota-d')).id;
      const mine = await limited.key({ scopes: ['compute:write', 'compute:read'], orgId });
      await limited.app.services.orgs.update(orgId, { gpuQuota: 6 });
      expect((await createIn(mine, 4)).status).toBe(201);
      expect((await createIn(mine, 2)).status).toBe(201);
      expectError(await createIn(mine, 1), 403, 'quota_exceeded');
      await limited.app.services.orgs.update(orgId, { gpuQuota: 0 });
      expect((await createIn(mine, 1)).body.error.message).toContain('hold 6 of its 0 GPUs');
      await limited.app.services.orgs.update(orgId, { gpuQuota: null });
      expect((await createIn(mine, 1)).body.error.message).toContain(`hold 6 of its ${QUOTA} GPUs`);
    });

    it('holds across concurrent creates: of three 2-GPU creates at once, two pass', async () => {
      const mine = await keyOfNewOrg('quota-c');
      // One per pool, so no two race for the same GPUs (which would order them anyway).
      const answers = await Promise.all((['na', 'eu', 'apac'] as const).map((pool) => createIn(mine, 2, pool)));
      expect(answers.map((a) => a.status).sort()).toEqual([201, 201, 403]);
      const held = (await limited.request('GET', '/v1/instances', { key: mine })).body.data as Array<{ gpus: number }>;
      expect(held.reduce((sum, i) => sum + i.gpus, 0)).toBe(QUOTA);
    });
  });
});
