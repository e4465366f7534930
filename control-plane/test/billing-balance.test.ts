// Credit balance and spending limits: a prepaid org at zero is refused new billable work
// with 402 insufficient_quota (inference with live keys: chat, embeddings and responses;
// instance creation and
// extension) while sandbox keys and reads go on; a credit granted with svcctl lets it
// spend again; a postpaid org stops at its monthly credit limit; the balance falling
// below the org's threshold records a billing.balance_low event, which a real webhook
// receiver gets signed (verified with the `standardwebhooks` library).
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { usdToNanos } from '../src/billing/billing-service.js';
import { spendingDecision, upFrontRefusal } from '../src/billing/spending.js';
import type { BillingAccount } from '../src/store/ledger-store.js';
import { addReadyNode, expectError, startControlPlane, type TestControlPlane } from './harness.js';
import { WebhookReceiver, until } from './webhooks-support.js';

const clock = new ManualClock(Date.UTC(2026, 10, 24, 12));
let cp: TestControlPlane;

const svcctl = fileURLToPath(new URL('../src/cli/svcctl.ts', import.meta.url));
const run = async (...args: string[]) =>
  JSON.parse(
    (await promisify(execFile)(process.execPath, ['--import', 'tsx', svcctl, '--data-dir', cp.dataDir, ...args, '--json'], { env: { ...process.env, SVC_LOG_LEVEL: 'silent' } })).stdout,
  );

const chat = { model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 };

async function spend(orgId: string, nanos: number, on: TestControlPlane = cp): Promise<void> {
  await on.store.usage.append([
    { id: `usage_${Math.random()}`, orgId, keyId: 'key_x', requestId: `req_${Math.random()}`, kind: 'chat', model: 'llama-3.1-8b-instruct', quantization: 'fp16', pool: 'na', promptTokens: 1, completionTokens: 1, costNanos: nanos, user: null, sandbox: false, createdAt: on.clock.now() },
  ]);
}

beforeAll(async () => {
  cp = await startControlPlane({ clock });
});
afterAll(() => cp.close());

describe('spendingDecision', () => {
  const account = (patch: Partial<BillingAccount>): BillingAccount => ({
    orgId: 'o',
    mode: 'postpaid',
    creditLimitNanos: null,
    lowBalanceNanos: null,
    spentNanos: 0,
    creditedNanos: 0,
    periodNanos: 0,
    ...patch,
  });
  it.each([
    ['prepaid with money left', { mode: 'prepaid', creditedNanos: 10, spentNanos: 9 }, true],
    ['prepaid at exactly zero', { mode: 'prepaid', creditedNanos: 10, spentNanos: 10 }, false],
    ['prepaid below zero (work admitted before the stop)', { mode: 'prepaid', creditedNanos: 10, spentNanos: 12 }, false],
    ['postpaid without a limit, deep in debt', { spentNanos: 1e15 }, true],
    ['postpaid under its limit', { creditLimitNanos: 100, periodNanos: 99 }, true],
    ['postpaid at its limit', { creditLimitNanos: 100, periodNanos: 100 }, false],
    ['postpaid: last month does not count against this one', { creditLimitNanos: 100, periodNanos: 0, spentNanos: 500 }, true],
  ] as const)('%s', (_name, patch, allowed) => {
    expect(spendingDecision(account(patch as Partial<BillingAccount>)).allowed).toBe(allowed);
  });
});

describe('upFrontRefusal', () => {
  const account = (patch: Partial<BillingAccount>): BillingAccount => ({
    orgId: 'o', mode: 'postpaid', creditLimitNanos: null, lowBalanceNanos: null, spentNanos: 0, creditedNanos: 0, periodNanos: 0, ...patch,
  });
  it.each([
    ['prepaid, the balance covers it', { mode: 'prepaid', creditedNanos: 100, spentNanos: 40 }, 60, true],
    ['prepaid, a cent short', { mode: 'prepaid', creditedNanos: 100, spentNanos: 40 }, 61, false],
    ['postpaid without a limit', { spentNanos: 1e15 }, 1e12, true],
    ['postpaid, up to its limit', { creditLimitNanos: 100, periodNanos: 40 }, 60, true],
    ['postpaid, past its limit', { creditLimitNanos: 100, periodNanos: 40 }, 61, false],
  ] as const)('%s', (_name, patch, charge, allowed) => {
    expect(upFrontRefusal(account(patch as Partial<BillingAccount>), charge) === null).toBe(allowed);
  });
});

