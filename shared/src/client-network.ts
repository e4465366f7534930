// The units a per-client cap counts by. An IPv4 address is one client. An IPv6 address is
// not: every host on a network is handed at least a /64 (2^64 addresses), so a client
// counted per address could send from a fresh one each time and never meet the cap. So
// IPv6 is counted by its /64, as rate limiters in front of public APIs commonly do, and an
// IPv4-mapped IPv6 address (::ffff:a.b.c.d, how a dual-stack socket reports an IPv4
// client) counts as that IPv4 address. Anything else (a Unix socket peer) is kept whole.
//
// One level up is the client's site: a /48 is what a site is routed (and what a free IPv6
// tunnel broker hands anyone), 65,536 /64s, so a cap counted only per /64 is met by one
// attacker with a fresh /64 per request. Caps that must hold against one party count the
// site as well, with SITE_SHARE times a client's allowance (a site is several hosts). An
// IPv4 client's site is its address.
import ipaddr from 'ipaddr.js';

/** A site's allowance under a per-client cap, in clients' allowances. */
export const SITE_SHARE = 4;

export function clientNetwork(address: string): string {
  return prefixOf(address, 4, 64);
}

export function clientSite(address: string): string {
  return prefixOf(address, 3, 48);
}

/** The IPv6 prefix of `groups` 16-bit groups (`bits` long), or the IPv4 address; else `address`. */
function prefixOf(address: string, groups: number, bits: number): string {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return address;
  }
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  const parts = v6.parts.slice(0, groups).concat(new Array<number>(8 - groups).fill(0));
  return `${new ipaddr.IPv6(parts).toString()}/${bits}`;
}
