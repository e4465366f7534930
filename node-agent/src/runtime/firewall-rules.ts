// The host firewall that keeps task containers away from everything but the internet, as
// a pure function: iptables-restore input for two chains of our own, plus where they hook
// in. Docker isolates its bridges from each other, but not from the host: a container can
// open connections to anything listening on the host (the agent's SSH gateway and Jupyter
// proxy, on the bridge gateway or any other host address), to ports Docker publishes on a
// host address (DNAT, then FORWARD to another container), to cloud metadata and to the
// provider's private network. These rules close that, for traffic a container *starts*:
// replies (ESTABLISHED, RELATED) pass, and the host's own connections into containers
// (the Jupyter proxy, ssh -L forwards, replica health checks) are never matched, since
// they leave through OUTPUT and their answers come back as ESTABLISHED. The connections an
// instance may hold open through the host are capped too: the kernel's connection table
// (conntrack) is one per host, and a full one drops every new connection on it, the
// other tenants', the agent's and the model servers' alike.
//
// DOCKER-USER alone is not enough: each time a network is made, Docker (20.10) deletes its
// jump to DOCKER-USER from FORWARD and inserts it again, and in between its own rules
// accept whatever a bridge sends out (measured: a container looping connections to
// 169.254.169.254 got through 4 times while 20 networks were made). So the forward rules
// are written twice: refusing in the filter table (DOCKER-USER), and dropping in the
// security table's FORWARD, which runs after filter's and which Docker never touches.
import { NON_PUBLIC } from '@svc/shared/address-class';
import { INSTANCE_BRIDGE_PREFIX, REPLICA_BRIDGE_PREFIX, type InstanceOutbound } from './task-network.js';

/** Jumped to from DOCKER-USER, which Docker runs first in FORWARD (also for DNAT-ed published ports); and, dropping, from the security table's FORWARD. */
export const FORWARD_CHAIN = 'SVC-ISOLATION-FWD';
/** Jumped to from INPUT: traffic addressed to the host itself. */
export const INPUT_CHAIN = 'SVC-ISOLATION-IN';
/** What a refusal in the filter table jumps to: a TCP reset or an ICMP port-unreachable. */
export const REFUSE_CHAIN = 'SVC-ISOLATION-REFUSE';
/**
 * The kernel's lists (xt_recent) of sources the agent penalized (access/kernel-drop.ts):
 * their new TCP connections to this host are dropped before the agent accepts them. An
 * IPv6 source is a /64, as the penalties count it, or its whole /48 (its site) in a list of its own.
 */
export const PENALIZED_LISTS = { ipv4: 'svc-penalized', ipv6: 'svc-penalized6', ipv6Site: 'svc-penalized6-site' } as const;
/** The longest an entry drops its source: one the agent could not take out (it stopped) ages out. */
export const PENALIZED_MAX_SECONDS = 600;

/**
 * Destinations no instance may reach even with outbound internet: the IPv4 ranges that are
 * not the public internet, as webhooks and image registries are judged too: this-network,
 * private (RFC 1918), carrier-grade NAT, loopback, link-local (cloud metadata
 * 169.254.169.254), Azure's host endpoint (DNS to it excepted), IETF protocol assignments,
 * documentation ranges, benchmarking, multicast and reserved.
 */
export const BLOCKED_IPV4_RANGES: readonly string[] = NON_PUBLIC.map(([cidr]) => cidr).filter((cidr) => cidr.includes('.'));

/** Blocked destinations that also answer the host's DNS (Azure's host endpoint). */
export const CLOUD_RESOLVERS: readonly string[] = NON_PUBLIC.filter(([, kind]) => kind === 'cloud platform').map(([cidr]) => cidr);

/** A port or range of ports of one protocol (SVC_INSTANCE_BLOCKED_PORTS). */
export interface PortRule {
  protocol: 'tcp' | 'udp';
  from: number;
  to: number;
}

export interface FirewallPolicy {
  instanceOutbound: InstanceOutbound;
  /** Private destinations instances may still reach (SVC_INSTANCE_ALLOW_CIDRS), e.g. a DNS resolver or a package mirror. */
  allowCidrs: string[];
  /**
   * Ports instances may not reach past the allowed CIDRs (SVC_INSTANCE_BLOCKED_PORTS): by
   * default SMTP's 25. Every instance on a node leaves from the host's address, so one
   * tenant sending mail straight to the world's mail servers would get that address listed
   * as a spam source for all of them, and the provider's abuse desk the complaints.
   */
  blockedPorts: PortRule[];
  /** Connections (TCP, UDP flows) one instance may hold open through the host (SVC_TASK_MAX_CONNECTIONS). */
  maxConnectionsPerInstance: number;
}

