// SLA credits against what was billed (docs/billing.md, "SLA credits"), on both engines:
// an SLA credit is a share of what the instance's hours in the month were billed at, so
// hours given back (never billed) earn none.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import type { Store } from '../src/store/store.js';
import type { HealthEventKind, HealthEventRecord } from '../src/store/node-store.js';
import { billingPeriod } from '../src/billing/periods.js';
import { STORE_ENGINES } from '../../test/support/postgres-stores.js';
import { addReadyNode, startControlPlane, type TestControlPlane } from './harness.js';

const H = 3_600_000;
const T0 = Date.UTC(2026, 10, 2);

describe.each(STORE_ENGINES)('%s', (engine) => {
  const clock = new ManualClock(T0);
  let cp: TestControlPlane<Store>;

  beforeAll(async () => {
    // The billing tick is driven by hand here, on the test's clock.
    cp = await startControlPlane({ engine, clock, config: { slaCreditCheckMs: 3_600_000 } });
  });
  afterAll(() => cp?.close());

  it('an on-demand instance whose node came back without it is credited no more than it was billed', async () => {
    const { instances, sla } = cp.app.services;
    const { nodeId } = await addReadyNode(cp, { gpus: 8 });
    const created = await instances.create(cp.org.id, null, { sku: 'h100-80gb', gpus: 8 });
    await instances.onTaskState(nodeId, created.id, 'running', {});
    const ev = (kind: HealthEventKind, at: number): HealthEventRecord => ({ nodeId, gpuUuid: null, gpuIndex: null, kind, xid: null, healthy: null, message: kind, at });
    // It runs 1 h; its node then goes silent for 3 days, billed hourly meanwhile.
    const lastContact = T0 + H;
    clock.set(T0 + H + 30_000);
    await cp.store.nodes.setStatus(nodeId, 'unreachable', ev('node_down', clock.now()));
    for (let h = 2; h <= 73; h++) {
      clock.set(T0 + h * H + 5_000);
      await instances.accrueOnDemand();
    }
    // The node comes back without the container: billed to its last contact, the rest given back.
    clock.set(T0 + 73 * H + 10_000);
    await cp.store.nodes.setStatus(nodeId, 'ready', ev('node_up', clock.now()));
    await instances.onNodeConnected(nodeId, new Set(), new Map(), lastContact);
    clock.set(T0 + 73 * H + 11_000);
    await instances.onTaskState(nodeId, created.id, 'gone', { stoppedAt: null });
    expect((await cp.store.instances.get(created.id))!.status).toBe('terminated');
    const billedNanos = (await cp.store.instances.chargesFor(created.id)).reduce((sum, c) => sum + c.amountMicros, 0) * 1_000;
    expect(billedNanos).toBe(19_920_000_000); // 8 x $2.49 for the hour it ran

    clock.set(Date.UTC(2026, 11, 1, 0, 5));
    await sla.issueCredits(billingPeriod(Date.UTC(2026, 10, 15)));
    const credits = await cp.store.ledger.credits(cp.org.id, { from: 0, to: clock.now() + 1 });
    const credited = credits.filter((c) => c.kind === 'sla_credit').reduce((sum, c) => sum + c.amountNanos, 0);
    expect(credited).toBeLessThanOrEqual(billedNanos);
    // Its billed hour had no outage in it: nothing is owed.
    expect(credited).toBe(0);
  });
});
