// Credit carried from one invoice to the next: an invoice whose total is below zero (a
// prepaid grant, a credit larger than the month's bill) leaves the rest for the next
// month, which uses it before anything is due. Each invoice used to stop at zero and the
// rest was never applied: a prepaid org that used $100 of a $1,000 grant in each of two
// months was asked $100 for the second while its balance read $800. Both store engines.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { billingPeriod } from '../src/billing/periods.js';
import type { Store } from '../src/store/store.js';
import { STORE_ENGINES } from '../../test/support/postgres-stores.js';
import { startControlPlane, type TestControlPlane } from './harness.js';

const USD = 1e9;

describe.each(STORE_ENGINES)('on %s', (engine) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 3, 12));
  let cp: TestControlPlane<Store>;
  let n = 0;

  beforeAll(async () => {
    cp = await startControlPlane({ clock, engine });
  });
  afterAll(() => cp.close());

  const spend = (orgId: string, nanos: number) =>
    cp.store.usage.append([{ id: `usage_${n++}`, orgId, keyId: 'key_x', requestId: `req_${n}`, kind: 'chat', model: 'llama-3.1-8b-instruct', quantization: 'fp16', pool: 'na', promptTokens: 1, completionTokens: 1, costNanos: nanos, user: null, sandbox: false, createdAt: clock.now() }]);
  const endMonth = async (at: number) => {
    clock.set(at);
    await cp.app.services.invoices.finalize(billingPeriod(at - 86_400_000));
  };

  it('applies what earlier invoices left over before anything is due, and shows it', async () => {
    const services = cp.app.services;
    const prepaid = await services.orgs.create(`prepaid-${engine}`);
    const postpaid = await services.orgs.create(`postpaid-${engine}`);
    const [prepaidKey, postpaidKey] = [await cp.key({ orgId: prepaid.id, scopes: ['billing:read'] }), await cp.key({ orgId: postpaid.id, scopes: ['billing:read'] })];
    await services.billing.configure(prepaid.id, { mode: 'prepaid' });
    await services.billing.grant(prepaid.id, 1000 * USD, 'prepayment', 'op');
    await spend(prepaid.id, 100 * USD);
    await spend(postpaid.id, 100 * USD);
    await endMonth(Date.UTC(2026, 11, 1, 0, 1));
    clock.set(Date.UTC(2026, 11, 10));
    await spend(prepaid.id, 100 * USD);
    await spend(postpaid.id, 100 * USD);
    await services.billing.grant(postpaid.id, 500 * USD, 'goodwill credit', 'op');
    await endMonth(Date.UTC(2027, 0, 1, 0, 1));
    clock.set(Date.UTC(2027, 0, 10));
    await spend(postpaid.id, 100 * USD);
    await spend(postpaid.id, 350 * USD);
    await endMonth(Date.UTC(2027, 1, 1, 0, 1));

    const invoices = async (key: string) =>
      ((await cp.request('GET', '/v1/billing/invoices', { key })).body.data as Array<Record<string, unknown>>)
        .filter((i) => i.status === 'final')
        .map((i) => [i.period, i.total, i.credit_applied, i.amount_due, i.credit_carried_forward])
        .sort((a, b) => String(a[0]).localeCompare(String(b[0])));
    // period, total, credit applied, amount due, credit carried forward
    expect(await invoices(prepaidKey)).toEqual([
      ['2026-11', -900, 0, 0, 900],
      ['2026-12', 100, 100, 0, 800],
    ]);
    expect(await invoices(postpaidKey)).toEqual([
      ['2026-11', 100, 0, 100, 0],
      ['2026-12', -400, 0, 0, 400],
      ['2027-01', 450, 400, 50, 0],
    ]);
    const balance = (await cp.request('GET', '/v1/billing/balance', { key: prepaidKey })).body;
    expect(balance.balance).toBe(800);
  });
});
