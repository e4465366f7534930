// The unit a per-client cap counts by. An IPv4 address is one client. An IPv6 address is
// not: every host on a network is handed at least a /64 (2^64 addresses), so a client
// counted per address could send from a fresh one each time and never meet the cap. So
// IPv6 is counted by its /64, as rate limiters in front of public APIs commonly do, and an
// IPv4-mapped IPv6 address (::ffff:a.b.c.d, how a dual-stack socket reports an IPv4
// client) counts as that IPv4 address. Anything else (a Unix socket peer) is kept whole.
import ipaddr from 'ipaddr.js';

export function clientNetwork(address: string): string {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return address;
  }
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  const parts = v6.parts.slice(0, 4).concat([0, 0, 0, 0]);
  return `${new ipaddr.IPv6(parts).toString()}/64`;
}
