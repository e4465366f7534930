// SLA credits of a reservation that ends because its node lost the container
// (docs/billing.md, "SLA credits"), on both engines: an end the provider caused is owed
// the rest of the reserved time, whether the node is forgotten or comes back without the
// container (its Hello drains the instance first, then the node reports it gone); an end
// the tenant asked for during the same outage is not.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import type { Store } from '../src/store/store.js';
import type { HealthEventKind, HealthEventRecord } from '../src/store/node-store.js';
import { billingPeriod } from '../src/billing/periods.js';
import { STORE_ENGINES } from '../../test/support/postgres-stores.js';
import { addReadyNode, startControlPlane, type TestControlPlane } from './harness.js';

const H = 3_600_000;
const T0 = Date.UTC(2026, 10, 10);
const NOVEMBER = billingPeriod(Date.UTC(2026, 10, 15));

describe.each(STORE_ENGINES)('%s', (engine) => {
  let clock: ManualClock;
  let cp: TestControlPlane<Store>;

  beforeEach(async () => {
    clock = new ManualClock(T0);
    cp = await startControlPlane({ engine, clock, config: { slaCreditCheckMs: 3_600_000 } });
  });
  afterEach(() => cp?.close());

  /** A ready 24 h reservation of 8 x h100-80gb whose node goes down 2 h in and is back 6 h in; returns what it paid. */
  async function reservationWithNodeDown(): Promise<{ nodeId: string; id: string; paid: number; lastContact: number }> {
    const { instances } = cp.app.services;
    const { nodeId } = await addReadyNode(cp, { gpus: 8 });
    const ev = (kind: HealthEventKind, at: number): HealthEventRecord => ({ nodeId, gpuUuid: null, gpuIndex: null, kind, xid: null, healthy: null, message: kind, at });
    const r = await instances.create(cp.org.id, null, { sku: 'h100-80gb', gpus: 8, duration_hours: 24 });
    await instances.onTaskState(nodeId, r.id, 'running', {});
    const lastContact = T0 + 2 * H;
    clock.set(lastContact + 30_000);
    await cp.store.nodes.setStatus(nodeId, 'unreachable', ev('node_down', clock.now()));
    clock.set(T0 + 6 * H);
    await cp.store.nodes.setStatus(nodeId, 'ready', ev('node_up', clock.now()));
    const paid = (await cp.store.instances.chargesFor(r.id)).reduce((sum, c) => sum + c.amountMicros, 0) * 1_000;
    return { nodeId, id: r.id, paid, lastContact };
  }

  async function novemberCredit(): Promise<number> {
    clock.set(Date.UTC(2026, 11, 1, 0, 5));
    await cp.app.services.sla.issueCredits(NOVEMBER);
    const credits = await cp.store.ledger.credits(cp.org.id, { from: 0, to: clock.now() + 1 });
    return credits.filter((c) => c.kind === 'sla_credit').reduce((sum, c) => sum + c.amountNanos, 0);
  }

  it('its node comes back without the container: credited the rest of its reserved time', async () => {
    const { instances } = cp.app.services;
    const { nodeId, id, paid, lastContact } = await reservationWithNodeDown();
    expect(paid).toBe(334_656_000_000);
    // The Hello finds the container gone (the host rebooted): draining, then gone.
    await instances.onNodeConnected(nodeId, new Set(), new Map(), lastContact);
    expect((await cp.store.instances.get(id))!.status).toBe('draining');
    clock.set(T0 + 6 * H + 1_000);
    await instances.onTaskState(nodeId, id, 'gone', { stoppedAt: null });
    expect((await cp.store.instances.get(id))!.status).toBe('terminated');
    // 2 h served of 24 h paid: available 8.3%, so 100% of the reserved hours come back.
    expect(await novemberCredit()).toBe(paid);
  });

  it('its node is forgotten: credited the rest of its reserved time too', async () => {
    const { id, nodeId, paid, lastContact } = await reservationWithNodeDown();
    await cp.app.services.instances.forgetNode(nodeId, lastContact);
    expect((await cp.store.instances.get(id))!.status).toBe('terminated');
    expect(await novemberCredit()).toBe(paid);
  });

  it('its tenant terminates it while the node is away: only the outage is downtime', async () => {
    const { instances } = cp.app.services;
    const { nodeId, id, lastContact } = await reservationWithNodeDown();
    // The tenant gives up on it 4 h in, while the node is still away; the stop waits for the node.
    clock.set(T0 + 4 * H);
    await instances.terminate(cp.org.id, id, false);
    clock.set(T0 + 6 * H);
    await instances.onNodeConnected(nodeId, new Set(), new Map(), lastContact);
    clock.set(T0 + 6 * H + 1_000);
    await instances.onTaskState(nodeId, id, 'gone', { stoppedAt: null });
    expect((await cp.store.instances.get(id))!.status).toBe('terminated');
    // Its window closes at its end (6 h in); the node was away from 2 h 30 s to 6 h:
    // available 41.8%, so 100% of those 6 h at its booked rate.
    const rateNanosPerHour = 334_656_000_000 / 24;
    expect(await novemberCredit()).toBe(Math.round((rateNanosPerHour * (6 * H + 1_000)) / H));
  });
});