describe('a prepaid org', () => {
  it('is refused billable work at zero, keeps its sandbox and reads, and spends again once credited', async () => {
    const org = await cp.app.services.orgs.create('prepaid-co', 2);
    const live = await cp.key({ orgId: org.id, scopes: ['inference:write', 'compute:write', 'billing:read'] });
    const sandbox = await cp.key({ orgId: org.id, kind: 'test' });
    expect((await run('billing', 'set', org.id, '--mode', 'prepaid')).mode).toBe('prepaid');

    const refused = await cp.request('POST', '/v1/chat/completions', { key: live, body: chat });
    const error = expectError(refused, 402, 'insufficient_quota');
    expect(error.message).toMatch(/prepaid balance is \$0\.00; add credit/);
    expectError(await cp.request('POST', '/v1/embeddings', { key: live, body: { model: 'bge-m3', input: 'x' } }), 402, 'insufficient_quota');
    expectError(await cp.request('POST', '/v1/responses', { key: live, body: { model: 'llama-3.1-8b-instruct', input: 'hi' } }), 402, 'insufficient_quota');
    expectError(await cp.request('POST', '/v1/instances', { key: live, body: { sku: 'h100-80gb', gpus: 1 } }), 402, 'insufficient_quota');
    // Refused before the limits: nothing was taken from the key's token budget.
    expect(refused.headers.get('x-ratelimit-limit-tokens')).toBeNull();
    expect((await cp.request('POST', '/v1/chat/completions', { key: sandbox, body: chat })).status).toBe(200);
    expect((await cp.request('GET', '/v1/billing/balance', { key: live })).body).toMatchObject({ mode: 'prepaid', balance: 0 });

    const granted = await run('billing', 'grant', org.id, '25.50', '--note', 'top-up');
    expect(granted).toMatchObject({ balance_nanos: 25_500_000_000, credited_nanos: 25_500_000_000 });
    clock.advance(1_000); // the server re-reads an account at most once a second
    // Past the balance check: no model server runs here, so the router answers.
    expectError(await cp.request('POST', '/v1/chat/completions', { key: live, body: chat }), 409, 'no_capacity');
    expect((await cp.request('GET', '/v1/billing/balance', { key: live })).body).toMatchObject({ balance: 25.5, credited: 25.5 });

    await spend(org.id, 25_500_000_000);
    clock.advance(1_000);
    expectError(await cp.request('POST', '/v1/chat/completions', { key: live, body: chat }), 402, 'insufficient_quota');
  }, 120_000); // three svcctl processes, each compiling the CLI

  it('is refused a reservation extension at zero, with nothing charged, and extends once credited', async () => {
    await addReadyNode(cp, { pool: 'na', gpus: 8 });
    cp.app.services.taskDispatcher.attach(() => true);
    const org = await cp.app.services.orgs.create('reserved-co', 2);
    const key = await cp.key({ orgId: org.id, scopes: ['compute:write', 'compute:read', 'billing:read'] });
    await cp.app.services.billing.configure(org.id, { mode: 'prepaid' });
    await cp.app.services.billing.grant(org.id, 50_000_000_000, 'top-up', null);
    clock.advance(1_000);
    const reserved = await cp.request('POST', '/v1/instances', { key, body: { sku: 'h100-80gb', gpus: 1, duration_hours: 24 } });
    expect(reserved.status).toBe(201);
    const id = reserved.body.id as string;
    // The reservation was charged up front; spend the rest of the credit to reach exactly zero.
    const left = (await cp.request('GET', '/v1/billing/balance', { key })).body.balance_nanos as number;
    expect(left).toBeGreaterThan(0);
    await spend(org.id, left);
    clock.advance(1_000);
    expect((await cp.request('GET', '/v1/billing/balance', { key })).body).toMatchObject({ mode: 'prepaid', balance_nanos: 0 });

    const refused = expectError(await cp.request('POST', `/v1/instances/${id}/extend`, { key, body: { hours: 24 } }), 402, 'insufficient_quota');
    expect(refused.message).toMatch(/prepaid balance is \$0\.00; add credit/);
    const charges = async () => (await cp.request('GET', '/v1/billing/charges?limit=100', { key })).body.data.map((c: { kind: string }) => c.kind).sort();
    expect(await charges()).toEqual(['reservation']);
    expect((await cp.request('GET', `/v1/instances/${id}`, { key })).body).toMatchObject({ duration_hours: 24 });

    await cp.app.services.billing.grant(org.id, 50_000_000_000, 'top-up', null);
    clock.advance(1_000);
    const extended = await cp.request('POST', `/v1/instances/${id}/extend`, { key, body: { hours: 24 } });
    expect(extended.status).toBe(200);
    expect(extended.body).toMatchObject({ duration_hours: 48 });
    expect(await charges()).toEqual(['extension', 'reservation']);
  });

  it('is refused a reservation or an extension its balance does not cover, charged nothing; one it covers is booked', async () => {
    await addReadyNode(cp, { pool: 'na', gpus: 8 });
    cp.app.services.taskDispatcher.attach(() => true);
    const org = await cp.app.services.orgs.create('small-balance-co', 2);
    const key = await cp.key({ orgId: org.id, scopes: ['compute:write', 'compute:read', 'billing:read'] });
    await cp.app.services.billing.configure(org.id, { mode: 'prepaid' });
    await cp.app.services.billing.grant(org.id, 10_000_000_000, 'top-up', null);
    clock.advance(1_000);
    // 24 h at $2.49 an hour less 30%: $41.83, against $10.00.
    const big = expectError(await cp.request('POST', '/v1/instances', { key, body: { sku: 'h100-80gb', gpus: 1, duration_hours: 24 } }), 402, 'insufficient_quota');
    expect(big.message).toBe("this costs $41.83 up front, more than your organization's prepaid balance of $10.00; add credit or book fewer hours (GET /v1/billing/balance shows it)");
    const small = await cp.request('POST', '/v1/instances', { key, body: { sku: 'h100-80gb', gpus: 1, duration_hours: 2 } });
    expect(small.status).toBe(201);
    // $4.98 booked, $5.02 left: 3 hours more ($7.47) are not covered.
    expectError(await cp.request('POST', `/v1/instances/${small.body.id}/extend`, { key, body: { hours: 3 } }), 402, 'insufficient_quota');
    const charges = (await cp.request('GET', '/v1/billing/charges?limit=100', { key })).body.data as Array<{ kind: string; amount: number }>;
    expect(charges.map((c) => [c.kind, c.amount])).toEqual([['reservation', 4.98]]);
    expect((await cp.request('GET', '/v1/billing/balance', { key })).body.balance).toBeCloseTo(5.02, 6);
  });

  it('records billing.balance_low once when the balance falls below its threshold', async () => {
    const org = await cp.app.services.orgs.create('low-balance-co', 2);
    const live = await cp.key({ orgId: org.id });
    await cp.app.services.billing.configure(org.id, { mode: 'prepaid', lowBalanceNanos: 5_000_000_000 });
    await cp.app.services.billing.grant(org.id, 10_000_000_000, 'top-up', null);
    clock.advance(1_000);
    await cp.request('POST', '/v1/chat/completions', { key: live, body: chat });

    await spend(org.id, 6_000_000_000);
    clock.advance(1_000);
    await cp.request('POST', '/v1/chat/completions', { key: live, body: chat });
    clock.advance(1_000);
    await cp.request('POST', '/v1/chat/completions', { key: live, body: chat });

    const events = (await cp.store.events.list({ type: 'billing.balance_low', limit: 100 })).filter((e) => e.orgId === org.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ balance: 4, threshold: 5, currency: 'usd', mode: 'prepaid' });
  });
});

