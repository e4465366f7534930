// Which addresses are the public internet and which are not (loopback, private, link-local
// with the cloud metadata service, Azure's host endpoint, and the rest), with the word an
// error message uses. Both
// sides judge addresses a tenant names: the control plane a webhook's target, the agent an
// image's registry.
import ipaddr from 'ipaddr.js';

export type AddressClass =
  | 'public'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'carrier-grade NAT'
  | 'multicast'
  | 'unique local'
  | 'reserved'
  | 'cloud platform';

/**
 * Ranges that are not the public internet, with the word an error message uses. The node
 * agent's host firewall refuses the IPv4 ones to instances (runtime/firewall-rules.ts).
 */
export const NON_PUBLIC: ReadonlyArray<readonly [cidr: string, kind: AddressClass]> = [
  ['0.0.0.0/8', 'unspecified'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'carrier-grade NAT'],
  // Azure's host endpoint (WireServer, the host agent plugin on 32526, the VM's DNS): in a
  // public range, yet it hands the VM's goal state and certificates to whoever asks from
  // the VM, as container traffic forwarded by the host does (Mandiant's "WireServing Up
  // Credentials", 2024, against AKS).
  ['168.63.129.16/32', 'cloud platform'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'reserved'],
  ['192.0.2.0/24', 'reserved'],
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'reserved'],
  ['198.51.100.0/24', 'reserved'],
  ['203.0.113.0/24', 'reserved'],
  // The 6to4 relays' anycast range (deprecated by RFC 7526).
  ['192.88.99.0/24', 'reserved'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'],
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['64:ff9b:1::/48', 'private'],
  ['100::/64', 'reserved'],
  // Teredo (the IPv4 addresses it carries are obfuscated), benchmarking, ORCHID, documentation.
  ['2001::/32', 'reserved'],
  ['2001:2::/48', 'reserved'],
  ['2001:10::/28', 'reserved'],
  ['2001:db8::/32', 'reserved'],
  ['3fff::/20', 'reserved'],
  ['fc00::/7', 'unique local'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'reserved'],
  ['ff00::/8', 'multicast'],
];
const NON_PUBLIC_RANGES = NON_PUBLIC.map(([cidr, cls]) => [ipaddr.parseCIDR(cidr), cls] as const);
const NAT64 = ipaddr.parseCIDR('64:ff9b::/96');

/**
 * An IPv6 address that carries an IPv4 one (mapped ::ffff:a.b.c.d, IPv4-compatible
 * ::a.b.c.d, SIIT ::ffff:0:a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) is judged by the
 * IPv4 address it leads to.
 */
function embeddedIpv4(addr: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  if (addr.isIPv4MappedAddress()) return addr.toIPv4Address();
  const parts = addr.parts;
  const tail = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  if (addr.match(NAT64)) return tail(parts[6]!, parts[7]!);
  const zeroHead = parts[0] === 0 && parts[1] === 0 && parts[2] === 0 && parts[3] === 0;
  // :: and ::1 are themselves (unspecified, loopback), not 0.0.0.0 and 0.0.0.1.
  if (zeroHead && parts[4] === 0 && parts[5] === 0 && (parts[6] !== 0 || parts[7]! > 1)) return tail(parts[6]!, parts[7]!);
  if (zeroHead && parts[4] === 0xffff && parts[5] === 0) return tail(parts[6]!, parts[7]!);
  if (parts[0] === 0x2002) return tail(parts[1]!, parts[2]!);
  return undefined;
}

/** What kind of address `address` (IPv4 or IPv6, as text) is; throws on one that is not an address. */
export function classifyAddress(address: string): AddressClass {
  let addr: ipaddr.IPv4 | ipaddr.IPv6 = ipaddr.parse(address);
  if (addr.kind() === 'ipv6') addr = embeddedIpv4(addr as ipaddr.IPv6) ?? addr;
  for (const [[range, bits], cls] of NON_PUBLIC_RANGES) {
    if (addr.kind() === range.kind() && addr.match(range, bits)) return cls;
  }
  return 'public';
}

