// Per-key requests per minute by tier: headers on every keyed response, 429 with
// retry-after, refill over time (injectable clock).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

const clock = new ManualClock(Date.UTC(2026, 10, 21));
let cp: TestControlPlane;

beforeAll(async () => {
  cp = await startControlPlane({ clock, config: { rateLimitTier2: 5, rateLimitTier3: 50 } });
});
afterAll(() => cp.close());

describe('rate limits', () => {
  it('counts down, answers 429 with retry-after when spent, and refills', async () => {
    const key = await cp.key();
    const remaining: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await cp.request('GET', '/v1/models', { key });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-limit-requests')).toBe('5');
      expect(res.headers.get('x-ratelimit-reset-requests')).toMatch(/^\d+(\.\d+)?(ms|s)$|^\d+m\d+s$/);
      remaining.push(res.headers.get('x-ratelimit-remaining-requests')!);
    }
    expect(remaining).toEqual(['4', '3', '2', '1', '0']);

    const limited = await cp.request('GET', '/v1/models', { key });
    expectError(limited, 429, 'rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers.get('retry-after'))).toBeLessThanOrEqual(12);
    expect(limited.headers.get('x-ratelimit-remaining-requests')).toBe('0');

    // 5 per minute refills one request every 12 s.
    clock.advance(12_000);
    expect((await cp.request('GET', '/v1/models', { key })).status).toBe(200);
    expect((await cp.request('GET', '/v1/models', { key })).status).toBe(429);
  });

  it('limits each key separately', async () => {
    const a = await cp.key();
    const b = await cp.key();
    for (let i = 0; i < 5; i++) await cp.request('GET', '/v1/models', { key: a });
    expect((await cp.request('GET', '/v1/models', { key: a })).status).toBe(429);
    expect((await cp.request('GET', '/v1/models', { key: b })).status).toBe(200);
  });

  it('uses the tier 3 limit for tier 3 orgs', async () => {
    const org = await cp.app.services.orgs.create('tier-three', 3);
    const key = await cp.key({ orgId: org.id });
    const res = await cp.request('GET', '/v1/models', { key });
    expect(res.headers.get('x-ratelimit-limit-requests')).toBe('50');
  });

  it('puts the headers on error responses of a keyed request too', async () => {
    const key = await cp.key();
    const res = await cp.request('GET', '/v1/models/no-such-model', { key });
    expectError(res, 404, 'model_not_found');
    expect(res.headers.get('x-ratelimit-limit-requests')).toBe('5');
  });

  it('counts a token-limited request once, body valid or not, and refuses past the limit before validating the body', async () => {
    const key = await cp.key({ kind: 'test' });
    const post = (options: { body?: unknown; rawBody?: string; headers?: Record<string, string> }) => cp.request('POST', '/v1/embeddings', { key, ...options });
    const remaining = (res: { headers: Headers }) => res.headers.get('x-ratelimit-remaining-requests');

    // A body that fails validation spends its slot (no free 400s); it holds no tokens, so it shows no token headers.
    const invalid = await post({ body: { input: 'x' } });
    expectError(invalid, 400, 'invalid_request');
    expect(remaining(invalid)).toBe('4');
    expect(invalid.headers.get('x-ratelimit-limit-tokens')).toBeNull();
    // A body that is not JSON fails before the limits' step; it spends its slot all the same.
    const notJson = await post({ rawBody: '{"model": ', headers: { 'content-type': 'application/json' } });
    expect(notJson.status).toBe(400);
    expect(remaining(notJson)).toBe('3');
    // A served request takes one slot, not two, and reports both limits.
    const served = await post({ body: { model: 'bge-m3', input: 'x' } });
    expect(served.status).toBe(200);
    expect(remaining(served)).toBe('2');
    expect(served.headers.get('x-ratelimit-limit-tokens')).not.toBeNull();
    expect(remaining(await post({ body: { input: 'x' } }))).toBe('1');
    expect(remaining(await post({ body: { model: 'bge-m3', input: 'x' } }))).toBe('0');

    // Spent: the request limit answers first, whatever the body.
    const limited = await post({ body: { input: 'x' } });
    expect(expectError(limited, 429, 'rate_limited').message).toContain('requests per minute');
    expect(limited.headers.get('x-ratelimit-limit-tokens')).toBeNull();
    expectError(await post({ body: { model: 'bge-m3', input: 'x' } }), 429, 'rate_limited');
  });

  it('defaults to the spec limits: 1,200 (tier 2) and 12,000 (tier 3)', async () => {
    const defaults = await startControlPlane();
    try {
      const res = await defaults.request('GET', '/v1/models', { key: await defaults.key() });
      expect(res.headers.get('x-ratelimit-limit-requests')).toBe('1200');
      await defaults.app.services.orgs.update(defaults.org.id, { tier: 3 });
      const t3 = await defaults.request('GET', '/v1/models', { key: await defaults.key() });
      expect(t3.headers.get('x-ratelimit-limit-requests')).toBe('12000');
    } finally {
      await defaults.close();
    }
  });
});
