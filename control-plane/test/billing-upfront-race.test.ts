// Up-front charges (reservations, extensions) sent at once on one prepaid balance
// (docs/billing.md, "Credit balance"), on both engines: the balance is read and the charge
// written in one transaction under the org's lock, so only what the balance covers is
// admitted and the rest get the usual 402 insufficient_quota.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import type { Store } from '../src/store/store.js';
import { STORE_ENGINES } from '../../test/support/postgres-stores.js';
import { addReadyNode, expectError, startControlPlane, type TestControlPlane } from './harness.js';

/** One node per (sku, pool), so the creates do not queue on one node's GPU claims. */
const TARGETS = [
  ['h100-80gb', 'NVIDIA H100 80GB HBM3', 'na', 2.49],
  ['h100-80gb', 'NVIDIA H100 80GB HBM3', 'eu', 2.69],
  ['h100-80gb', 'NVIDIA H100 80GB HBM3', 'apac', 2.79],
  ['h200-141gb', 'NVIDIA H200', 'na', 3.49],
  ['h200-141gb', 'NVIDIA H200', 'eu', 3.69],
  ['h200-141gb', 'NVIDIA H200', 'apac', 3.79],
  ['a100-80gb', 'NVIDIA A100-SXM4-80GB', 'na', 1.79],
  ['a100-80gb', 'NVIDIA A100-SXM4-80GB', 'eu', 1.89],
] as const;

describe.each(STORE_ENGINES)('%s', (engine) => {
  let cp: TestControlPlane<Store>;
  let key: string;

  beforeAll(async () => {
    cp = await startControlPlane({ engine, clock: new ManualClock(Date.UTC(2026, 10, 24, 12)) });
    for (const [, model, pool] of TARGETS) await addReadyNode(cp, { gpus: 8, model, pool });
    await cp.app.services.billing.configure(cp.org.id, { mode: 'prepaid' });
    key = await cp.key({ scopes: ['compute:write', 'compute:read', 'billing:read'] });
  });
  afterAll(() => cp?.close());

  const balanceNanos = async () => {
    const account = await cp.app.services.billing.account(cp.org.id);
    return account.creditedNanos - account.spentNanos;
  };

  it('eight reservations of about $99 at once on $100: one is created, seven are refused', async () => {
    await cp.app.services.billing.grant(cp.org.id, 100_000_000_000, 'top-up', null);
    const results = await Promise.all(
      TARGETS.map(([sku, , pool, price]) =>
        cp.request('POST', '/v1/instances', { key, body: { sku, gpus: 8, pool, duration_hours: Math.floor((99 / (8 * price)) * 1000) / 1000 } }),
      ),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const refused of results.filter((r) => r.status !== 201)) expect(expectError(refused, 402, 'insufficient_quota').message).toMatch(/up front, more than your organization's prepaid balance/);
    expect(await balanceNanos()).toBeGreaterThanOrEqual(0);
  });

  it('eight extensions of one reservation at once on a balance covering one: one is added', async () => {
    // A node of its own (the first test may hold the others), and credit for its first hour.
    await addReadyNode(cp, { gpus: 8, model: 'NVIDIA A100-SXM4-80GB', pool: 'eu' });
    await cp.app.services.billing.grant(cp.org.id, 2_000_000_000 - Math.min(0, await balanceNanos()), 'top-up', null);
    const created = (await cp.request('POST', '/v1/instances', { key, body: { sku: 'a100-80gb', gpus: 1, pool: 'eu', duration_hours: 1 } })).body;
    const { nodeId } = (await cp.store.instances.get(created.id))!;
    await cp.app.services.instances.onTaskState(nodeId!, created.id, 'running', {});
    // A 5 h extension of one A100 in eu costs $9.45: top up to just under two of them.
    await cp.app.services.billing.grant(cp.org.id, 18_000_000_000 - (await balanceNanos()), 'top-up', null);
    const results = await Promise.all(Array.from({ length: 8 }, () => cp.request('POST', `/v1/instances/${created.id}/extend`, { key, body: { hours: 5 } })));
    expect(results.map((r) => r.status).filter((s) => s === 200)).toHaveLength(1);
    for (const refused of results.filter((r) => r.status !== 200)) expectError(refused, 402, 'insufficient_quota');
    expect((await cp.store.instances.get(created.id))!.durationHours).toBe(6);
    expect(await balanceNanos()).toBe(18_000_000_000 - 9_450_000_000);
  });
});
