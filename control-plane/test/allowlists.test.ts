// The org's IP allowlist (IPv4, IPv6) and the referrer allowlist for public keys.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

let cp: TestControlPlane;
let admin: string;
let live: string;

beforeAll(async () => {
  cp = await startControlPlane();
  admin = await cp.key({ admin: true });
  live = await cp.key();
});
afterAll(() => cp.close());

const setOrg = (body: unknown) => cp.request('PATCH', '/v1/admin/org', { key: admin, body });
/** As the operator does with svcctl, so an allowlist that excludes the test client cannot lock the test out. */
const setIpAllowlist = (ipAllowlist: string[]) => cp.app.services.orgs.update(cp.org.id, { ipAllowlist });

describe('IP allowlist', () => {
  it('refuses a source outside the ranges with 403 naming the address, and accepts one inside', async () => {
    await setIpAllowlist(['10.0.0.0/8', '2001:db8::/32']);
    const error = expectError(await cp.request('GET', '/v1/models', { key: live }), 403, 'ip_not_allowed');
    expect(error.message).toContain('127.0.0.1');

    await setIpAllowlist(['10.0.0.0/8', '127.0.0.0/8']);
    expect((await cp.request('GET', '/v1/models', { key: live })).status).toBe(200);
    // The admin endpoint sets it too, from an address inside the new list.
    const set = await setOrg({ ip_allowlist: ['127.0.0.1', '::1/128'] });
    expect(set.body.ip_allowlist).toEqual(['127.0.0.1/32', '::1/128']);
    expect((await cp.request('GET', '/v1/models', { key: live })).status).toBe(200);
  });

  it('matches IPv6 sources against IPv6 ranges', async () => {
    await setIpAllowlist(['2001:db8::/32']);
    const inject = (remoteAddress: string) =>
      cp.app.inject({ method: 'GET', url: '/v1/models', remoteAddress, headers: { authorization: `Bearer ${live}` } });
    expect((await inject('2001:db8::5')).statusCode).toBe(200);
    const refused = await inject('2001:db9::1');
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatchObject({ type: 'ip_not_allowed' });
    expect(refused.json().error.message).toContain('2001:db9::1');
  });

  it('rejects an invalid CIDR with 400 and param, and an empty list allows every address', async () => {
    await setIpAllowlist([]);
    const bad = await setOrg({ ip_allowlist: ['10.0.0.0/8', '300.1.1.1/8'] });
    expect(expectError(bad, 400, 'invalid_request').param).toBe('ip_allowlist[1]');
    await setOrg({ ip_allowlist: [] });
    expect((await cp.request('GET', '/v1/models', { key: live })).status).toBe(200);
  });

  it('also binds admin keys, so an operator can lock themselves out only from outside', async () => {
    await setIpAllowlist(['192.0.2.0/24']);
    expectError(await cp.request('GET', '/v1/admin/org', { key: admin }), 403, 'ip_not_allowed');
    await setIpAllowlist([]);
  });
});

describe('referrer allowlist for public keys', () => {
  let pub: string;
  beforeAll(async () => {
    pub = await cp.key({ kind: 'public' });
  });

  it('refuses public keys while the org has no referrer allowlist', async () => {
    const res = await cp.request('GET', '/v1/models', { key: pub, headers: { origin: 'https://app.example.com' } });
    expectError(res, 403, 'referrer_not_allowed');
  });

  it('accepts a matching Origin or Referer and refuses others', async () => {
    await setOrg({ referrer_allowlist: ['https://*.example.com', 'http://localhost:3000'] });
    const call = (headers: Record<string, string>) => cp.request('GET', '/v1/models', { key: pub, headers });
    expect((await call({ origin: 'https://app.example.com' })).status).toBe(200);
    expect((await call({ referer: 'https://docs.example.com/page?q=1' })).status).toBe(200);
    expect((await call({ origin: 'http://localhost:3000' })).status).toBe(200);
    expect(expectError(await call({ origin: 'https://evil.com' }), 403, 'referrer_not_allowed').message).toContain('https://evil.com');
    expectError(await call({ origin: 'http://app.example.com' }), 403, 'referrer_not_allowed');
    expectError(await call({ origin: 'https://example.com.evil.com' }), 403, 'referrer_not_allowed');
    expectError(await call({ origin: 'http://localhost:4000' }), 403, 'referrer_not_allowed');
    expectError(await call({}), 403, 'referrer_not_allowed');
  });

  it('keeps public keys off routes other than embeddings and models', async () => {
    const res = await cp.request('GET', '/v1/admin/keys', { key: pub, headers: { origin: 'https://app.example.com' } });
    expectError(res, 403, 'forbidden_scope');
  });

  it('rejects a malformed origin pattern with 400', async () => {
    expectError(await setOrg({ referrer_allowlist: ['https://exa mple.com'] }), 400, 'invalid_request');
  });
});
