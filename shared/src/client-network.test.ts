import { describe, expect, it } from 'vitest';
import { clientNetwork, clientSite } from './client-network.js';

describe('clientNetwork and clientSite', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7', '203.0.113.7'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64', '2001:db8:1::/48'],
    ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:db8:1:2::/64', '2001:db8:1::/48'],
    ['2001:0DB8:0001:0002:0000:0000:0000:0009', '2001:db8:1:2::/64', '2001:db8:1::/48'],
    ['2001:db8:1:3::1', '2001:db8:1:3::/64', '2001:db8:1::/48'],
    ['2001:db8:2:3::1', '2001:db8:2:3::/64', '2001:db8:2::/48'],
    ['::1', '::/64', '::/48'],
    ['fe80::1%eth0', 'fe80::/64', 'fe80::/48'],
    ['unix:/run/svc/agent.sock', 'unix:/run/svc/agent.sock', 'unix:/run/svc/agent.sock'],
    ['not an address', 'not an address', 'not an address'],
  ])('%s counts as %s, on site %s', (address, network, site) => {
    expect(clientNetwork(address)).toBe(network);
    expect(clientSite(address)).toBe(site);
  });
});
