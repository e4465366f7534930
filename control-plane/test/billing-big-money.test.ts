// Amounts past what an account can hold exactly (docs/billing.md, "Units"), on both
// engines: money is kept in nano-dollars as JS numbers, exact up to 2^53 (about $9.0M).
// A grant or a setting that would take an org past it is refused with 400 and nothing is
// written; an account whose totals got there anyway (spending) is still read, never 500.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import type { Store } from '../src/store/store.js';
import { OperatorKeyService } from '../src/operators/operator-key-service.js';
import { STORE_ENGINES } from '../../test/support/postgres-stores.js';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

describe.each(STORE_ENGINES)('%s', (engine) => {
  let cp: TestControlPlane<Store>;
  let ops: string;

  beforeAll(async () => {
    cp = await startControlPlane({ engine, clock: new ManualClock(Date.UTC(2026, 10, 3, 12)) });
    ops = (await new OperatorKeyService(cp.store.operators, cp.clock).create({ scopes: ['operator:read', 'operator:write'], name: 'w', createdBy: 'local' })).value;
  });
  afterAll(() => cp?.close());

  it('refuses a grant that would take an org past $9,007,199.25 of credits, writing nothing', async () => {
    const org = await cp.app.services.orgs.create('big-grants');
    const granted = await cp.request('POST', `/ops/v1/orgs/${org.id}/billing/credits`, { key: ops, body: { usd: '5000000' } });
    expect(granted.status).toBe(201);
    const refused = expectError(await cp.request('POST', `/ops/v1/orgs/${org.id}/billing/credits`, { key: ops, body: { usd: '5000000.000000001' } }), 400, 'invalid_request');
    expect(refused.message).toMatch(/past the most an account can hold \(\$9,007,199\.25\)/);
    // One more grant on its own past the range is refused the same way, whatever the org holds.
    expectError(await cp.request('POST', `/ops/v1/orgs/${org.id}/billing/credits`, { key: ops, body: { usd: '10000000' } }), 400, 'invalid_request');
    expect((await cp.app.services.billing.account(org.id)).creditedNanos).toBe(5_000_000_000_000_000);
    const customer = await cp.key({ orgId: org.id, scopes: ['billing:read'] });
    expect((await cp.request('GET', '/v1/billing/balance', { key: customer })).body).toMatchObject({ credited: 5_000_000 });
  });

  it('refuses a credit limit or low-balance threshold past the range', async () => {
    const org = await cp.app.services.orgs.create('big-limit');
    for (const body of [{ credit_limit: '10000000.000000001' }, { low_balance: '9007199.254740992' }]) {
      expect(expectError(await cp.request('PATCH', `/ops/v1/orgs/${org.id}/billing`, { key: ops, body }), 400, 'invalid_request').param).toBe(Object.keys(body)[0]);
    }
    expect((await cp.request('PATCH', `/ops/v1/orgs/${org.id}/billing`, { key: ops, body: { credit_limit: '9007199.254740991' } })).status).toBe(200);
    expect(await cp.app.services.billing.account(org.id)).toMatchObject({ creditLimitNanos: 9_007_199_254_740_991, lowBalanceNanos: null });
  });

  it('reads an account whose spending passed the range (rounded), never failing the balance or a chat', async () => {
    const org = await cp.app.services.orgs.create('big-spender');
    const { record: apiKey, value: key } = await cp.app.services.keys.create({ orgId: org.id, scopes: ['billing:read', 'inference:write'] });
    const record = (i: number) => ({
      id: `usage_big_${engine}_${i}`, orgId: org.id, keyId: apiKey.id, requestId: `req_big_${i}`, kind: 'chat' as const, model: 'm', quantization: 'int4', pool: 'na',
      promptTokens: 1, completionTokens: 1, costNanos: 5_000_000_000_000_000 + i, user: null, sandbox: false, createdAt: cp.clock.now(), durationMs: null,
    });
    await cp.store.usage.append([record(0), record(1)]);
    expect((await cp.app.services.billing.account(org.id)).spentNanos).toBe(Number('10000000000000001'));
    const balance = await cp.request('GET', '/v1/billing/balance', { key });
    expect(balance.status).toBe(200);
    expect(balance.body.spent).toBeCloseTo(10_000_000, 2);
    const chat = await cp.request('POST', '/v1/chat/completions', { key, body: { model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 } });
    expect(chat.status).toBeLessThan(500);
  });
});
