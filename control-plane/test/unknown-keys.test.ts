// A stranger spraying well-formed random API keys, over real HTTP: each unknown key costs
// a store lookup (on PostgreSQL, the database every replica shares), so an address gets a
// burst of them and then one a second; past that it is answered 429 without a lookup,
// while keys that verified before keep working from the same address. The operator API
// (/ops/v1) shares the cap.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generateKeyValue } from '../src/keys/api-key.js';
import { generateOperatorKeyValue } from '../src/operators/operator-key.js';
import { OperatorKeyService } from '../src/operators/operator-key-service.js';
import { UNKNOWN_KEYS_PER_MINUTE } from '../src/pipeline/unknown-key-guard.js';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';
import { SITE_SHARE, type ManualClock } from '@svc/shared';

let cp: TestControlPlane;
let lookups = 0;

beforeEach(async () => {
  cp = await startControlPlane();
  const find = cp.store.keys.findBySecretHash.bind(cp.store.keys);
  lookups = 0;
  cp.store.keys.findBySecretHash = (hash) => {
    lookups++;
    return find(hash);
  };
});
afterEach(() => cp.close());

describe('unknown API keys from one address', () => {
  it('cost a lookup each up to the burst, then 429 with retry-after and no lookup; cached keys keep working', async () => {
    const working = await cp.key();
    expect((await cp.request('GET', '/v1/models', { key: working })).status).toBe(200);
    const notYetUsed = await cp.key();

    for (let i = 0; i < UNKNOWN_KEYS_PER_MINUTE; i++) {
      const res = await cp.request('GET', '/v1/models', { key: generateKeyValue('live') });
      expect(expectError(res, 401, 'unauthorized').message).toBe('invalid API key');
    }
    const before = lookups;
    for (let i = 0; i < 20; i++) {
      const res = await cp.request('GET', '/v1/models', { key: generateKeyValue('live') });
      expect(expectError(res, 429, 'rate_limited').message).toContain('unknown API keys from 127.0.0.1');
      expect(res.headers.get('retry-after')).toBe('1');
    }
    expect(lookups).toBe(before);

    // The key this address already used is answered as before, also once its cache entry
    // has aged out (2 s; the bucket refills 2 lookups meanwhile, spent again here).
    expect((await cp.request('GET', '/v1/models', { key: working })).status).toBe(200);
    (cp.clock as ManualClock).advance(2_000);
    for (let i = 0; i < 2; i++) expectError(await cp.request('GET', '/v1/models', { key: generateKeyValue('live') }), 401, 'unauthorized');
    expectError(await cp.request('GET', '/v1/models', { key: generateKeyValue('live') }), 429, 'rate_limited');
    expect((await cp.request('GET', '/v1/models', { key: working })).status).toBe(200);
    // A key not seen yet needs a lookup, which waits for the bucket like any other.
    expectError(await cp.request('GET', '/v1/models', { key: notYetUsed }), 429, 'rate_limited');
    (cp.clock as ManualClock).advance(1_000);
    expect((await cp.request('GET', '/v1/models', { key: notYetUsed })).status).toBe(200);
  });

  it('from IPv6: every address of a /64 draws on one bucket, so a fresh address per key gains nothing', async () => {
    // A load balancer on loopback reports each client's address (X-Forwarded-For).
    const proxied = await startControlPlane({ config: { trustProxy: ['127.0.0.1/32'] } });
    try {
      const from = (address: string) => ({ key: generateKeyValue('live'), headers: { 'x-forwarded-for': address } });
      let proxiedLookups = 0;
      const find = proxied.store.keys.findBySecretHash.bind(proxied.store.keys);
      proxied.store.keys.findBySecretHash = (hash) => {
        proxiedLookups++;
        return find(hash);
      };
      for (let i = 1; i <= UNKNOWN_KEYS_PER_MINUTE; i++) {
        expectError(await proxied.request('GET', '/v1/models', from(`2001:db8:5:9::${i.toString(16)}`)), 401, 'unauthorized');
      }
      expect(proxiedLookups).toBe(UNKNOWN_KEYS_PER_MINUTE);
      const held = await proxied.request('GET', '/v1/models', from('2001:db8:5:9:1234:5678:9abc:def0'));
      expect(expectError(held, 429, 'rate_limited').message).toContain('unknown API keys from 2001:db8:5:9::/64 ');
      expect(proxiedLookups).toBe(UNKNOWN_KEYS_PER_MINUTE);
      // Another /64 is another client, and an IPv4 client is still counted by its address.
      expectError(await proxied.request('GET', '/v1/models', from('2001:db8:5:a::1')), 401, 'unauthorized');
      expectError(await proxied.request('GET', '/v1/models', from('198.51.100.7')), 401, 'unauthorized');
      expect(proxiedLookups).toBe(UNKNOWN_KEYS_PER_MINUTE + 2);
    } finally {
      await proxied.close();
    }
  });

  it('from IPv6: a fresh /64 per key is counted against its /48 site, which gets four clients\' allowance', async () => {
    const proxied = await startControlPlane({ config: { trustProxy: ['127.0.0.1/32'] } });
    try {
      const from = (address: string) => ({ key: generateKeyValue('live'), headers: { 'x-forwarded-for': address } });
      const siteAllowance = UNKNOWN_KEYS_PER_MINUTE * SITE_SHARE;
      // Each key from another /64 of 2001:db8:77::/48: no /64 ever meets its own cap.
      for (let i = 1; i <= siteAllowance; i++) {
        expectError(await proxied.request('GET', '/v1/models', from(`2001:db8:77:${i.toString(16)}::1`)), 401, 'unauthorized');
      }
      const held = await proxied.request('GET', '/v1/models', from('2001:db8:77:ffff::1'));
      expect(expectError(held, 429, 'rate_limited').message).toContain(`unknown API keys from 2001:db8:77::/48 (${siteAllowance} per minute)`);
      expect(held.headers.get('retry-after')).toBe('1');
      // Another site is not held back by this one.
      expectError(await proxied.request('GET', '/v1/models', from('2001:db8:78:1::1')), 401, 'unauthorized');
    } finally {
      await proxied.close();
    }
  });

  it('on the operator API too: unknown operator keys are capped, a working operator key is not', async () => {
    const operator = (await new OperatorKeyService(cp.store.operators, cp.clock).create({ scopes: ['operator:read'], name: 'ops', createdBy: 'local' })).value;
    expect((await cp.request('GET', '/ops/v1/nodes', { key: operator })).status).toBe(200);
    for (let i = 0; i < UNKNOWN_KEYS_PER_MINUTE; i++) {
      expectError(await cp.request('GET', '/ops/v1/nodes', { key: generateOperatorKeyValue() }), 401, 'unauthorized');
    }
    const res = await cp.request('GET', '/ops/v1/nodes', { key: generateOperatorKeyValue() });
    expectError(res, 429, 'rate_limited');
    expect(res.headers.get('retry-after')).toBe('1');
    expect((await cp.request('GET', '/ops/v1/nodes', { key: operator })).status).toBe(200);
    // One cap per address across both APIs: customer keys not seen yet wait too.
    expectError(await cp.request('GET', '/v1/models', { key: generateKeyValue('live') }), 429, 'rate_limited');
  });
});
