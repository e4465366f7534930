// Which peers may tell us a client's address in X-Forwarded-For. The header is written
// by whoever sends the request, so only hops we run are believed: the source address is
// the right-most address in socket + X-Forwarded-For that is not a trusted proxy
// (proxy-addr's rule, which fastify applies to a list). `true` (believe everyone) let any
// client name its own address and walk past the IP allowlist; it is refused.
import { ConfigError } from '@svc/shared';
import { isValidCidr } from '../orgs/ip-allowlist.js';

/** proxy-addr's names for ranges, accepted as they are. */
const RANGE_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * The setting's entries as fastify's `trustProxy` list; throws ConfigError for an entry
 * that is neither a CIDR, an address nor a range name. `false` alone (the old boolean's
 * default) means no proxy.
 */
export function trustedProxies(entries: readonly string[]): string[] {
  const list = entries.map((e) => e.trim()).filter((e) => e !== '');
  if (list.length === 1 && list[0]!.toLowerCase() === 'false') return [];
  for (const entry of list) {
    if (entry.toLowerCase() === 'true') {
      throw new ConfigError(
        'invalid setting SVC_TRUST_PROXY: "true" would let every client choose its source address with X-Forwarded-For; ' +
          'list the CIDRs of your load balancers instead (e.g. SVC_TRUST_PROXY=10.0.0.0/8)',
      );
    }
    if (!RANGE_NAMES.has(entry) && !isValidCidr(entry)) {
      throw new ConfigError(`invalid setting SVC_TRUST_PROXY: "${entry}" is not a CIDR, an address, loopback, linklocal or uniquelocal`);
    }
  }
  return list;
}
