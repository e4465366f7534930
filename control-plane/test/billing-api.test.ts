// The billing API over the ledger: usage rollups (JSON pages and CSV), the credit
// balance, validation of every parameter, the billing:read scope, and that an org never
// sees another's money. Ledger lines are written through the store the way the services
// write them (usage records, charges with their instance, credits).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

const clock = new ManualClock(Date.UTC(2026, 10, 24, 12));
let cp: TestControlPlane;
let key: string;
let otherOrgKey: string;

const HOUR = 3_600_000;
const NOV_20 = Date.UTC(2026, 10, 20);

async function usage(orgId: string, at: number, model: string, keyId: string, prompt: number, completion: number, costNanos: number, sandbox = false) {
  await cp.store.usage.append([
    { id: `usage_${at}_${model}_${Math.random()}`, orgId, keyId, requestId: `req_${at}_${Math.random()}`, kind: 'chat', model, quantization: 'fp16', pool: 'na', promptTokens: prompt, completionTokens: completion, costNanos, user: null, sandbox, createdAt: at },
  ]);
}

function instanceWithCharge(orgId: string, id: string, at: number, labels: Record<string, string>, amountMicros: number) {
  cp.store.db
    .prepare(
      `INSERT INTO instances (id, org_id, key_id, status, sku, gpus, pool, mode, duration_hours, image, ssh_keys, labels, gpu_uuids, rate_micros, created_at, updated_at)
       VALUES (?, ?, NULL, 'terminated', 'h100-80gb', 1, 'na', 'on_demand', NULL, 'img', '[]', ?, '[]', 3600000, ?, ?)`,
    )
    .run(id, orgId, JSON.stringify(labels), at, at);
  cp.store.db.prepare("INSERT INTO charges (id, org_id, instance_id, kind, amount_micros, description, created_at) VALUES (?, ?, ?, 'on_demand', ?, 'on-demand run', ?)").run(`charge_${id}`, orgId, id, amountMicros, at);
}

beforeAll(async () => {
  cp = await startControlPlane({ clock });
  key = await cp.key({ scopes: ['billing:read'] });
  const other = await cp.app.services.orgs.create('billing-other-org', 2);
  otherOrgKey = await cp.key({ orgId: other.id, scopes: ['billing:read'] });

  const orgId = cp.org.id;
  await usage(orgId, NOV_20 + 1 * HOUR, 'llama-3.1-8b-instruct', 'key_a', 1_000, 200, 1_234_567);
  await usage(orgId, NOV_20 + 1 * HOUR + 60_000, 'llama-3.1-8b-instruct', 'key_b', 500, 100, 765_433);
  await usage(orgId, NOV_20 + 26 * HOUR, 'qwen2.5-7b-instruct', 'key_a', 10, 10, 1);
  await usage(orgId, NOV_20 + 26 * HOUR, 'qwen2.5-7b-instruct', 'key_a', 10, 10, 0, true); // sandbox: not billed
  instanceWithCharge(orgId, 'inst_team_ml', NOV_20 + 2 * HOUR, { team: 'ml' }, 2_000_000); // 2,000 s at $3.60/h
  instanceWithCharge(orgId, 'inst_no_team', NOV_20 + 50 * HOUR, {}, 1_000_000);
  await cp.store.ledger.addCredit({ id: 'credit_1', orgId, kind: 'grant', amountNanos: 10_000_000_000, instanceId: null, period: null, description: 'welcome credit', createdBy: 'operator', createdAt: NOV_20 });
  // Another org's money, which must never show.
  await usage(other.id, NOV_20 + HOUR, 'llama-3.1-8b-instruct', 'key_x', 9_999, 9_999, 999_999_999);
});
afterAll(() => cp.close());

const get = (path: string, k = key, headers: Record<string, string> = {}) => cp.request('GET', path, { key: k, headers });

