// Which URLs a webhook may point at, so subscriptions cannot be used to reach into the
// provider's own network (SSRF). Checked when a subscription is created and again on
// every connection the sender opens (DNS rebinding: a name may resolve elsewhere later).
//
// In every mode, every address the host resolves to must be public unless an operator
// listed it (a CIDR or a host name) in the allowed targets: the safe policy is the
// default, and a receiver on this machine (127.0.0.1) is an explicit exception.
// Production also requires https; development allows plain http.
import type { LookupAddress } from 'node:dns';
import ipaddr from 'ipaddr.js';
import { classifyAddress } from '@svc/shared/address-class';
import { ConfigError } from '@svc/shared/errors';
import { resolveOperatorName, resolveTenantName } from '@svc/shared/tenant-dns';
import { parseCidr, type ParsedCidr } from '../orgs/ip-allowlist.js';

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
  // A name's address is not repeated: a tenant would learn, name by name, what the
  // provider's resolver and hosts file say about its internal hosts.
  const subject = host === address ? address : `${host} resolves to an address that`;
  const article = cls === 'unspecified' ? 'an' : 'a';
  return (
    `${subject} is ${article} ${cls} address; webhooks must reach the public internet ` +
    '(an operator may allow it with SVC_WEBHOOK_ALLOWED_TARGETS)'
  );
}

/** Every address a host name resolves to; injectable so tests can play a rebinding DNS. */
export type Resolver = (host: string) => Promise<LookupAddress[]>;

/**
 * How the sender resolves: a tenant's host by DNS queries of its own (@svc/shared/tenant-dns,
 * so a name whose servers never answer holds nobody else's lookups), a host the operator
 * allowed as the machine resolves it (its hosts file included).
 */
export function webhookResolver(policy: TargetPolicy): Resolver {
  return (host) => (policy.allowedHosts.has(host) ? resolveOperatorName(host) : resolveTenantName(host));
}

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
