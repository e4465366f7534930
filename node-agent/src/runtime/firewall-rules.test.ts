import { describe, expect, it } from 'vitest';
import { BLOCKED_IPV4_RANGES, FORWARD_CHAIN, INPUT_CHAIN, PENALIZED_LISTS, REFUSE_CHAIN, buildFirewallRules, cidrProblem, parsePortRules } from './firewall-rules.js';

/** The rules of one table of iptables-restore input. */
const rules = (text: string, table: 'filter' | 'security' = 'filter') => {
  const lines = text.split('\n');
  const start = lines.indexOf(`*${table}`);
  return lines.slice(start, lines.indexOf('COMMIT', start)).filter((l) => l.startsWith('-A ') && !l.startsWith(`-A ${REFUSE_CHAIN} `));
};
const REJECT = `-j ${REFUSE_CHAIN}`;
const SMTP = parsePortRules(['tcp:25']);
const internet = buildFirewallRules({ instanceOutbound: 'internet', allowCidrs: [], blockedPorts: SMTP, maxConnectionsPerInstance: 16384 });
const none = buildFirewallRules({ instanceOutbound: 'none', allowCidrs: [], blockedPorts: SMTP, maxConnectionsPerInstance: 16384 });

describe('buildFirewallRules', () => {
  it.each([
    ['replies to connections an instance opened pass, before anything is refused', `-A ${FORWARD_CHAIN} -i svci+ -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN`, 0],
    ['an instance opens no connection past its cap, whatever the destination (the host has one connection table)', `-A ${FORWARD_CHAIN} -i svci+ -m conntrack --ctstate NEW -m connlimit --connlimit-above 16384 --connlimit-mask 32 --connlimit-saddr ${REJECT}`, 1],
    ['an instance reaches no port Docker published on a host address', `-A ${FORWARD_CHAIN} -i svci+ -m conntrack --ctstate DNAT ${REJECT}`, 2],
    ['an instance reaches no other instance', `-A ${FORWARD_CHAIN} -i svci+ -o svci+ ${REJECT}`, 3],
    ['an instance reaches no replica', `-A ${FORWARD_CHAIN} -i svci+ -o svcr+ ${REJECT}`, 4],
    ['an instance reaches no metadata service', `-A ${FORWARD_CHAIN} -i svci+ -d 169.254.0.0/16 ${REJECT}`, -1],
    ['an instance reaches no private network', `-A ${FORWARD_CHAIN} -i svci+ -d 10.0.0.0/8 ${REJECT}`, -1],
    ['a replica reaches no instance', `-A ${FORWARD_CHAIN} -i svcr+ -o svci+ ${REJECT}`, -1],
    ['a replica reaches no metadata service', `-A ${FORWARD_CHAIN} -i svcr+ -d 169.254.0.0/16 ${REJECT}`, -1],
    ['an instance reaches nothing on the host', `-A ${INPUT_CHAIN} -i svci+ ${REJECT}`, -1],
    ['a replica reaches nothing on the host', `-A ${INPUT_CHAIN} -i svcr+ ${REJECT}`, -1],
  ])('%s', (_name, rule, position) => {
    const list = rules(internet.ipv4);
    expect(list).toContain(rule);
    if (position >= 0) expect(list.indexOf(rule)).toBe(position);
  });

  it('with outbound internet, leaves public destinations to Docker (no catch-all refusal for instances)', () => {
    expect(rules(internet.ipv4)).not.toContain(`-A ${FORWARD_CHAIN} -i svci+ ${REJECT}`);
    const refused = ['0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '168.63.129.16/32', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/24', '192.0.2.0/24', '192.168.0.0/16', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '192.88.99.0/24', '224.0.0.0/4', '240.0.0.0/4'];
    expect(BLOCKED_IPV4_RANGES).toEqual(refused);
    expect(rules(internet.ipv4).filter((r) => r.includes('-i svci+ -d ') && r.endsWith(REJECT)).map((r) => r.split(' ')[5])).toEqual(refused);
  });

  it("refuses Azure's host endpoint (WireServer: the VM's goal state and certificates) to instances, all but DNS, which Docker's resolver sends it from the instance", () => {
    const list = rules(internet.ipv4);
    const dns = ['udp', 'tcp'].map((p) => list.indexOf(`-A ${FORWARD_CHAIN} -i svci+ -d 168.63.129.16/32 -p ${p} -m ${p} --dport 53 -j RETURN`));
    const refused = list.indexOf(`-A ${FORWARD_CHAIN} -i svci+ -d 168.63.129.16/32 ${REJECT}`);
    expect(dns.every((i) => i >= 0 && i < refused)).toBe(true);
  });

  it('with outbound none, refuses everything else an instance starts, after the private ranges', () => {
    const list = rules(none.ipv4);
    const last = list.indexOf(`-A ${FORWARD_CHAIN} -i svci+ ${REJECT}`);
    expect(last).toBeGreaterThan(list.indexOf(`-A ${FORWARD_CHAIN} -i svci+ -d 240.0.0.0/4 ${REJECT}`));
  });

  it('lets allowed CIDRs through before the private ranges are refused', () => {
    const list = rules(buildFirewallRules({ instanceOutbound: 'internet', allowCidrs: ['10.0.0.2/32'], blockedPorts: SMTP, maxConnectionsPerInstance: 16384 }).ipv4);
    const allow = list.indexOf(`-A ${FORWARD_CHAIN} -i svci+ -d 10.0.0.2/32 -j RETURN`);
    expect(allow).toBeGreaterThan(list.indexOf(`-A ${FORWARD_CHAIN} -i svci+ -o svcr+ ${REJECT}`));
    expect(allow).toBeLessThan(list.indexOf(`-A ${FORWARD_CHAIN} -i svci+ -d 10.0.0.0/8 ${REJECT}`));
  });

  it('refuses the blocked ports after the allowed CIDRs (a provider relay there stays reachable) and before the private ranges', () => {
    const list = rules(buildFirewallRules({ instanceOutbound: 'internet', allowCidrs: ['10.0.0.2/32'], blockedPorts: parsePortRules(['tcp:25', 'udp:1900', 'tcp:6660-6669']), maxConnectionsPerInstance: 16384 }).ipv4);
    const blocked = [`-A ${FORWARD_CHAIN} -i svci+ -p tcp -m tcp --dport 25 ${REJECT}`, `-A ${FORWARD_CHAIN} -i svci+ -p udp -m udp --dport 1900 ${REJECT}`, `-A ${FORWARD_CHAIN} -i svci+ -p tcp -m tcp --dport 6660:6669 ${REJECT}`];
    const first = list.indexOf(blocked[0]!);
    expect(list.slice(first, first + 3)).toEqual(blocked);
    expect(first).toBeGreaterThan(list.indexOf(`-A ${FORWARD_CHAIN} -i svci+ -d 10.0.0.2/32 -j RETURN`));
    expect(first).toBeLessThan(list.indexOf(`-A ${FORWARD_CHAIN} -i svci+ -d 0.0.0.0/8 ${REJECT}`));
    // Replicas, the provider's own, are not held to them.
    expect(list.filter((r) => r.includes('--dport') && r.endsWith(REJECT))).toHaveLength(3);
    // The backstop copy drops the same ports.
    expect(rules(buildFirewallRules({ instanceOutbound: 'internet', allowCidrs: [], blockedPorts: SMTP, maxConnectionsPerInstance: 16384 }).ipv4, 'security')).toContain(`-A ${FORWARD_CHAIN} -i svci+ -p tcp -m tcp --dport 25 -j DROP`);
  });

  it.each([
    ['tcp:25', [{ protocol: 'tcp', from: 25, to: 25 }]],
    ['udp:1900', [{ protocol: 'udp', from: 1900, to: 1900 }]],
    ['tcp:6660-6669', [{ protocol: 'tcp', from: 6660, to: 6669 }]],
  ])('reads the blocked port %s', (entry, parsed) => {
    expect(parsePortRules([entry])).toEqual(parsed);
  });

  it.each([
    ['25', 'is not a protocol and port'],
    ['sctp:25', 'is not a protocol and port'],
    ['tcp:smtp', 'is not a protocol and port'],
    ['tcp:0', 'between 1 and 65535'],
    ['tcp:70000', 'between 1 and 65535'],
    ['tcp:30-20', 'between 1 and 65535'],
  ])('refuses the blocked port %s', (entry, message) => {
    expect(() => parsePortRules([entry])).toThrow(message);
  });

  it('refuses all IPv6 a task starts', () => {
    expect(rules(internet.ipv6)).toEqual([
      `-A ${FORWARD_CHAIN} -i svci+ -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN`,
      `-A ${FORWARD_CHAIN} -i svci+ ${REJECT}`,
      `-A ${FORWARD_CHAIN} -i svcr+ -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN`,
      `-A ${FORWARD_CHAIN} -i svcr+ ${REJECT}`,
      `-A ${INPUT_CHAIN} ! -i lo -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -m recent --rcheck --seconds 600 --reap --name svc-penalized6 --mask ffff:ffff:ffff:ffff:: --rsource -j DROP`,
      `-A ${INPUT_CHAIN} ! -i lo -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -m recent --rcheck --seconds 600 --reap --name svc-penalized6-site --mask ffff:ffff:ffff:: --rsource -j DROP`,
      `-A ${INPUT_CHAIN} -i svci+ -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN`,
      `-A ${INPUT_CHAIN} -i svci+ ${REJECT}`,
      `-A ${INPUT_CHAIN} -i svcr+ -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN`,
      `-A ${INPUT_CHAIN} -i svcr+ ${REJECT}`,
    ]);
  });

  it("drops new TCP connections to the host from the sources the agent penalized, first in INPUT, never loopback's", () => {
    const input = rules(internet.ipv4).filter((r) => r.startsWith(`-A ${INPUT_CHAIN} `));
    expect(input[0]).toBe(
      `-A ${INPUT_CHAIN} ! -i lo -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -m recent --rcheck --seconds 600 --reap --name ${PENALIZED_LISTS.ipv4} --mask 255.255.255.255 --rsource -j DROP`,
    );
    // An IPv6 source is its /64, as the penalties count it.
    expect(rules(internet.ipv6).filter((r) => r.startsWith(`-A ${INPUT_CHAIN} `))[0]).toContain(`--name ${PENALIZED_LISTS.ipv6} --mask ffff:ffff:ffff:ffff:: `);
    // ...or, when its whole site is refused, the site's /48.
    expect(rules(internet.ipv6).filter((r) => r.startsWith(`-A ${INPUT_CHAIN} `))[1]).toContain(`--name ${PENALIZED_LISTS.ipv6Site} --mask ffff:ffff:ffff:: `);
  });

  it('refuses TCP with a reset (not rate-limited, unlike ICMP errors) and the rest with ICMP', () => {
    for (const text of [internet.ipv4, internet.ipv6]) {
      expect(text.split('\n').filter((l) => l.startsWith(`-A ${REFUSE_CHAIN} `))).toEqual([
        `-A ${REFUSE_CHAIN} -p tcp -j REJECT --reject-with tcp-reset`,
        `-A ${REFUSE_CHAIN} -j REJECT`,
      ]);
    }
  });

  it('drops, in the security table, what the filter table refuses a task starts through the host (for while Docker re-hooks DOCKER-USER)', () => {
    for (const policy of [internet, none, buildFirewallRules({ instanceOutbound: 'internet', allowCidrs: ['10.0.0.2/32'], blockedPorts: SMTP, maxConnectionsPerInstance: 16384 })]) {
      const filterForward = rules(policy.ipv4).filter((r) => r.startsWith(`-A ${FORWARD_CHAIN} `) && !r.includes('connlimit'));
      expect(rules(policy.ipv4, 'security')).toEqual(filterForward.map((r) => r.replace(REJECT, '-j DROP')));
    }
    expect(rules(internet.ipv6, 'security')).toEqual(rules(internet.ipv6).filter((r) => r.startsWith(`-A ${FORWARD_CHAIN} `)).map((r) => r.replace(REJECT, '-j DROP')));
  });

  it("declares only its own chains, so iptables-restore --noflush leaves Docker's alone, and hooks them in first", () => {
    for (const text of [internet.ipv4, internet.ipv6]) {
      expect(text.split('\n').filter((l) => l.startsWith(':') || l.startsWith('*') || l === 'COMMIT')).toEqual([
        '*filter',
        `:${FORWARD_CHAIN} - [0:0]`,
        `:${INPUT_CHAIN} - [0:0]`,
        `:${REFUSE_CHAIN} - [0:0]`,
        'COMMIT',
        '*security',
        `:${FORWARD_CHAIN} - [0:0]`,
        'COMMIT',
      ]);
      expect(text.endsWith('COMMIT\n')).toBe(true);
    }
    expect(internet.hooks.ipv4).toEqual([
      { table: 'filter', from: 'DOCKER-USER', to: FORWARD_CHAIN },
      { table: 'filter', from: 'INPUT', to: INPUT_CHAIN },
      { table: 'security', from: 'FORWARD', to: FORWARD_CHAIN },
    ]);
    expect(internet.hooks.ipv6).toEqual([
      { table: 'filter', from: 'FORWARD', to: FORWARD_CHAIN },
      { table: 'filter', from: 'INPUT', to: INPUT_CHAIN },
      { table: 'security', from: 'FORWARD', to: FORWARD_CHAIN },
    ]);
  });
});

describe('cidrProblem', () => {
  it.each([
    ['10.0.0.2', null],
    ['10.0.0.0/8', null],
    ['0.0.0.0/0', null],
    ['10.0.0.256', /over 255/],
    ['10.0.0.0/33', /over 32/],
    ['fd00::/8', /not an IPv4/],
    ['10.0.0.0/8 -j ACCEPT', /not an IPv4/],
  ])('%s', (value, problem) => {
    const found = cidrProblem(value);
    if (problem === null) expect(found).toBeNull();
    else expect(found).toMatch(problem);
  });
});
