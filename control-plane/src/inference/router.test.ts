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
    expect(r.route({ model }).replica.id).toBe('b');
    expect(r.route({ model, quantization: 'fp16' }).replica.id).toBe('a');
    dir.replicas = [replica('a', 'na', 'fp16')];
    expect(r.route({ model }).replica.id).toBe('a');
  });

  it('sends each request to the replica with the fewest in flight, and frees them on release', () => {
    const r = router(new Directory([replica('a', 'na'), replica('b', 'na')]), { 'na:int4': 2 });
    const first = r.route({ model });
    const second = r.route({ model });
    expect(new Set([first.replica.id, second.replica.id])).toEqual(new Set(['a', 'b']));
    first.release('ok');
    expect(r.route({ model }).replica.id).toBe(first.replica.id);
    expect(r.inFlight(second.replica.id)).toBe(1);
  });

  it('is 409 no_capacity when every replica is at its in-flight limit', () => {
    const r = router(new Directory([replica('a', 'na')]), { 'na:int4': 1 });
    r.route({ model });
    r.route({ model });
    expect(refusal(() => r.route({ model })).type).toBe('no_capacity');
  });

  it('unpinned, prefers the healthiest pool, ties by the configured order', () => {
    const dir = new Directory([replica('na1', 'na'), replica('eu1', 'eu'), replica('eu2', 'eu')]);
    // na runs 1 of 2 wanted replicas, eu runs 2 of 2: eu is healthier.
    expect(router(dir, { 'na:int4': 2, 'eu:int4': 2 }).route({ model }).replica.pool).toBe('eu');
    // Both at full strength: na comes first in the order.
    expect(router(dir, { 'na:int4': 1, 'eu:int4': 2 }).route({ model }).replica.pool).toBe('na');
  });

  it('pinned to a pool that does not serve the model: 404 model_not_found naming where it is served', () => {
    const r = router(new Directory([replica('a', 'na')]), { 'na:int4': 1 });
    const err = refusal(() => r.route({ model, pool: 'apac' }));
    expect(err.type).toBe('model_not_found');
    expect(err.message).toContain('served in na');
  });

  it('pinned to a pool whose replicas are all down: 503 pool_degraded suggesting a healthy pool', () => {
    const r = router(new Directory([replica('eu1', 'eu')]), { 'na:int4': 1, 'eu:int4': 1 });
    const err = refusal(() => r.route({ model, pool: 'na' }));
    expect(err.type).toBe('pool_degraded');
    expect(err.message).toContain('X-Service-Pool: eu');
  });

  it('unpinned with nothing live anywhere: 409 no_capacity', () => {
    expect(refusal(() => router(new Directory([]), { 'na:int4': 1 }).route({ model })).type).toBe('no_capacity');
  });

  it('ejects a replica whose request failed, routes around it, and takes it back once a probe succeeds', async () => {
    let healthy = false;
    const r = router(new Directory([replica('a', 'na'), replica('b', 'na')]), { 'na:int4': 2 }, { probe: async () => healthy });
    const lease = r.route({ model, exclude: new Set(['b']) });
    expect(lease.replica.id).toBe('a');
    lease.release('failed');
    expect(r.isEjected('a')).toBe(true);
    for (let i = 0; i < 4; i++) r.route({ model }).release('ok');
    expect(r.inFlight('a')).toBe(0);
    expect(r.route({ model }).replica.id).toBe('b');
    await sleep(60); // a first probe fails: ejected again, for longer
    expect(r.isEjected('a')).toBe(true);
    healthy = true;
    await sleep(150);
    expect(r.isEjected('a')).toBe(false);
  });

  it('with only ejected replicas in a pinned pool, answers pool_degraded instead of waiting', () => {
    const r = router(new Directory([replica('a', 'na')]), { 'na:int4': 1 }, { probe: async () => false });
    r.route({ model }).release('failed');
    expect(refusal(() => r.route({ model, pool: 'na' })).type).toBe('pool_degraded');
  });

  it('skips replicas the request already failed on', () => {
    const r = router(new Directory([replica('a', 'na'), replica('b', 'na')]), { 'na:int4': 2 });
    for (let i = 0; i < 5; i++) {
      const lease = r.route({ model, exclude: new Set(['a']) });
      expect(lease.replica.id).toBe('b');
      lease.release('ok');
    }
  });
});
