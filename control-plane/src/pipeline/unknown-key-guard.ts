// Step 2's cost cap. An unknown API key costs a store lookup (on PostgreSQL, a round trip
// to the database every replica shares), and anyone can send one: a well-formed random key
// passes every check that needs no store. So each client gets a bucket of unknown-key
// lookups, UNKNOWN_KEYS_PER_MINUTE refilled evenly (and a burst of as many). Once it is
// empty, a request from that client with a key this process has not seen verify is
// answered 429 without a lookup until the bucket refills. Keys that verified before
// (KeyVerifier.verify tells) are looked up as ever, so one misbehaving client behind a
// shared address does not lock the others out of their working keys. The operator API
// (/ops/v1) takes the same guard for its operator keys (one cap per client across both);
// the agent gateway keeps one of its own for enrollment tokens and node secrets.
//
// A client is counted by its network (@svc/shared's clientNetwork: an IPv6 client by its
// /64, which one host holds whole) and, for IPv6, also by its site (the /48 around it,
// SITE_SHARE times the allowance): one party with a /48 has 65,536 /64s, a fresh bucket
// for every request if only the /64 were counted.
import { ApiError, clientNetwork, clientSite, SITE_SHARE, type Clock } from '@svc/shared';
import { refill, take, type Bucket } from './token-bucket.js';

export const UNKNOWN_KEYS_PER_MINUTE = 60;
/** Clients (and sites) tracked at most; past it, the least recently counted is forgotten. */
const MAX_TRACKED = 10_000;

export class UnknownKeyGuard {
  private readonly networks: BucketTable;
  private readonly sites: BucketTable;

  constructor(
    private readonly clock: Clock,
    private readonly perMinute = UNKNOWN_KEYS_PER_MINUTE,
  ) {
    this.networks = new BucketTable(perMinute);
    this.sites = new BucketTable(perMinute * SITE_SHARE);
  }

  /** Throws rate_limited when `address` may not have one more unknown key looked up now. */
  check(address: string): void {
    const refusal = this.heldBack(address);
    if (!refusal) return;
    throw new ApiError(
      'rate_limited',
      `too many requests with unknown API keys from ${refusal.from} (${refusal.perMinute} per minute); check the key, then retry after ${refusal.seconds}s`,
      { headers: { 'retry-after': String(refusal.seconds) } },
    );
  }

  /** `address` presented a key the store does not know. */
  unknown(address: string): void {
    const now = this.clock.now();
    const network = clientNetwork(address);
    const site = clientSite(address);
    this.networks.take(network, now);
    if (site !== network) this.sites.take(site, now);
  }

  /** Undefined when `address` may have one more unknown credential looked up now; else which count (its network, or its site) is empty, and for how many whole seconds yet. */
  heldBack(address: string): { from: string; perMinute: number; seconds: number } | undefined {
    const now = this.clock.now();
    const network = clientNetwork(address);
    const networkWait = this.networks.secondsUntilToken(network, now);
    if (networkWait > 0) return { from: network, perMinute: this.perMinute, seconds: networkWait };
    const site = clientSite(address);
    if (site === network) return undefined;
    const siteWait = this.sites.secondsUntilToken(site, now);
    return siteWait > 0 ? { from: site, perMinute: this.perMinute * SITE_SHARE, seconds: siteWait } : undefined;
  }
}

/**
 * Buckets by key, bounded. A full table forgets the least recently counted key (likely
 * refilled long since): one at a time, never all at once, which would hand every client,
 * the one being held back included, a fresh burst. O(1) per count, also under a flood.
 */
class BucketTable {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly perMinute: number) {}

  secondsUntilToken(key: string, now: number): number {
    const bucket = this.buckets.get(key);
    if (!bucket) return 0;
    const filled = refill(bucket, this.perMinute, now);
    if (filled.tokens >= 1) return 0;
    return Math.max(1, Math.ceil(((1 - filled.tokens) * 60_000) / this.perMinute / 1000));
  }

  take(key: string, now: number): void {
    const next = take(this.buckets.get(key), this.perMinute, now).bucket;
    // Re-inserted, so the map's order is the order of last use.
    this.buckets.delete(key);
    this.buckets.set(key, next);
    if (this.buckets.size > MAX_TRACKED) this.buckets.delete(this.buckets.keys().next().value!);
  }
}
