// SLA credits of an on-demand instance whose node is away across a month end
// (docs/billing.md, "SLA credits"), on both engines. At the month end its bill for the
// month is not known yet: a node that comes back without the container gives back the
// hours it was away, one that comes back with it keeps them. Its credit waits until it
// is known, and never exceeds what the instance was billed in the month.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import type { Store } from '../src/store/store.js';
import type { HealthEventKind, HealthEventRecord } from '../src/store/node-store.js';
import { billingPeriod } from '../src/billing/periods.js';
import { STORE_ENGINES } from '../../test/support/postgres-stores.js';
import { addReadyNode, startControlPlane, type TestControlPlane } from './harness.js';

const H = 3_600_000;
const T0 = Date.UTC(2026, 10, 28); // 28 November, 00:00
const DEC_1 = Date.UTC(2026, 11, 1);
const NOVEMBER = billingPeriod(Date.UTC(2026, 10, 15));
/** 8 x h100-80gb on demand ($2.49 per GPU-hour), per hour, in nano-dollars. */
const HOUR_NANOS = 8 * 2_490_000_000;

describe.each(STORE_ENGINES)('%s', (engine) => {
  let clock: ManualClock;
  let cp: TestControlPlane<Store>;

  beforeEach(async () => {
    clock = new ManualClock(T0);
    // The billing tick is driven by hand here, on the test's clock.
    cp = await startControlPlane({ engine, clock, config: { slaCreditCheckMs: 3_600_000 } });
  });
  afterEach(() => cp?.close());

  /**
   * An 8-GPU on-demand instance ready at T0 whose node is last heard of a day later and
   * marked down 30 s after; billed hourly until 2 December, November's credits issued
   * at the 1 December tick. Returns at 2 December 00:00:10, the node back up (no Hello yet).
   */
  async function awayAcrossMonthEnd() {
    const { instances, sla } = cp.app.services;
    const { nodeId } = await addReadyNode(cp, { gpus: 8 });
    const created = await instances.create(cp.org.id, null, { sku: 'h100-80gb', gpus: 8 });
    await instances.onTaskState(nodeId, created.id, 'running', {});
    const ev = (kind: HealthEventKind, at: number): HealthEventRecord => ({ nodeId, gpuUuid: null, gpuIndex: null, kind, xid: null, healthy: null, message: kind, at });
    const lastContact = T0 + 24 * H;
    clock.set(lastContact + 30_000);
    await cp.store.nodes.setStatus(nodeId, 'unreachable', ev('node_down', clock.now()));
    let issuedAtMonthEnd = -1;
    for (let h = 25; h <= 96; h++) {
      clock.set(T0 + h * H + 5_000);
      await instances.accrueOnDemand();
      if (T0 + h * H === DEC_1) issuedAtMonthEnd = await sla.issueCredits(NOVEMBER);
    }
    clock.set(T0 + 96 * H + 10_000);
    await cp.store.nodes.setStatus(nodeId, 'ready', ev('node_up', clock.now()));
    return { nodeId, id: created.id, lastContact, issuedAtMonthEnd };
  }

  async function slaCredited(): Promise<number> {
    const credits = await cp.store.ledger.credits(cp.org.id, { from: 0, to: clock.now() + 1 });
    return credits.filter((c) => c.kind === 'sla_credit').reduce((sum, c) => sum + c.amountNanos, 0);
  }

  async function billedNanos(id: string, until = Number.POSITIVE_INFINITY): Promise<number> {
    const charges = await cp.store.instances.chargesFor(id);
    return charges.filter((c) => c.createdAt < until).reduce((sum, c) => sum + c.amountMicros, 0) * 1_000;
  }

  it('a node that comes back without the container: no credit for the hours given back', async () => {
    const { instances, sla } = cp.app.services;
    const { nodeId, id, lastContact, issuedAtMonthEnd } = await awayAcrossMonthEnd();
    // Its node was still away at the month end: its November bill was not known yet.
    expect(issuedAtMonthEnd).toBe(0);
    expect(await slaCredited()).toBe(0);

    await instances.onNodeConnected(nodeId, new Set(), new Map(), lastContact);
    clock.set(T0 + 96 * H + 11_000);
    await instances.onTaskState(nodeId, id, 'gone', { stoppedAt: null });
    expect((await cp.store.instances.get(id))!.status).toBe('terminated');
    // Billed to the node's last contact: the 24 h it ran, all in November.
    const billed = await billedNanos(id);
    expect(billed).toBe(24 * HOUR_NANOS);

    // Its end settles the month: the credit held back is measured now, over what was billed.
    clock.set(T0 + 97 * H + 5_000);
    await sla.issueHeldCredits();
    await sla.issueCredits(NOVEMBER);
    const credited = await slaCredited();
    expect(credited).toBeLessThanOrEqual(billed);
    // The hours it was billed for had no outage in them: nothing is owed (as within a month).
    expect(credited).toBe(0);
    const account = await cp.store.ledger.account(cp.org.id, '2026-12');
    expect(account.creditedNanos - account.spentNanos).toBe(-billed);
  });

  it('a node that comes back with the container: the held credit is issued once, within November’s bill', async () => {
    const { instances, sla } = cp.app.services;
    const { nodeId, id, issuedAtMonthEnd } = await awayAcrossMonthEnd();
    expect(issuedAtMonthEnd).toBe(0);
    // Still away: nothing to issue yet.
    expect(await sla.issueHeldCredits()).toBe(0);

    // The node comes back running it: the hours it was away stay billed, and were downtime.
    await instances.onNodeConnected(nodeId, new Set([id]), new Map(), T0 + 24 * H);
    expect((await cp.store.instances.get(id))!.status).toBe('ready');
    clock.set(T0 + 97 * H + 5_000);
    await instances.accrueOnDemand();
    expect(await sla.issueHeldCredits()).toBe(1);
    expect(await sla.issueHeldCredits()).toBe(0);
    expect(await sla.issueCredits(NOVEMBER)).toBe(0);

    // November: 72 h billed, 48 h of them down (33% available): 100% of the 72 h.
    const billedInNovember = await billedNanos(id, DEC_1);
    expect(billedInNovember).toBe(72 * HOUR_NANOS);
    const credited = await slaCredited();
    expect(credited).toBe(72 * HOUR_NANOS);
    expect(credited).toBeLessThanOrEqual(billedInNovember);
  });
});
