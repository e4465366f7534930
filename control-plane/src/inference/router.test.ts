import { afterEach, describe, expect, it } from 'vitest';
import { ApiError } from '@svc/shared';
import type { CatalogModel, Pool, Quantization } from '../models/catalog.js';
import type { LiveReplica, ReplicaDirectory, ServingPlan } from './replica-source.js';
import { Router, type RouterOptions } from './router.js';

const model: CatalogModel = {
  id: 'm',
  kind: 'chat',
  created: 0,
  owned_by: 'x',
  family: 'f',
  context_window: 100,
  quantizations: ['fp16', 'int4'],
  rate_card_id: 'rc',
  serving: { engine: 'cpu', image: 'engine:1', gpus: 0, weights: {} },
};

const replica = (id: string, pool: Pool, quantization: Quantization = 'int4'): LiveReplica => ({
  id,
  model: 'm',
  quantization,
  pool,
  nodeId: 'node',
  baseUrl: `http://${id}`,
  engine: 'cpu',
  image: 'img',
  apiKey: undefined,
});

class Directory implements ReplicaDirectory {
  constructor(public replicas: LiveReplica[]) {}
  ready(filter: { model?: string } = {}) {
    return this.replicas.filter((r) => filter.model === undefined || r.model === filter.model);
  }
}

/** Desired counts as "pool:quantization" -> n. */
const plan = (desired: Record<string, number>): ServingPlan => ({ desired: (_m, q, p) => desired[`${p}:${q}`] ?? 0 });

let routers: Router[] = [];
afterEach(() => {
  routers.forEach((r) => r.close());
  routers = [];
});

function router(dir: ReplicaDirectory, desired: Record<string, number>, options: Partial<RouterOptions> = {}): Router {
  const r = new Router(dir, plan(desired), {
    poolOrder: ['na', 'eu', 'apac'],
    maxOutstandingPerReplica: 2,
    maxTenantShare: 1,
    ejectMs: 20,
    maxEjectMs: 80,
    probe: async () => true,
    byPrice: () => ['int4', 'fp16'],
    ...options,
  });
  routers.push(r);
  return r;
}

