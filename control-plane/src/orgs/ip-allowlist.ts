// CIDR allowlists for IPv4 and IPv6. An IPv4-mapped IPv6 source (::ffff:10.0.0.1)
// matches IPv4 ranges, since dual-stack sockets report IPv4 clients that way.
import ipaddr from 'ipaddr.js';

export type ParsedCidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** Parses `10.0.0.0/8`, `2001:db8::/32` or a bare address (a /32 or /128). */
export function parseCidr(text: string): ParsedCidr {
  const trimmed = text.trim();
  if (trimmed.includes('/')) return ipaddr.parseCIDR(trimmed);
  const addr = ipaddr.parse(trimmed);
  return [addr, addr.kind() === 'ipv4' ? 32 : 128];
}

export function isValidCidr(text: string): boolean {
  try {
    parseCidr(text);
    return true;
  } catch {
    return false;
  }
}

/** Normalised form (`10.0.0.0/8`) so the stored list reads the same however it was typed. */
export function normalizeCidr(text: string): string {
  const [addr, bits] = parseCidr(text);
  return `${addr.toString()}/${bits}`;
}

function normalizeSource(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  try {
    const addr = ipaddr.parse(address);
    if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) {
      return (addr as ipaddr.IPv6).toIPv4Address();
    }
    return addr;
  } catch {
    return undefined;
  }
}

export function compileAllowlist(cidrs: readonly string[]): ParsedCidr[] {
  return cidrs.map(parseCidr);
}

export function isAddressAllowed(address: string, allowlist: readonly ParsedCidr[]): boolean {
  if (allowlist.length === 0) return true;
  const source = normalizeSource(address);
  if (!source) return false;
  return allowlist.some(([range, bits]) => source.kind() === range.kind() && source.match(range, bits));
}