describe('billing.balance_low webhooks', () => {
  // Standard Webhooks receivers refuse a signature timestamp more than 5 minutes from their
  // own clock, and deliveries are stamped with the control plane's: this one's clock starts
  // at wall time (and is moved by hand, a second at a time, for the balance re-reads).
  const wallClock = new ManualClock(Date.now());
  let hooked: TestControlPlane;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    // The receiver listens on loopback, which only an operator exception allows.
    hooked = await startControlPlane({ clock: wallClock, config: { webhookAllowedTargets: ['127.0.0.1'] } });
    receiver = await WebhookReceiver.start();
  });
  afterAll(async () => {
    await hooked?.close();
    await receiver?.stop();
  });

  it('delivers billing.balance_low to a real receiver, signed, once per crossing', async () => {
    const org = await hooked.app.services.orgs.create('webhook-balance-co', 2);
    const admin = await hooked.key({ orgId: org.id, admin: true });
    const live = await hooked.key({ orgId: org.id });
    const hook = await hooked.request('POST', '/v1/webhooks', { key: admin, body: { url: receiver.url, event_types: ['billing.balance_low'] } });
    expect(hook.status).toBe(201);
    receiver.secrets = [hook.body.secret];
    await hooked.app.services.billing.configure(org.id, { mode: 'prepaid', lowBalanceNanos: 5_000_000_000 });
    await hooked.app.services.billing.grant(org.id, 10_000_000_000, 'top-up', null);
    wallClock.advance(1_000);
    await hooked.request('POST', '/v1/chat/completions', { key: live, body: chat });

    await spend(org.id, 7_500_000_000, hooked);
    wallClock.advance(1_000);
    await hooked.request('POST', '/v1/chat/completions', { key: live, body: chat });
    await until('the billing.balance_low delivery', () => receiver.delivered().length >= 1);

    const [delivery] = receiver.delivered();
    expect(delivery!.verifiedWith).toEqual([hook.body.secret]);
    expect(delivery!.event).toMatchObject({
      type: 'billing.balance_low',
      data: { balance: 2.5, balance_nanos: 2_500_000_000, threshold: 5, currency: 'usd', mode: 'prepaid' },
    });
    const stored = (await hooked.store.events.list({ type: 'billing.balance_low', limit: 100 })).filter((e) => e.orgId === org.id);
    expect(stored.map((e) => e.id)).toEqual([delivery!.event.id]);
    expect(delivery!.webhookId).toBe(delivery!.event.id);

    // Still below the threshold: no new event, so nothing more is sent.
    wallClock.advance(1_000);
    await hooked.request('POST', '/v1/chat/completions', { key: live, body: chat });
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.requests).toHaveLength(1);
    expect((await hooked.store.events.list({ type: 'billing.balance_low', limit: 100 })).filter((e) => e.orgId === org.id)).toHaveLength(1);
  });
});

