// A cap on the DNS queries an instance sends Docker's embedded DNS server. On a network of
// its own, a container resolves through 127.0.0.11, which is dockerd itself: every query
// costs dockerd CPU on the host, outside the container's quota. Measured on this 2-core
// host: one container sending queries as fast as it could (3.5 million in 10 s) kept dockerd
// at a whole core, so every Docker operation on the node (other tenants' SSH sessions,
// starts, log copying) waited behind it. The cap is a token bucket in the container's own
// network namespace, set right after it starts, which the tenant (root inside, without
// CAP_NET_ADMIN) can read and cannot change: past it, queries are dropped on the tenant's
// CPU before dockerd sees them. A tenant that needs more can ask a public resolver directly.
// The rules go into the namespace's filter table with the others (task-namespace-filter.ts).

/** Docker's embedded DNS server, as every container on a user-defined network sees it. */
export const EMBEDDED_DNS = '127.0.0.11';
/** What one query over TCP takes, about, to turn the query rate into a byte rate. */
const TCP_BYTES_PER_QUERY = 64;

/**
 * Rules that refuse the embedded DNS outright, for an instance with no way out
 * (SVC_INSTANCE_OUTBOUND=none). Docker's embedded DNS forwards every name it does not know
 * to the host's resolvers, and a resolver on the host's loopback (dnsmasq, unbound, a
 * node-local cache) it queries from the host's own namespace, past every rule that holds
 * the instance's bridge: a two-way DNS tunnel out of an instance promised none. Alone on
 * its network, the instance has no name to look up but its own, which /etc/hosts holds.
 */
export function embeddedDnsRefusal(): string[] {
  return [`-A OUTPUT -d ${EMBEDDED_DNS}/32 -p udp -j REJECT`, `-A OUTPUT -d ${EMBEDDED_DNS}/32 -p tcp -j REJECT --reject-with tcp-reset`];
}

/**
 * Rules for the OUTPUT chain of the container's filter table, dropping what goes to the
 * embedded DNS past `queriesPerSecond`, with a burst of twice that. UDP is counted in
 * packets (one query each). TCP, which can carry many queries a segment, in bytes.
 */
export function dnsLimitRules(queriesPerSecond: number): string[] {
  const burst = queriesPerSecond * 2;
  const kib = (queries: number) => `${Math.max(1, Math.ceil((queries * TCP_BYTES_PER_QUERY) / 1024))}kb`;
  return [
    `-A OUTPUT -d ${EMBEDDED_DNS}/32 -p udp -m hashlimit --hashlimit-name svc-dns-udp --hashlimit-above ${queriesPerSecond}/second --hashlimit-burst ${burst} -j DROP`,
    `-A OUTPUT -d ${EMBEDDED_DNS}/32 -p tcp -m hashlimit --hashlimit-name svc-dns-tcp --hashlimit-above ${kib(queriesPerSecond)}/second --hashlimit-burst ${kib(burst)} -j DROP`,
  ];
}
