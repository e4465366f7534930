import { describe, expect, it } from 'vitest';
import { dnsLimitRules } from './task-dns-limit.js';
import { namespaceFilter, UNTRACKED } from './task-namespace-filter.js';
import { ownSubnetRules } from './task-own-subnet.js';

describe('namespaceFilter', () => {
  it('replaces the whole filter table of the namespace, so a retried start comes out the same', () => {
    const rules = [...dnsLimitRules(100), ...ownSubnetRules({ address: '172.28.0.2', prefixLength: 16, gateway: '172.28.0.1' })];
    expect(namespaceFilter(rules)).toBe(
      ['*raw', ':PREROUTING ACCEPT [0:0]', ':OUTPUT ACCEPT [0:0]', ...UNTRACKED, 'COMMIT', '*filter', ':INPUT ACCEPT [0:0]', ':FORWARD ACCEPT [0:0]', ':OUTPUT ACCEPT [0:0]', ...rules, 'COMMIT', ''].join('\n'),
    );
  });
});

describe('ownSubnetRules', () => {
  it('refuses what goes to the subnet on eth0, except to the gateway: TCP with a reset, the rest with ICMP', () => {
    expect(ownSubnetRules({ address: '172.28.0.2', prefixLength: 16, gateway: '172.28.0.1' })).toEqual([
      '-A OUTPUT -o eth0 -d 172.28.0.1/32 -j ACCEPT',
      '-A OUTPUT -o eth0 -d 172.28.0.2/16 -p tcp -j REJECT --reject-with tcp-reset',
      '-A OUTPUT -o eth0 -d 172.28.0.2/16 -j REJECT',
    ]);
  });

  it('lets nothing on the subnet through when Docker reports no gateway', () => {
    expect(ownSubnetRules({ address: '192.168.16.2', prefixLength: 20, gateway: null })).toEqual([
      '-A OUTPUT -o eth0 -d 192.168.16.2/20 -p tcp -j REJECT --reject-with tcp-reset',
      '-A OUTPUT -o eth0 -d 192.168.16.2/20 -j REJECT',
    ]);
  });
});
