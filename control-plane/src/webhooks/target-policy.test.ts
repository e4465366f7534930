import type { LookupAddress } from 'node:dns';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '@svc/shared';
import { classifyAddress } from '@svc/shared/address-class';
import { buildTargetPolicy, refusedUrl, type Resolver } from './target-policy.js';

const resolver =
  (table: Record<string, string[]>): Resolver =>
  async (host) => {
    const addresses = table[host];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return addresses.map((address): LookupAddress => ({ address, family: address.includes(':') ? 6 : 4 }));
  };

const dns = resolver({
  'hooks.example.com': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
  'internal.example.com': ['10.1.2.3'],
  'mixed.example.com': ['93.184.216.34', '192.168.1.20'],
  'v6-ula.example.com': ['fd12:3456:789a::1'],
  localhost: ['127.0.0.1', '::1'],
  'metadata.example.com': ['169.254.169.254'],
});

const production = buildTargetPolicy('production', []);
const development = buildTargetPolicy('development', []);

describe('classifyAddress', () => {
  it.each([
    ['93.184.216.34', 'public'],
    ['2606:2800:220:1:248:1893:25c8:1946', 'public'],
    ['10.0.0.1', 'private'],
    ['172.16.5.4', 'private'],
    ['192.168.0.1', 'private'],
    ['127.0.0.1', 'loopback'],
    ['::1', 'loopback'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['fd00::1', 'unique local'],
    ['fc00::1', 'unique local'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
    ['2002:c0a8:0101::1', 'private'],
    // IPv4-compatible (deprecated) and SIIT forms carry an IPv4 address too.
    ['::127.0.0.1', 'loopback'],
    ['::a9fe:a9fe', 'link-local'],
    ['::ffff:0:127.0.0.1', 'loopback'],
    ['::ffff:0:93.184.216.34', 'public'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'reserved'], // Teredo: its IPv4 ends are obfuscated
    ['3fff::1', 'reserved'],
    ['2001:2::1', 'reserved'],
    ['2001:10::1', 'reserved'],
    ['192.88.99.1', 'reserved'],
  ])('%s is %s', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });
});

describe('webhook URLs in production', () => {
  it('accepts https to a host that resolves to public addresses only', async () => {
    expect(await refusedUrl('https://hooks.example.com/in', production, dns)).toBeNull();
  });

  it('refuses plain http, even to a public host', async () => {
    expect(await refusedUrl('http://hooks.example.com/in', production, dns)).toMatch(/must use https/);
  });

  it.each([
    ['https://internal.example.com/', /internal\.example\.com resolves to an address that is a private address/],
    ['https://mixed.example.com/', /an address that is a private address/],
    ['https://localhost:8443/', /loopback/],
    ['https://127.0.0.1/', /127\.0\.0\.1 is a loopback address/],
    ['https://[::1]/', /loopback/],
    ['https://metadata.example.com/latest', /link-local/],
    ['https://169.254.169.254/', /link-local/],
    ['https://[fd12::1]/', /fd12::1 is a unique local address/],
    ['https://v6-ula.example.com/', /unique local/],
    ['https://100.100.1.1/', /carrier-grade NAT/],
    ['https://[::ffff:10.0.0.1]/', /private/],
    ['https://0.0.0.0/', /0\.0\.0\.0 is an unspecified address/],
  ])('refuses %s', async (url, message) => {
    expect(await refusedUrl(url, production, dns)).toMatch(message);
  });

  it('lets an operator allow CIDRs and host names', async () => {
    const policy = buildTargetPolicy('production', ['10.0.0.0/8', 'metadata.example.com', 'fd12::/16']);
    expect(await refusedUrl('https://internal.example.com/', policy, dns)).toBeNull();
    expect(await refusedUrl('https://10.9.9.9/', policy, dns)).toBeNull();
    expect(await refusedUrl('https://metadata.example.com/', policy, dns)).toBeNull();
    expect(await refusedUrl('https://v6-ula.example.com/', policy, dns)).toBeNull();
    expect(await refusedUrl('https://192.168.0.1/', policy, dns)).toMatch(/private/);
  });

  it('refuses names that do not resolve, URLs with credentials and other schemes', async () => {
    expect(await refusedUrl('https://nowhere.invalid/', production, dns)).toMatch(/does not resolve: ENOTFOUND/);
    expect(await refusedUrl('https://user:pw@hooks.example.com/', production, dns)).toMatch(/credentials/);
    expect(await refusedUrl('ftp://hooks.example.com/', production, dns)).toMatch(/must use https \(got ftp\)/);
    expect(await refusedUrl('not a url', production, dns)).toMatch(/not an absolute URL/);
  });
});

describe('webhook URLs in development', () => {
  it('refuses private, loopback and link-local targets like production: the safe policy is the default', async () => {
    expect(await refusedUrl('http://127.0.0.1:9000/hook', development, dns)).toMatch(/127\.0\.0\.1 is a loopback address/);
    expect(await refusedUrl('http://localhost:9000/hook', development, dns)).toMatch(/localhost resolves to an address that is a loopback address/);
    expect(await refusedUrl('https://internal.example.com/', development, dns)).toMatch(/private address/);
    expect(await refusedUrl('https://metadata.example.com/', development, dns)).toMatch(/link-local/);
  });

  it('allows plain http to public hosts, and to a loopback receiver only once an operator allows it', async () => {
    expect(await refusedUrl('http://hooks.example.com/hook', development, dns)).toBeNull();
    const laptop = buildTargetPolicy('development', ['127.0.0.1']);
    expect(await refusedUrl('http://127.0.0.1:9000/hook', laptop, dns)).toBeNull();
    // localhost also resolves to ::1, which the operator did not list.
    expect(await refusedUrl('http://localhost:9000/hook', laptop, dns)).toMatch(/an address that is a loopback address/);
    expect(await refusedUrl('http://localhost:9000/hook', buildTargetPolicy('development', ['localhost']), dns)).toBeNull();
  });
});

describe('allowed targets setting', () => {
  it('fails at start-up on a malformed CIDR', () => {
    expect(() => buildTargetPolicy('production', ['10.0.0.0/99'])).toThrow(ConfigError);
  });
});