export type FirewallTable = 'filter' | 'security';

export interface FirewallHook {
  table: FirewallTable;
  /** A built-in chain (or Docker's DOCKER-USER) that jumps to `to` at position 1. */
  from: string;
  to: string;
}

export interface FirewallRules {
  /** iptables-restore --noflush input (filter and security tables): declares and fills our chains, touching no other chain. */
  ipv4: string;
  /** The same for ip6tables: our networks carry no IPv6, so containers get nothing over it. */
  ipv6: string;
  hooks: { ipv4: FirewallHook[]; ipv6: FirewallHook[] };
}

const INSTANCE = `${INSTANCE_BRIDGE_PREFIX}+`;
const REPLICA = `${REPLICA_BRIDGE_PREFIX}+`;
const REPLIES = '-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN';
/**
 * Refused at once, so a tenant's tool fails fast instead of hanging: a TCP reset for TCP
 * (the kernel rate-limits the ICMP errors it sends, one a second per address past a small
 * burst, so a client retrying got timeouts instead of refusals), ICMP for the rest.
 */
const REFUSE = `-j ${REFUSE_CHAIN}`;
/** The security table cannot REJECT; it only ever sees what Docker let past the filter table's rules. */
const DROP = '-j DROP';

/**
 * The rules for traffic a task starts through the host, ending in `verdict`. The backstop
 * copy (verdict DROP) leaves out the connection cap: the filter table already counted the
 * connection, and a second count would keep a second tree of every connection.
 */
function forwardRules(policy: FirewallPolicy, verdict: string, withCap: boolean): string[] {
  const fwd = (rule: string) => `-A ${FORWARD_CHAIN} ${rule}`;
  return [
    // Instances: replies pass; no published port of anything (a replica's, reached at a
    // host address); no other task's network; then the allowed exceptions, the private
    // ranges, and with outbound `none` everything else too.
    fwd(`-i ${INSTANCE} ${REPLIES}`),
    // Counted by source address: every instance has a network, and so an address, of its own.
    ...(withCap ? [fwd(`-i ${INSTANCE} -m conntrack --ctstate NEW -m connlimit --connlimit-above ${policy.maxConnectionsPerInstance} --connlimit-mask 32 --connlimit-saddr ${verdict}`)] : []),
    fwd(`-i ${INSTANCE} -m conntrack --ctstate DNAT ${verdict}`),
    fwd(`-i ${INSTANCE} -o ${INSTANCE} ${verdict}`),
    fwd(`-i ${INSTANCE} -o ${REPLICA} ${verdict}`),
    ...policy.allowCidrs.map((cidr) => fwd(`-i ${INSTANCE} -d ${cidr} -j RETURN`)),
    ...policy.blockedPorts.map(({ protocol, from, to }) => fwd(`-i ${INSTANCE} -p ${protocol} -m ${protocol} --dport ${from === to ? from : `${from}:${to}`} ${verdict}`)),
    // Docker's embedded DNS server asks the host's resolvers from the instance's namespace:
    // on Azure that is the host endpoint, refused below for everything but DNS.
    ...CLOUD_RESOLVERS.flatMap((address) => ['udp', 'tcp'].map((protocol) => fwd(`-i ${INSTANCE} -d ${address} -p ${protocol} -m ${protocol} --dport 53 -j RETURN`))),
    ...BLOCKED_IPV4_RANGES.map((cidr) => fwd(`-i ${INSTANCE} -d ${cidr} ${verdict}`)),
    ...(policy.instanceOutbound === 'none' ? [fwd(`-i ${INSTANCE} ${verdict}`)] : []),
    // Replicas (the provider's model servers) keep outbound for weights, but reach no
    // instance, no published port and no metadata service.
    fwd(`-i ${REPLICA} ${REPLIES}`),
    fwd(`-i ${REPLICA} -m conntrack --ctstate DNAT ${verdict}`),
    fwd(`-i ${REPLICA} -o ${INSTANCE} ${verdict}`),
    fwd(`-i ${REPLICA} -d 169.254.0.0/16 ${verdict}`),
  ];
}

/** IPv6: the networks carry none, so everything a task starts is refused. */
function forwardRulesV6(verdict: string): string[] {
  return [INSTANCE, REPLICA].flatMap((iface) => [`-A ${FORWARD_CHAIN} -i ${iface} ${REPLIES}`, `-A ${FORWARD_CHAIN} -i ${iface} ${verdict}`]);
}