describe('a postpaid org with a credit limit', () => {
  it("is refused once the month's bill reaches the limit, and not by last month's", async () => {
    const org = await cp.app.services.orgs.create('postpaid-co', 2);
    const live = await cp.key({ orgId: org.id });
    await cp.app.services.billing.configure(org.id, { creditLimitNanos: 100_000_000_000 });
    await spend(org.id, 99_000_000_000);
    clock.advance(1_000);
    expectError(await cp.request('POST', '/v1/chat/completions', { key: live, body: chat }), 409, 'no_capacity');
    await spend(org.id, 1_000_000_000);
    clock.advance(1_000);
    const error = expectError(await cp.request('POST', '/v1/chat/completions', { key: live, body: chat }), 402, 'insufficient_quota');
    expect(error.message).toContain('reached its credit limit of $100.00');
    // A new month starts from zero.
    clock.set(Date.UTC(2026, 11, 1, 0, 0, 1));
    expectError(await cp.request('POST', '/v1/chat/completions', { key: live, body: chat }), 409, 'no_capacity');
  });

  it('reads amounts exactly and refuses bad ones with a clear message', async () => {
    expect(usdToNanos('0.000000001', 'usd')).toBe(1);
    expect(usdToNanos('25.5', 'usd')).toBe(25_500_000_000);
    for (const bad of ['-5', '1e9', '0.1234567891', '', '12,50']) expect(() => usdToNanos(bad, 'usd')).toThrow(/USD such as 25 or 0.50/);
    await expect(run('billing', 'grant', cp.org.id, '1e9')).rejects.toThrow(/USD such as 25 or 0.50/);
  }, 60_000);
});
