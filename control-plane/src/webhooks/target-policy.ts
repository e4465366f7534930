// Which URLs a webhook may point at, so subscriptions cannot be used to reach into the
// provider's own network (SSRF). Checked when a subscription is created and again on
// every connection the sender opens (DNS rebinding: a name may resolve elsewhere later).
//
// In every mode, every address the host resolves to must be public unless an operator
// listed it (a CIDR or a host name) in the allowed targets: the safe policy is the
// default, and a receiver on this machine (127.0.0.1) is an explicit exception.
// Production also requires https; development allows plain http.
import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import { ConfigError } from '@svc/shared/errors';
import { parseCidr, type ParsedCidr } from '../orgs/ip-allowlist.js';

export type AddressClass =
  | 'public'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'carrier-grade NAT'
  | 'multicast'
  | 'unique local'
  | 'reserved';

/** Ranges that are not the public internet, with the word an error message uses. */
const NON_PUBLIC: Array<[string, AddressClass]> = [
  ['0.0.0.0/8', 'unspecified'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'carrier-grade NAT'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'reserved'],
  ['192.0.2.0/24', 'reserved'],
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'reserved'],
  ['198.51.100.0/24', 'reserved'],
  ['203.0.113.0/24', 'reserved'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'],
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['64:ff9b:1::/48', 'private'],
  ['100::/64', 'reserved'],
  ['2001:db8::/32', 'reserved'],
  ['fc00::/7', 'unique local'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'reserved'],
  ['ff00::/8', 'multicast'],
];
const NON_PUBLIC_RANGES: Array<[ParsedCidr, AddressClass]> = NON_PUBLIC.map(([cidr, cls]) => [parseCidr(cidr), cls]);
const NAT64 = ipaddr.parseCIDR('64:ff9b::/96');

/**
 * An IPv6 address that carries an IPv4 one (mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96,
 * 6to4 2002::/16) is judged by the IPv4 address it leads to.
 */
function embeddedIpv4(addr: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  if (addr.isIPv4MappedAddress()) return addr.toIPv4Address();
  const parts = addr.parts;
  const tail = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  if (addr.match(NAT64)) return tail(parts[6]!, parts[7]!);
  if (parts[0] === 0x2002) return tail(parts[1]!, parts[2]!);
  return undefined;
}

export function classifyAddress(address: string): AddressClass {
  let addr: ipaddr.IPv4 | ipaddr.IPv6 = ipaddr.parse(address);
  if (addr.kind() === 'ipv6') addr = embeddedIpv4(addr as ipaddr.IPv6) ?? addr;
  for (const [[range, bits], cls] of NON_PUBLIC_RANGES) {
    if (addr.kind() === range.kind() && addr.match(range, bits)) return cls;
  }
  return 'public';
}

export interface TargetPolicy {
  mode: 'development' | 'production';
  /** Operator exceptions: CIDRs and host names that may be private. */
  allowedCidrs: ParsedCidr[];
  allowedHosts: Set<string>;
}

/** Splits the operator's allowed-targets setting into CIDRs and host names. */
export function buildTargetPolicy(mode: TargetPolicy['mode'], allowedTargets: readonly string[]): TargetPolicy {
  const allowedCidrs: ParsedCidr[] = [];
  const allowedHosts = new Set<string>();
  for (const entry of allowedTargets) {
    const text = entry.trim().toLowerCase();
    if (text === '') continue;
    if (text.includes('/') || ipaddr.isValid(text)) {
      try {
        allowedCidrs.push(parseCidr(text));
      } catch {
        throw new ConfigError(`invalid setting SVC_WEBHOOK_ALLOWED_TARGETS: "${entry}" is neither a CIDR nor a host name`);
      }
    } else allowedHosts.add(text);
  }
  return { mode, allowedCidrs, allowedHosts };
}

/** The URL's host without IPv6 brackets, lower case. */
export function urlHost(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
}

function addressAllowedByOperator(address: string, policy: TargetPolicy): boolean {
  const addr = ipaddr.process(address);
  return policy.allowedCidrs.some(([range, bits]) => addr.kind() === range.kind() && addr.match(range, bits));
}

/** Why `address` (one of `host`'s) may not be connected to, or null when it may. */
export function refusedAddress(host: string, address: string, policy: TargetPolicy): string | null {
  const cls = classifyAddress(address);
  if (cls === 'public' || policy.allowedHosts.has(host) || addressAllowedByOperator(address, policy)) return null;
  const subject = host === address ? address : `${host} resolves to ${address}, which`;
  const article = cls === 'unspecified' ? 'an' : 'a';
  return (
    `${subject} is ${article} ${cls} address; webhooks must reach the public internet ` +
    '(an operator may allow it with SVC_WEBHOOK_ALLOWED_TARGETS)'
  );
}

/** Every address a host name resolves to; injectable so tests can play a rebinding DNS. */
export type Resolver = (host: string) => Promise<LookupAddress[]>;

export const systemResolver: Resolver = (host) => lookup(host, { all: true, verbatim: true });

/**
 * Why a subscription may not use `raw`, or null. Resolves the host (every address)
 * where the answer depends on where it points.
 */
export async function refusedUrl(raw: string, policy: TargetPolicy, resolve: Resolver): Promise<string | null> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'url is not an absolute URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return `url must use https (got ${url.protocol.replace(':', '')})`;
  if (url.username || url.password) return 'url must not carry credentials; authenticate with the signature instead';
  const host = urlHost(url);
  if (url.protocol === 'http:' && policy.mode === 'production') return 'url must use https';

  let addresses: string[];
  if (ipaddr.isValid(host)) addresses = [host];
  else {
    try {
      addresses = (await resolve(host)).map((a) => a.address);
    } catch (err) {
      return `url host ${host} does not resolve: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
    }
    if (addresses.length === 0) return `url host ${host} does not resolve`;
  }
  for (const address of addresses) {
    const refused = refusedAddress(host, address, policy);
    if (refused) return refused;
  }
  return null;
}
