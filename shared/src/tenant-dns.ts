// Resolving a host name a tenant chose (a webhook's URL, an image's registry, every host a
// pull reaches). Node's `lookup` is the host's `getaddrinfo`, which libuv runs on its thread
// pool, at most two at once, each waiting as long as the name's servers take: measured, a
// name whose server never answers held one for 10 s. A tenant naming such hosts would keep
// that queue full, and everyone else's lookups behind it (another tenant's webhook or
// registry, the control plane's own database host) for as long as it went on. So a
// tenant's name is resolved with DNS queries of our own (c-ares), which run side by side on
// the event loop and give up within TIMEOUT_MS times TRIES (c-ares doubles the wait on a
// retry: about 6 s). A name in the machine's hosts file (`localhost` among them) is
// answered from it, as `getaddrinfo` would, since DNS does not know it.
import type { LookupAddress } from 'node:dns';
import { lookup, Resolver } from 'node:dns/promises';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';

const TIMEOUT_MS = 2_000;
const TRIES = 2;

/** The IPv4 and IPv6 addresses of `host`; rejects (ENOTFOUND, ETIMEOUT, ...) when it has none. */
export async function resolveTenantName(host: string, hostsFile = '/etc/hosts'): Promise<LookupAddress[]> {
  const local = hostsFileAddresses(await readFile(hostsFile, 'utf8').catch(() => ''), host);
  if (local.length > 0) return local;
  // A resolver per name reads /etc/resolv.conf as it is now (one built at start would not).
  const resolver = new Resolver({ timeout: TIMEOUT_MS, tries: TRIES });
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
  const found: LookupAddress[] = [
    ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : []),
    ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : []),
  ];
  if (found.length > 0) return found;
  const reasons = [v4, v6].flatMap((r) => (r.status === 'rejected' ? [r.reason as NodeJS.ErrnoException] : []));
  // "No such name" or "no such record" says least: a timeout or a refusal is the reason to give.
  throw reasons.find((e) => e.code !== 'ENOTFOUND' && e.code !== 'ENODATA') ?? reasons[0] ?? Object.assign(new Error(`${host} has no address`), { code: 'ENOTFOUND' });
}

/** A name the operator listed, resolved as the machine resolves it (its hosts file, its resolver's order). */
export const resolveOperatorName = (host: string): Promise<LookupAddress[]> => lookup(host, { all: true, verbatim: true });

/** The addresses a hosts file gives `host` (`address name alias...` lines, `#` comments). */
export function hostsFileAddresses(text: string, host: string): LookupAddress[] {
  const name = host.toLowerCase();
  const found: LookupAddress[] = [];
  for (const line of text.split('\n')) {
    const [address = '', ...names] = line.replace(/#.*/, '').trim().split(/\s+/);
    const family = isIP(address);
    if (family !== 0 && names.some((n) => n.toLowerCase() === name)) found.push({ address, family });
  }
  return found;
}

