import { describe, expect, it } from 'vitest';
import { compileAllowlist, isAddressAllowed, isValidCidr, normalizeCidr } from './ip-allowlist.js';

describe('IP allowlist', () => {
  const list = compileAllowlist(['10.0.0.0/8', '192.168.1.7', '2001:db8::/32', '::1/128']);

  it.each([
    ['10.1.2.3', true],
    ['11.0.0.1', false],
    ['192.168.1.7', true],
    ['192.168.1.8', false],
    ['2001:db8:0:1::5', true],
    ['2001:db9::5', false],
    ['::1', true],
    ['::ffff:10.9.9.9', true], // IPv4 client on a dual-stack socket
    ['::ffff:11.9.9.9', false],
    ['not-an-ip', false],
  ])('%s allowed: %s', (address, allowed) => expect(isAddressAllowed(address, list)).toBe(allowed));

  it('allows everything when the list is empty', () => {
    expect(isAddressAllowed('203.0.113.9', [])).toBe(true);
  });

  it('validates and normalises entries', () => {
    expect(isValidCidr('10.0.0.0/33')).toBe(false);
    expect(isValidCidr('2001:db8::/129')).toBe(false);
    expect(isValidCidr('example.com')).toBe(false);
    expect(normalizeCidr(' 10.0.0.1 ')).toBe('10.0.0.1/32');
    expect(normalizeCidr('2001:0db8:0000::/32')).toBe('2001:db8::/32');
  });
});