export function buildFirewallRules(policy: FirewallPolicy): FirewallRules {
  const inp = (rule: string) => `-A ${INPUT_CHAIN} ${rule}`;
  // Nothing a task starts reaches the host itself, on any of its addresses. Docker never
  // moves INPUT's rules, so this needs no second copy.
  const input = [INSTANCE, REPLICA].flatMap((iface) => [inp(`-i ${iface} ${REPLIES}`), inp(`-i ${iface} ${REFUSE}`)]);
  // Written as `iptables -S` prints it. Loopback is never dropped: the host's own clients.
  const penalized = (name: string, mask: string) =>
    inp(`! -i lo -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -m recent --rcheck --seconds ${PENALIZED_MAX_SECONDS} --reap --name ${name} --mask ${mask} --rsource -j DROP`);
  const refuse = [`-A ${REFUSE_CHAIN} -p tcp -j REJECT --reject-with tcp-reset`, `-A ${REFUSE_CHAIN} -j REJECT`];
  // A chain declared in iptables-restore input is flushed and refilled atomically;
  // with --noflush every other chain stays as it is.
  const restore = (filter: string[], security: string[]) =>
    [
      '*filter',
      `:${FORWARD_CHAIN} - [0:0]`,
      `:${INPUT_CHAIN} - [0:0]`,
      `:${REFUSE_CHAIN} - [0:0]`,
      ...refuse,
      ...filter,
      'COMMIT',
      '*security',
      `:${FORWARD_CHAIN} - [0:0]`,
      ...security,
      'COMMIT',
      '',
    ].join('\n');
  const backstop: FirewallHook = { table: 'security', from: 'FORWARD', to: FORWARD_CHAIN };
  return {
    ipv4: restore([...forwardRules(policy, REFUSE, true), penalized(PENALIZED_LISTS.ipv4, '255.255.255.255'), ...input], forwardRules(policy, DROP, false)),
    ipv6: restore(
      [...forwardRulesV6(REFUSE), penalized(PENALIZED_LISTS.ipv6, 'ffff:ffff:ffff:ffff::'), penalized(PENALIZED_LISTS.ipv6Site, 'ffff:ffff:ffff::'), ...input],
      forwardRulesV6(DROP),
    ),
    hooks: {
      ipv4: [{ table: 'filter', from: 'DOCKER-USER', to: FORWARD_CHAIN }, { table: 'filter', from: 'INPUT', to: INPUT_CHAIN }, backstop],
      // Docker makes no IPv6 chains for networks without IPv6: hook into FORWARD itself.
      ipv6: [{ table: 'filter', from: 'FORWARD', to: FORWARD_CHAIN }, { table: 'filter', from: 'INPUT', to: INPUT_CHAIN }, backstop],
    },
  };
}

/** IPv4 CIDR or address, as SVC_INSTANCE_ALLOW_CIDRS takes them; null when valid, else why not. */
export function cidrProblem(value: string): string | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/(\d{1,2}))?$/.exec(value);
  if (!m) return `"${value}" is not an IPv4 address or CIDR (a.b.c.d or a.b.c.d/n)`;
  if (m.slice(1, 5).some((o) => Number(o) > 255)) return `"${value}" has an octet over 255`;
  if (m[5] !== undefined && Number(m[5]) > 32) return `"${value}" has a prefix length over 32`;
  return null;
}

/** SVC_INSTANCE_BLOCKED_PORTS's default: SMTP (mail submission, 587 and 465, stays open). */
export const DEFAULT_BLOCKED_PORTS = 'tcp:25';

/**
 * SVC_INSTANCE_BLOCKED_PORTS: comma-separated `tcp:25`, `udp:1900` or `tcp:6660-6669`.
 * Throws with the entry that is wrong.
 */
export function parsePortRules(entries: readonly string[]): PortRule[] {
  return entries.map((entry) => {
    const m = /^(tcp|udp):(\d{1,5})(?:-(\d{1,5}))?$/.exec(entry);
    if (!m) throw new Error(`"${entry}" is not a protocol and port (tcp:25, udp:1900 or tcp:6660-6669)`);
    const from = Number(m[2]);
    const to = m[3] === undefined ? from : Number(m[3]);
    if (from < 1 || to > 65535 || from > to) throw new Error(`"${entry}" is not a port or range of ports between 1 and 65535`);
    return { protocol: m[1] as PortRule['protocol'], from, to };
  });
}
