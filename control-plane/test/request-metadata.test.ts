// Request metadata for inference:read: GET /v1/requests/{id} by the x-request-id of an
// answer (what was served, tokens, cost, duration; no replica), another org's id is a
// 404, and GET /v1/usage filtered by date.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

const clock = new ManualClock(Date.UTC(2026, 10, 24, 12));
let cp: TestControlPlane;
let sandbox: string;
let reader: string;

beforeAll(async () => {
  cp = await startControlPlane({ clock });
  sandbox = await cp.key({ kind: 'test' });
  reader = await cp.key({ scopes: ['inference:read'] });
});
afterAll(() => cp.close());

const chat = { model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 8, user: 'end-user-7' };

describe('GET /v1/requests/{request_id}', () => {
  it('describes a served request by the id its answer carried', async () => {
    const answer = await cp.request('POST', '/v1/chat/completions', { key: sandbox, body: chat, headers: { 'x-service-pool': 'eu' } });
    const id = answer.headers.get('x-request-id')!;
    const res = await cp.request('GET', `/v1/requests/${id}`, { key: reader });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id,
      object: 'inference.request',
      status: 'completed',
      kind: 'chat',
      model: 'llama-3.1-8b-instruct',
      pool: 'eu',
      usage: answer.body.usage,
      cost_usd: 0,
      cost_nanos: 0,
      user: 'end-user-7',
      sandbox: true,
      created: Math.floor(clock.now() / 1000),
    });
    expect(res.body.duration_ms).toBeGreaterThanOrEqual(0);
    expect(JSON.stringify(res.body)).not.toMatch(/replica|node|127\.0\.0\.1/);
  });

  it("is a 404 for an unknown id and for another organization's request", async () => {
    expectError(await cp.request('GET', '/v1/requests/req_nope', { key: reader }), 404, 'not_found');
    const answer = await cp.request('POST', '/v1/chat/completions', { key: sandbox, body: chat });
    const other = await cp.app.services.orgs.create('metadata-other', 2);
    const outsider = await cp.key({ orgId: other.id, scopes: ['inference:read'] });
    expectError(await cp.request('GET', `/v1/requests/${answer.headers.get('x-request-id')}`, { key: outsider }), 404, 'not_found');
  });

  it('needs inference:read', async () => {
    const billingOnly = await cp.key({ scopes: ['billing:read'] });
    expectError(await cp.request('GET', '/v1/requests/req_x', { key: billingOnly }), 403, 'forbidden_scope');
  });
});

describe('GET /v1/usage with a date range', () => {
  it('keeps records from `from` (inclusive) to `to` (exclusive)', async () => {
    clock.set(Date.UTC(2026, 10, 25, 10));
    await cp.request('POST', '/v1/chat/completions', { key: sandbox, body: chat });
    clock.set(Date.UTC(2026, 10, 26, 10));
    await cp.request('POST', '/v1/chat/completions', { key: sandbox, body: chat });
    const day = (await cp.request('GET', '/v1/usage?from=2026-11-25&to=2026-11-26&limit=100', { key: reader })).body.data;
    expect(day.map((r: any) => new Date(r.created * 1000).toISOString())).toEqual(['2026-11-25T10:00:00.000Z']);
    const since = (await cp.request('GET', '/v1/usage?from=2026-11-25T10:00:00Z&limit=100', { key: reader })).body.data;
    expect(since).toHaveLength(2);
    expectError(await cp.request('GET', '/v1/usage?from=2026-11-26&to=2026-11-25', { key: reader }), 400, 'invalid_request');
    expect(expectError(await cp.request('GET', '/v1/usage?from=tuesday', { key: reader }), 400, 'invalid_request').param).toBe('from');
  });
});
