// On-demand compute is billed in the period it runs (docs/billing.md, "Running on-demand
// instances"), on an injectable clock: an instance running from one month into the next
// is on both months' finalized invoices with the seconds each month had, the two summing
// to the price of its whole run; while it runs, the balance and the live draft show it
// up to the last full hour; and a prepaid org whose running instance has used its credit
// is refused new billable work (the instance itself keeps running).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { onDemandPriceMicros, secondsRun, finalSeconds } from '../src/billing/accrual.js';
import { addReadyNode, startControlPlane, type TestControlPlane } from './harness.js';

const clock = new ManualClock(Date.UTC(2026, 10, 30, 22, 0));
let cp: TestControlPlane;
let key: string;

beforeAll(async () => {
  cp = await startControlPlane({ clock, config: { slaCreditCheckMs: 20 } });
  key = await cp.key({ scopes: ['compute:write', 'compute:read', 'billing:read'] });
  cp.app.services.taskDispatcher.attach(() => true);
});
afterAll(() => cp.close());

/** The month's rollup rows of compute (credits left out). */
const usage = async (from: string, to: string) =>
  ((await cp.request('GET', `/v1/billing/usage?from=${from}&to=${to}&bucket=month&group_by=instance_id,kind`, { key })).body.data as Array<{ group: { instance_id: string | null; kind: string }; gpu_seconds: number; amount_nanos: number }>).filter(
    (row) => row.group.instance_id !== null,
  );

describe('an on-demand instance running across a month end', () => {
  it('is billed in each month for the seconds it ran in it, and in all for its whole run', async () => {
    await cp.app.services.billing.configure(cp.org.id, { mode: 'prepaid' });
    await cp.app.services.billing.grant(cp.org.id, 1_000_000_000, 'one dollar', null);
    await addReadyNode(cp, { gpus: 8, pool: 'na' });
    const created = await cp.request('POST', '/v1/instances', { key, body: { sku: 'h100-80gb', gpus: 2, pool: 'na' } });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    clock.advance(30_500); // ready at 22:00:30.5
    const { nodeId, rateMicros, gpus } = (await cp.store.instances.get(id))!;
    await cp.app.services.instances.onTaskState(nodeId!, id, 'running', {});
    const readyAt = (await cp.store.instances.get(id))!.readyAt!;

    // An hour on: the balance and November's live draft show the hour it ran.
    clock.set(Date.UTC(2026, 10, 30, 23, 0, 10));
    const firstHour = onDemandPriceMicros(rateMicros, gpus, secondsRun(readyAt, Date.UTC(2026, 10, 30, 23))) * 1_000;
    const balance = await eventually(async () => {
      const b = (await cp.request('GET', '/v1/billing/balance', { key })).body;
      return b.spent > 0 ? b : undefined;
    });
    expect(balance).toMatchObject({ balance_nanos: 1_000_000_000 - firstHour, spent: firstHour / 1e9 });
    const draft = (await cp.request('GET', '/v1/billing/invoices/upcoming', { key })).body;
    expect(draft.lines.filter((l: { section: string }) => l.section === 'compute')).toMatchObject([{ description: 'h100-80gb on-demand', amount_nanos: firstHour }]);

    // Its credit is used up by the instance that runs: no new billable work, but the instance goes on.
    expect(firstHour).toBeGreaterThan(1_000_000_000);
    const refused = await cp.request('POST', '/v1/instances', { key, body: { sku: 'h100-80gb', gpus: 1, pool: 'na' } });
    expect(refused.status).toBe(402);
    expect(refused.body.error.type).toBe('insufficient_quota');
    expect((await cp.store.instances.get(id))!.status).toBe('ready');
    await cp.app.services.billing.grant(cp.org.id, 1_000_000_000_000, 'top-up', null);

    // November ends: its compute is billed to midnight before its invoice is finalized.
    clock.set(Date.UTC(2026, 11, 1, 0, 0, 5));
    const november = await eventually(async () => {
      const list = (await cp.request('GET', '/v1/billing/invoices', { key })).body.data as Array<{ id: string; period: string; status: string }>;
      const final = list.find((i) => i.period === '2026-11' && i.status === 'final');
      return final ? (await cp.request('GET', `/v1/billing/invoices/${final.id}`, { key })).body : undefined;
    });
    const novSeconds = secondsRun(readyAt, Date.UTC(2026, 11, 1));
    const novMicros = onDemandPriceMicros(rateMicros, gpus, novSeconds);
    expect(november.lines.filter((l: { section: string }) => l.section === 'compute')).toMatchObject([{ description: 'h100-80gb on-demand', amount_nanos: novMicros * 1_000, quantity: expect.closeTo((gpus * novSeconds) / 3600, 5) }]);
    const [novUsage] = await usage('2026-11-01', '2026-12-01');
    expect(novUsage).toMatchObject({ group: { instance_id: id, kind: 'on_demand' }, gpu_seconds: gpus * novSeconds, amount_nanos: novMicros * 1_000 });

    // It runs on into December and is terminated there: December bills only the rest.
    clock.set(Date.UTC(2026, 11, 1, 1, 20, 7, 250));
    await eventually(async () => ((await cp.store.instances.chargesFor(id)).length === 3 ? true : undefined));
    await cp.request('POST', `/v1/instances/${id}/terminate`, { key, body: { force: true } });
    await cp.app.services.instances.onTaskState(nodeId!, id, 'exited', {});
    const ended = (await cp.store.instances.get(id))!;
    expect(ended.status).toBe('terminated');
    const total = finalSeconds(readyAt, ended.terminatedAt!);

    clock.set(Date.UTC(2027, 0, 1, 0, 0, 5));
    const december = await eventually(async () => {
      const list = (await cp.request('GET', '/v1/billing/invoices', { key })).body.data as Array<{ id: string; period: string; status: string }>;
      const final = list.find((i) => i.period === '2026-12' && i.status === 'final');
      return final ? (await cp.request('GET', `/v1/billing/invoices/${final.id}`, { key })).body : undefined;
    });
    const decCompute = december.lines.filter((l: { section: string }) => l.section === 'compute');
    const [decUsage] = await usage('2026-12-01', '2027-01-01');
    expect(decUsage).toMatchObject({ group: { instance_id: id, kind: 'on_demand' }, gpu_seconds: gpus * (total - novSeconds) });
    expect(decCompute).toMatchObject([{ description: 'h100-80gb on-demand', amount_nanos: decUsage!.amount_nanos }]);

    // The two months together: exactly the price of the whole run at one charge.
    expect(novMicros * 1_000 + decUsage!.amount_nanos).toBe(onDemandPriceMicros(rateMicros, gpus, total) * 1_000);
    const charges = await cp.store.instances.chargesFor(id);
    expect(charges.reduce((sum, c) => sum + c.amountMicros, 0)).toBe(onDemandPriceMicros(rateMicros, gpus, total));
    // Hourly lines while it ran, each dated in the hour it closes; the last at its end.
    expect(charges.map((c) => new Date(c.createdAt).toISOString())).toEqual([
      '2026-11-30T22:59:59.999Z',
      '2026-11-30T23:59:59.999Z',
      '2026-12-01T00:59:59.999Z',
      new Date(ended.terminatedAt!).toISOString(),
    ]);
  });
});

async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}
