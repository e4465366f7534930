// The host firewall on this host's real iptables (the tests run as root, as the agent does).
// It installs the default policy, the one every agent here installs, so suites running
// beside it see no change.
import { describe, expect, it } from 'vitest';
import { DEFAULT_BLOCKED_PORTS, FORWARD_CHAIN, INPUT_CHAIN, REFUSE_CHAIN, buildFirewallRules, parsePortRules } from './firewall-rules.js';
import { installHostFirewall, listChain } from './host-firewall.js';
import { TEST_MAX_CONNECTIONS } from '../../../test/support/node-agent-process.js';

const rules = buildFirewallRules({ instanceOutbound: 'internet', allowCidrs: [], blockedPorts: parsePortRules([DEFAULT_BLOCKED_PORTS]), maxConnectionsPerInstance: TEST_MAX_CONNECTIONS });
/** The rules of one table of iptables-restore input. */
const expected = (text: string, table: string) => {
  const lines = text.split('\n');
  const start = lines.indexOf(`*${table}`);
  return lines.slice(start, lines.indexOf('COMMIT', start)).filter((l) => l.startsWith('-A '));
};
/** `iptables -S` puts -d before -i; compare as sets of words per rule. */
const normal = (rule: string) => rule.replace(' --reject-with icmp-port-unreachable', '').replace(' --reject-with icmp6-port-unreachable', '').split(' ').sort().join(' ');

describe('installHostFirewall', () => {
  it('writes our chains and hooks each in first, once, however often it runs', async () => {
    await installHostFirewall(rules);
    await installHostFirewall(rules);
    for (const family of ['ipv4', 'ipv6'] as const) {
      for (const [table, chain] of [['filter', FORWARD_CHAIN], ['filter', INPUT_CHAIN], ['filter', REFUSE_CHAIN], ['security', FORWARD_CHAIN]] as const) {
        const installed = (await listChain(family, chain, table)).map(normal);
        expect({ family, table, chain, rules: installed }).toEqual({ family, table, chain, rules: expected(rules[family], table).filter((r) => r.startsWith(`-A ${chain} `)).map(normal) });
      }
      for (const hook of rules.hooks[family]) {
        const listed = await listChain(family, hook.from, hook.table);
        expect(listed.filter((r) => r === `-A ${hook.from} -j ${hook.to}`)).toHaveLength(1);
        expect(listed[0]).toBe(`-A ${hook.from} -j ${hook.to}`);
      }
    }
  });
});
