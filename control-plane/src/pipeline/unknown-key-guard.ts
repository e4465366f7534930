// Step 2's cost cap. An unknown API key costs a store lookup (on PostgreSQL, a round trip
// to the database every replica shares), and anyone can send one: a well-formed random key
// passes every check that needs no store. So each client address gets a bucket of
// unknown-key lookups, UNKNOWN_KEYS_PER_MINUTE refilled evenly (and a burst of as many).
// Once it is empty, a request from that address with a key this process has not seen
// verify is answered 429 without a lookup until the bucket refills. Keys that verified
// before (KeyVerifier.verify tells) are looked up as ever, so one misbehaving client
// behind a shared address does not lock the others out of their working keys. The operator
// API (/ops/v1) takes the same guard for its operator keys (one cap per address across
// both); the agent gateway keeps one of its own for enrollment tokens and node secrets.
// An IPv6 client is counted by its /64 (@svc/shared's clientNetwork): one host holds that many
// addresses, and would otherwise get a fresh bucket with each.
import { ApiError, clientNetwork, type Clock } from '@svc/shared';
import { refill, take, type Bucket } from './token-bucket.js';

export const UNKNOWN_KEYS_PER_MINUTE = 60;
/** Addresses tracked at most; past it, those whose bucket is full again are forgotten. */
const MAX_TRACKED = 10_000;

export class UnknownKeyGuard {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly clock: Clock,
    private readonly perMinute = UNKNOWN_KEYS_PER_MINUTE,
  ) {}

  /** Throws rate_limited when `address` may not have one more unknown key looked up now. */
  check(address: string): void {
    const seconds = this.retryAfterSeconds(address);
    if (seconds === 0) return;
    throw new ApiError(
      'rate_limited',
      `too many requests with unknown API keys from ${clientNetwork(address)} (${this.perMinute} per minute); check the key, then retry after ${seconds}s`,
      { headers: { 'retry-after': String(seconds) } },
    );
  }

  /** 0 when `address` may have one more unknown credential looked up now; else whole seconds to wait. */
  retryAfterSeconds(address: string): number {
    const bucket = this.buckets.get(clientNetwork(address));
    if (!bucket) return 0;
    const filled = refill(bucket, this.perMinute, this.clock.now());
    if (filled.tokens >= 1) return 0;
    return Math.max(1, Math.ceil(((1 - filled.tokens) * 60_000) / this.perMinute / 1000));
  }

  /** `address` presented a key the store does not know. */
  unknown(address: string): void {
    const now = this.clock.now();
    const network = clientNetwork(address);
    this.buckets.set(network, take(this.buckets.get(network), this.perMinute, now).bucket);
    if (this.buckets.size <= MAX_TRACKED) return;
    for (const [tracked, bucket] of this.buckets) if (refill(bucket, this.perMinute, now).tokens >= this.perMinute) this.buckets.delete(tracked);
    // Still full: every address is mid-burst (a spread attack); start over rather than grow.
    if (this.buckets.size > MAX_TRACKED) this.buckets.clear();
  }
}
