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
import { INSTANCE_BRIDGE_PREFIX, REPLICA_BRIDGE_PREFIX, type InstanceOutbound } from './task-network.js';

/** Jumped to from DOCKER-USER, which Docker runs first in FORWARD (also for DNAT-ed published ports). */
export const FORWARD_CHAIN = 'SVC-ISOLATION-FWD';
/** Jumped to from INPUT: traffic addressed to the host itself. */
export const INPUT_CHAIN = 'SVC-ISOLATION-IN';

/**
 * Destinations no instance may reach even with outbound internet: this-network, private
 * (RFC 1918), carrier-grade NAT, loopback, link-local (cloud metadata 169.254.169.254),
 * IETF protocol assignments, documentation ranges, benchmarking, multicast and reserved.
 */
export const BLOCKED_IPV4_RANGES = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
] as const;

export interface FirewallPolicy {
  instanceOutbound: InstanceOutbound;
  /** Private destinations instances may still reach (SVC_INSTANCE_ALLOW_CIDRS), e.g. a DNS resolver or a package mirror. */
  allowCidrs: string[];
  /** Connections (TCP, UDP flows) one instance may hold open through the host (SVC_TASK_MAX_CONNECTIONS). */
  maxConnectionsPerInstance: number;
}

export interface FirewallRules {
  /** iptables-restore --noflush input (filter table): declares and fills our chains, touching no other chain. */
  ipv4: string;
  /** The same for ip6tables: our networks carry no IPv6, so containers get nothing over it. */
  ipv6: string;
  /** Chain -> built-in (or Docker's) chain to hook it into, at position 1. */
  hooks: { ipv4: Array<{ from: string; to: string }>; ipv6: Array<{ from: string; to: string }> };
}

const INSTANCE = `${INSTANCE_BRIDGE_PREFIX}+`;
const REPLICA = `${REPLICA_BRIDGE_PREFIX}+`;
const REPLIES = '-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN';
/** Refused at once (connection refused), so a tenant's tool fails fast instead of hanging. */
const REFUSE = '-j REJECT';

export function buildFirewallRules(policy: FirewallPolicy): FirewallRules {
  const fwd = (rule: string) => `-A ${FORWARD_CHAIN} ${rule}`;
  const inp = (rule: string) => `-A ${INPUT_CHAIN} ${rule}`;
  const v4 = [
    // Instances: replies pass; no published port of anything (a replica's, reached at a
    // host address); no other task's network; then the allowed exceptions, the private
    // ranges, and with outbound `none` everything else too.
    fwd(`-i ${INSTANCE} ${REPLIES}`),
    // Counted by source address: every instance has a network, and so an address, of its own.
    fwd(`-i ${INSTANCE} -m conntrack --ctstate NEW -m connlimit --connlimit-above ${policy.maxConnectionsPerInstance} --connlimit-mask 32 --connlimit-saddr ${REFUSE}`),
    fwd(`-i ${INSTANCE} -m conntrack --ctstate DNAT ${REFUSE}`),
    fwd(`-i ${INSTANCE} -o ${INSTANCE} ${REFUSE}`),
    fwd(`-i ${INSTANCE} -o ${REPLICA} ${REFUSE}`),
    ...policy.allowCidrs.map((cidr) => fwd(`-i ${INSTANCE} -d ${cidr} -j RETURN`)),
    ...BLOCKED_IPV4_RANGES.map((cidr) => fwd(`-i ${INSTANCE} -d ${cidr} ${REFUSE}`)),
    ...(policy.instanceOutbound === 'none' ? [fwd(`-i ${INSTANCE} ${REFUSE}`)] : []),
    // Replicas (the provider's model servers) keep outbound for weights, but reach no
    // instance, no published port and no metadata service.
    fwd(`-i ${REPLICA} ${REPLIES}`),
    fwd(`-i ${REPLICA} -m conntrack --ctstate DNAT ${REFUSE}`),
    fwd(`-i ${REPLICA} -o ${INSTANCE} ${REFUSE}`),
    fwd(`-i ${REPLICA} -d 169.254.0.0/16 ${REFUSE}`),
    // Nothing a task starts reaches the host itself, on any of its addresses.
    inp(`-i ${INSTANCE} ${REPLIES}`),
    inp(`-i ${INSTANCE} ${REFUSE}`),
    inp(`-i ${REPLICA} ${REPLIES}`),
    inp(`-i ${REPLICA} ${REFUSE}`),
  ];
  const v6 = [INSTANCE, REPLICA].flatMap((iface) => [
    fwd(`-i ${iface} ${REPLIES}`),
    fwd(`-i ${iface} ${REFUSE}`),
    inp(`-i ${iface} ${REPLIES}`),
    inp(`-i ${iface} ${REFUSE}`),
  ]);
  // A chain declared in iptables-restore input is flushed and refilled atomically;
  // with --noflush every other chain stays as it is.
  const restore = (rules: string[]) => ['*filter', `:${FORWARD_CHAIN} - [0:0]`, `:${INPUT_CHAIN} - [0:0]`, ...rules, 'COMMIT', ''].join('\n');
  return {
    ipv4: restore(v4),
    ipv6: restore(v6),
    hooks: {
      ipv4: [
        { from: 'DOCKER-USER', to: FORWARD_CHAIN },
        { from: 'INPUT', to: INPUT_CHAIN },
      ],
      // Docker makes no IPv6 chains for networks without IPv6: hook into FORWARD itself.
      ipv6: [
        { from: 'FORWARD', to: FORWARD_CHAIN },
        { from: 'INPUT', to: INPUT_CHAIN },
      ],
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