describe('GET /v1/billing/usage', () => {
  it('sums the ledger by day and model, to the nano-dollar, with totals over the range', async () => {
    const res = await get('/v1/billing/usage?from=2026-11-20&to=2026-11-23&bucket=day&group_by=model');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ object: 'list', bucket: 'day', group_by: ['model'], from: '2026-11-20T00:00:00.000Z', to: '2026-11-23T00:00:00.000Z', has_more: false });
    const rows = res.body.data.map((r: any) => [r.start.slice(0, 10), r.group.model, r.amount_nanos, r.input_tokens, r.output_tokens, r.requests, r.gpu_seconds]);
    expect(rows).toEqual([
      ['2026-11-20', null, -10_000_000_000 + 2_000_000_000, 0, 0, 0, 2_000],
      ['2026-11-20', 'llama-3.1-8b-instruct', 2_000_000, 1_500, 300, 2, 0],
      ['2026-11-21', 'qwen2.5-7b-instruct', 1, 10, 10, 1, 0],
      ['2026-11-22', null, 1_000_000_000, 0, 0, 0, 1_000],
    ]);
    expect(res.body.totals.amount_nanos).toBe(-10_000_000_000 + 2_000_000_000 + 2_000_000 + 1 + 1_000_000_000);
    expect(res.body.data[1]).toMatchObject({ object: 'billing.usage_bucket', start: '2026-11-20T00:00:00.000Z', end: '2026-11-21T00:00:00.000Z', amount: 0.002 });
  });

  it('groups by kind, key and instance labels, and pages with a cursor', async () => {
    const byLabel = await get('/v1/billing/usage?from=2026-11-01&to=2026-12-01&bucket=month&group_by=kind,label:team');
    expect(byLabel.body.data.map((r: any) => [r.group.kind, r.group['label:team'], r.amount_nanos])).toEqual([
      ['grant', null, -10_000_000_000],
      ['inference', null, 2_000_001],
      ['on_demand', null, 1_000_000_000],
      ['on_demand', 'ml', 2_000_000_000],
    ]);
    const first = await get('/v1/billing/usage?from=2026-11-01&to=2026-12-01&bucket=hour&group_by=key_id&limit=2');
    expect(first.body).toMatchObject({ has_more: true, next_cursor: expect.stringMatching(/^[A-Za-z0-9_-]+$/) });
    const second = await get(`/v1/billing/usage?from=2026-11-01&to=2026-12-01&bucket=hour&group_by=key_id&limit=2&after=${first.body.next_cursor}`);
    const all = await get('/v1/billing/usage?from=2026-11-01&to=2026-12-01&bucket=hour&group_by=key_id');
    expect([...first.body.data, ...second.body.data]).toEqual(all.body.data.slice(0, 4));
    expect(first.body.totals).toEqual(all.body.totals);
  });

  it("pages a range that keeps growing without a row twice or missed: a cursor keeps the first page's end and goes on after its last row", async () => {
    // An org of its own, one group per key; a new key's usage lands in the current bucket between pages.
    const org = await cp.app.services.orgs.create('billing-pages-org', 2);
    const orgKey = await cp.key({ orgId: org.id, scopes: ['billing:read'] });
    const began = clock.now();
    for (const k of ['key_b', 'key_c', 'key_d']) await usage(org.id, began - HOUR, 'llama-3.1-8b-instruct', k, 1, 1, 1);
    const page = (after?: string) => get(`/v1/billing/usage?bucket=month&group_by=key_id&limit=1${after ? `&after=${after}` : ''}`, orgKey);
    const first = await page();
    expect(first.body.has_more).toBe(true);
    clock.advance(60_000);
    try {
      await usage(org.id, clock.now() - 1, 'llama-3.1-8b-instruct', 'key_a', 5, 5, 5);
      const seen = [...first.body.data];
      let cursor = first.body.next_cursor as string | null;
      while (cursor) {
        const next = await page(cursor);
        expect(next.status).toBe(200);
        expect({ to: next.body.to, totals: next.body.totals }).toEqual({ to: first.body.to, totals: first.body.totals });
        seen.push(...next.body.data);
        cursor = next.body.next_cursor;
      }
      expect(seen.map((r: { group: { key_id: string | null } }) => r.group.key_id)).toEqual(['key_b', 'key_c', 'key_d']);
    } finally {
      clock.set(began);
    }
  });

  it("refuses a cursor that is not one, or another query's", async () => {
    expect(expectError(await get('/v1/billing/usage?after=bm90LWEtY3Vyc29y'), 400, 'invalid_request')).toMatchObject({ param: 'after', message: 'after must be the next_cursor of a previous page' });
    const first = await get('/v1/billing/usage?from=2026-11-01&to=2026-12-01&bucket=hour&group_by=key_id&limit=1');
    const other = await get(`/v1/billing/usage?from=2026-11-01&to=2026-12-01&bucket=day&group_by=key_id&limit=1&after=${first.body.next_cursor}`);
    expect(expectError(other, 400, 'invalid_request').param).toBe('after');
  });

  it('defaults to the current UTC month up to now', async () => {
    const res = await get('/v1/billing/usage');
    expect(res.body).toMatchObject({ from: '2026-11-01T00:00:00.000Z', to: '2026-11-24T12:00:00.000Z', bucket: 'day' });
  });

  it('exports the same rollup as CSV, exact amounts, for a spreadsheet', async () => {
    const res = await get('/v1/billing/usage?from=2026-11-20&to=2026-11-23&bucket=day&group_by=model', key, { accept: 'text/csv' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(res.headers.get('content-disposition')).toMatch(/attachment; filename="usage-2026-11-20-day.csv"/);
    const lines = res.text.split('\r\n');
    expect(lines[0]).toBe('start,end,model,amount_usd,input_tokens,output_tokens,gpu_seconds,requests');
    expect(lines[2]).toBe('2026-11-20T00:00:00.000Z,2026-11-21T00:00:00.000Z,llama-3.1-8b-instruct,0.002000000,1500,300,0,2');
    expect(lines).toHaveLength(6);
  });

  it.each([
    ['from=yesterday', 'from'],
    ['from=2026-11-20T10:00:00', 'from'],
    ['from=2026-11-20&to=2026-11-19', 'to'],
    ['bucket=week', 'bucket'],
    ['group_by=region', 'group_by'],
    ['group_by=label:a%20b', 'group_by'],
    ['group_by=model,sku,pool,kind,key_id', 'group_by'],
    ['from=2026-01-01&to=2026-11-01&bucket=hour', 'to'],
    ['after=-1', 'after'],
    ['limit=5000', 'limit'],
  ])('refuses %s with a 400 naming %s', async (query, param) => {
    const res = await get(`/v1/billing/usage?${query}`);
    const error = expectError(res, 400, 'invalid_request');
    expect(error.param ?? error.message).toContain(param);
  });

  it("never shows another organization's lines", async () => {
    const res = await get('/v1/billing/usage?from=2026-11-01&to=2026-12-01&bucket=month', otherOrgKey);
    expect(res.body.totals).toMatchObject({ amount_nanos: 999_999_999, input_tokens: 9_999 });
  });

  it('needs billing:read', async () => {
    const inferenceOnly = await cp.key({ scopes: ['inference:read'] });
    expectError(await get('/v1/billing/usage', inferenceOnly), 403, 'forbidden_scope');
    expectError(await get('/v1/billing/balance', inferenceOnly), 403, 'forbidden_scope');
  });
});

describe('GET /v1/billing/balance', () => {
  it('reports credits minus spending, the month to date and the limits', async () => {
    const res = await get('/v1/billing/balance');
    expect(res.status).toBe(200);
    const spent = 2_000_001 + 3_000_000_000;
    expect(res.body).toEqual({
      object: 'billing.balance',
      currency: 'usd',
      mode: 'postpaid',
      balance: Math.round((10_000_000_000 - spent) / 10) / 1e8,
      balance_nanos: 10_000_000_000 - spent,
      credited: 10,
      spent: Math.round(spent / 10) / 1e8,
      month_to_date: Math.round((spent - 10_000_000_000) / 10) / 1e8,
      credit_limit: null,
      low_balance_threshold: null,
    });
  });
});