function refusal(fn: () => unknown): { type: string; message: string } {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return { type: err.type, message: err.message };
    throw err;
  }
  throw new Error('expected a refusal');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Router', () => {
  it('defaults to the cheapest variant with live replicas, and honours an explicit one', () => {
    const dir = new Directory([replica('a', 'na', 'fp16'), replica('b', 'na', 'int4')]);
    const r = router(dir, { 'na:fp16': 1, 'na:int4': 1 });
    expect(r.route({ tenant: 'org_a', model }).replica.id).toBe('b');
    expect(r.route({ tenant: 'org_a', model, quantization: 'fp16' }).replica.id).toBe('a');
    dir.replicas = [replica('a', 'na', 'fp16')];
    expect(r.route({ tenant: 'org_a', model }).replica.id).toBe('a');
  });

  it('sends each request to the replica with the fewest in flight, and frees them on release', () => {
    const r = router(new Directory([replica('a', 'na'), replica('b', 'na')]), { 'na:int4': 2 });
    const first = r.route({ tenant: 'org_a', model });
    const second = r.route({ tenant: 'org_a', model });
    expect(new Set([first.replica.id, second.replica.id])).toEqual(new Set(['a', 'b']));
    first.release('ok');
    expect(r.route({ tenant: 'org_a', model }).replica.id).toBe(first.replica.id);
    expect(r.inFlight(second.replica.id)).toBe(1);
  });

  describe('shares a variant\'s slots between organizations', () => {
    // Two replicas of 4 slots each in na: 8 slots.
    const shared = (share: number) => router(new Directory([replica('a', 'na'), replica('b', 'na')]), { 'na:int4': 2 }, { maxOutstandingPerReplica: 4, maxTenantShare: share });
    const take = (r: Router, tenant: string, n: number) => Array.from({ length: n }, () => r.route({ tenant, model }));

    it.each([
      // [maxTenantShare, slots one org may take alone]
      [0.5, 4],
      [0.25, 2],
      [1, 8],
      [0.01, 1], // never less than one
    ])('one org alone holds at most its share (%s of 8 slots: %s); past it 429 with retry-after', (share, alone) => {
      const r = shared(share);
      take(r, 'org_a', alone);
      const err = (() => {
        try {
          r.route({ tenant: 'org_a', model });
        } catch (e) {
          return e as ApiError;
        }
        return undefined;
      })();
      if (alone === 8) {
        expect(err?.type).toBe('no_capacity'); // every slot taken: nothing left to share
        return;
      }
      expect(err).toMatchObject({ type: 'rate_limited', status: 429, headers: { 'retry-after': '1' } });
      expect(err!.message).toBe(`your organization holds ${alone} of the 8 requests in flight m (int4) in pool na can take, its share while the rest is kept for others; retry when one of yours finishes`);
      // What it left is there for the next org at once, up to that org's own share.
      expect(take(r, 'org_b', alone)).toHaveLength(alone);
    });

    it('once half the slots are taken, each org holding any gets an equal share, and a freed slot goes to one under its share', () => {
      const r = shared(0.5);
      const a = take(r, 'org_a', 4);
      take(r, 'org_b', 2);
      take(r, 'org_c', 1);
      // 7 of 8 taken by three orgs: an equal share is 3. org_a (4) is over it, org_b (2) under.
      expect(refusal(() => r.route({ tenant: 'org_a', model }))).toMatchObject({ type: 'rate_limited', message: expect.stringContaining('while 3 organizations share them') });
      take(r, 'org_b', 1);
      expect(refusal(() => r.route({ tenant: 'org_b', model })).type).toBe('rate_limited'); // at its share of 3
      expect(refusal(() => r.route({ tenant: 'org_d', model })).type).toBe('no_capacity'); // under it, but all 8 are taken
      a[0]!.release('ok');
      a[1]!.release('ok');
      // org_a now holds 2, under its share of 3; so does org_c (1). Both may take a slot.
      take(r, 'org_c', 1);
      take(r, 'org_a', 1);
      expect(refusal(() => r.route({ tenant: 'org_a', model })).type).toBe('rate_limited'); // 3: at its share again
    });

    it('with other control-plane processes, sends each replica only its part of the limit, and shares that part', () => {
      // 4 slots per replica for the fleet; this process's part of a limit: a third, rounded down.
      let part = (limit: number) => Math.floor(limit / 3);
      const r = router(new Directory([replica('a', 'na'), replica('b', 'na')]), { 'na:int4': 2 }, { maxOutstandingPerReplica: 6, maxTenantShare: 0.5, part: (limit) => part(limit) });
      // Its part: 2 per replica, 4 in all; one org alone takes half of those.
      const a = take(r, 'org_a', 2);
      expect(refusal(() => r.route({ tenant: 'org_a', model }))).toMatchObject({
        type: 'rate_limited',
        message: 'your organization holds 2 of the 4 requests in flight this control-plane process may send m (int4) in pool na (its part of 12), its share while the rest is kept for others; retry when one of yours finishes',
      });
      take(r, 'org_b', 2);
      expect(refusal(() => r.route({ tenant: 'org_c', model }))).toMatchObject({
        type: 'no_capacity',
        message: 'every replica of m (int4) in pool na is at its limit of 6 requests in flight; retry with backoff',
      });
      // A process left: the part grows at once, for requests held and new alike.
      part = (limit) => Math.floor(limit / 2);
      expect(take(r, 'org_c', 2)).toHaveLength(2);
      a[0]!.release('ok');
      expect(r.inFlight('a') + r.inFlight('b')).toBe(5);
    });

    it('counts each variant and pool apart, and forgets an org whose requests all finished', () => {
      const r = router(new Directory([replica('a', 'na'), replica('f', 'na', 'fp16'), replica('e', 'eu')]), { 'na:int4': 1, 'na:fp16': 1, 'eu:int4': 1 }, { maxOutstandingPerReplica: 4, maxTenantShare: 0.5 });
      const held = take(r, 'org_a', 2);
      expect(refusal(() => r.route({ tenant: 'org_a', model, pool: 'na' })).type).toBe('rate_limited');
      expect(r.route({ tenant: 'org_a', model, quantization: 'fp16' }).replica.id).toBe('f');
      expect(r.route({ tenant: 'org_a', model, pool: 'eu' }).replica.id).toBe('e');
      for (const l of held) l.release('ok');
      expect(take(r, 'org_a', 2).map((l) => l.replica.id)).toEqual(['a', 'a']);
    });
  });

  it('says when no request holds a replica any more (what closing waits for)', async () => {
    const r = router(new Directory([replica('a', 'na'), replica('b', 'na')]), { 'na:int4': 2 });
    await r.idle(); // none held: at once
    const [x, y] = [r.route({ tenant: 'org_a', model }), r.route({ tenant: 'org_b', model })];
    let idle = false;
    void r.idle().then(() => (idle = true));
    x.release('ok');
    x.release('ok'); // twice is once
    await sleep(5);
    expect([idle, r.leasedCount]).toEqual([false, 1]);
    y.release('failed');
    await sleep(5);
    expect([idle, r.leasedCount]).toEqual([true, 0]);
  });

  it('is 409 no_capacity when every replica is at its in-flight limit', () => {
    const r = router(new Directory([replica('a', 'na')]), { 'na:int4': 1 });
    r.route({ tenant: 'org_a', model });
    r.route({ tenant: 'org_a', model });
    expect(refusal(() => r.route({ tenant: 'org_a', model })).type).toBe('no_capacity');
  });

  it('unpinned, prefers the healthiest pool, ties by the configured order', () => {
    const dir = new Directory([replica('na1', 'na'), replica('eu1', 'eu'), replica('eu2', 'eu')]);
    // na runs 1 of 2 wanted replicas, eu runs 2 of 2: eu is healthier.
    expect(router(dir, { 'na:int4': 2, 'eu:int4': 2 }).route({ tenant: 'org_a', model }).replica.pool).toBe('eu');
    // Both at full strength: na comes first in the order.
    expect(router(dir, { 'na:int4': 1, 'eu:int4': 2 }).route({ tenant: 'org_a', model }).replica.pool).toBe('na');
  });

  it('pinned to a pool that does not serve the model: 404 model_not_found naming where it is served', () => {
    const r = router(new Directory([replica('a', 'na')]), { 'na:int4': 1 });
    const err = refusal(() => r.route({ tenant: 'org_a', model, pool: 'apac' }));
    expect(err.type).toBe('model_not_found');
    expect(err.message).toContain('served in na');
  });

  it('pinned to a pool whose replicas are all down: 503 pool_degraded suggesting a healthy pool', () => {
    const r = router(new Directory([replica('eu1', 'eu')]), { 'na:int4': 1, 'eu:int4': 1 });
    const err = refusal(() => r.route({ tenant: 'org_a', model, pool: 'na' }));
    expect(err.type).toBe('pool_degraded');
    expect(err.message).toContain('X-Service-Pool: eu');
  });

  it('unpinned with nothing live anywhere: 409 no_capacity', () => {
    expect(refusal(() => router(new Directory([]), { 'na:int4': 1 }).route({ tenant: 'org_a', model })).type).toBe('no_capacity');
  });

  it('ejects a replica whose request failed, routes around it, and takes it back once a probe succeeds', async () => {
    let healthy = false;
    const r = router(new Directory([replica('a', 'na'), replica('b', 'na')]), { 'na:int4': 2 }, { probe: async () => healthy });
    const lease = r.route({ tenant: 'org_a', model, exclude: new Set(['b']) });
    expect(lease.replica.id).toBe('a');
    lease.release('failed');
    expect(r.isEjected('a')).toBe(true);
    for (let i = 0; i < 4; i++) r.route({ tenant: 'org_a', model }).release('ok');
    expect(r.inFlight('a')).toBe(0);
    expect(r.route({ tenant: 'org_a', model }).replica.id).toBe('b');
    await sleep(60); // a first probe fails: ejected again, for longer
    expect(r.isEjected('a')).toBe(true);
    healthy = true;
    await sleep(150);
    expect(r.isEjected('a')).toBe(false);
  });

  describe('a failure the request may have caused (suspect)', () => {
    const cases: Array<{ name: string; healthy: boolean; failures: Array<[tenant: string, outcome: 'ok' | 'suspect']>; ejected: boolean }> = [
      { name: 'one org, the probe answers healthy: stays in service', healthy: true, failures: [['org_a', 'suspect'], ['org_a', 'suspect'], ['org_a', 'suspect']], ejected: false },
      { name: 'one org, the probe fails: ejected', healthy: false, failures: [['org_a', 'suspect']], ejected: true },
      { name: 'two orgs with no success between: ejected though healthy', healthy: true, failures: [['org_a', 'suspect'], ['org_b', 'suspect']], ejected: true },
      { name: 'two orgs with a success between: stays in service', healthy: true, failures: [['org_a', 'suspect'], ['org_c', 'ok'], ['org_b', 'suspect']], ejected: false },
    ];
    for (const c of cases) {
      it(c.name, async () => {
        let probes = 0;
        const r = router(new Directory([replica('a', 'na')]), { 'na:int4': 1 }, {
          probe: async () => {
            probes++;
            return c.healthy;
          },
        });
        for (const [tenant, outcome] of c.failures) r.route({ tenant, model }).release(outcome);
        await sleep(5);
        expect(r.isEjected('a')).toBe(c.ejected);
        expect(probes).toBeGreaterThan(0);
      });
    }
  });

  it('with only ejected replicas in a pinned pool, answers pool_degraded instead of waiting', () => {
    const r = router(new Directory([replica('a', 'na')]), { 'na:int4': 1 }, { probe: async () => false });
    r.route({ tenant: 'org_a', model }).release('failed');
    expect(refusal(() => r.route({ tenant: 'org_a', model, pool: 'na' })).type).toBe('pool_degraded');
  });

  it('skips replicas the request already failed on', () => {
    const r = router(new Directory([replica('a', 'na'), replica('b', 'na')]), { 'na:int4': 2 });
    for (let i = 0; i < 5; i++) {
      const lease = r.route({ tenant: 'org_a', model, exclude: new Set(['a']) });
      expect(lease.replica.id).toBe('b');
      lease.release('ok');
    }
  });
});
