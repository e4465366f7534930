// Leases of a hot key's shared allowance (PostgreSQL only). A replica that admits a key
// often takes a small block of its request slots and tokens from the shared GCRA rows in
// one step, then admits that key's requests from the block in memory: no database round
// trip on the request's path. The rows stay the one allowance of the fleet, so together
// the replicas never admit more than the limit:
//   - a block is at most 1/64 of a minute's limit, and granted only while a quarter of the
//     bucket (15 s of refill) stays in the rows after it, so near the limit every admission
//     is the exact per-request step again and a burst is cut at the limit, not before it;
//   - what a block does not use goes back to the rows a second after its last grant;
//   - a key is leased only once this replica admitted it HOT_ADMISSIONS times within a
//     second: a key used now and then keeps exact per-request steps (and exact headers).
// The remaining-count headers of a leased admission are the rows' count at the grant plus
// what this replica still holds: other replicas' unused blocks show as spent, so a client
// is told a little less than it has, never more. Pure functions and a plain record.
import { emissionInterval, gcraResult, MINUTE_MS } from './gcra.js';
import type { TakeResult } from './token-bucket.js';

/** A block is at most this fraction of a minute's limit. */
export const LEASE_FRACTION = 64;
/** ...and at most this many request slots (a block of a high limit lasts about a second at 64 requests in flight). */
export const MAX_LEASE_REQUESTS = 256;
/** Refill time that must stay in the rows after a grant: a quarter of the bucket. */
export const LEASE_HEADROOM_MS = MINUTE_MS / 4;
/** Unused units go back to the rows this long after the last grant. */
export const LEASE_MS = 1_000;
/** Exact admissions of one key on this replica, within HOT_WINDOW_MS, before it is leased. */
export const HOT_ADMISSIONS = 8;
export const HOT_WINDOW_MS = 1_000;
/** A key refused a lease (too close to its limit) asks again only after this long. */
export const LEASE_RETRY_MS = 250;

export interface Lease {
  requestLimit: number;
  tokenLimit: number;
  /** Units held and not yet spent (tokens may fall below zero: usage above an estimate). */
  requests: number;
  tokens: number;
  /** Size of the last grant: a new one is asked for once half of it is spent. */
  grantRequests: number;
  grantTokens: number;
  /** The rows' tat right after the last grant (every replica's steps included). */
  requestTat: number;
  tokenTat: number;
  expiresAt: number;
}

/** What a grant asks for: null when a block would not hold even this one request's tokens. */
export function leaseSize(requestLimit: number, tokenLimit: number, estimate: number): { requests: number; tokens: number } | null {
  const requests = Math.max(1, Math.min(MAX_LEASE_REQUESTS, Math.floor(requestLimit / LEASE_FRACTION)));
  const tokens = Math.min(Math.floor(tokenLimit / LEASE_FRACTION), requests * Math.max(1, estimate));
  return tokens >= estimate ? { requests, tokens } : null;
}

/** A granted block, added to what the replica still holds of the key (if its limits are the same). */
export function grant(
  held: Lease | undefined,
  size: { requests: number; tokens: number },
  limits: { requestLimit: number; tokenLimit: number },
  tats: { requestTat: number; tokenTat: number },
  now: number,
): Lease {
  const keep = held && held.requestLimit === limits.requestLimit && held.tokenLimit === limits.tokenLimit ? held : undefined;
  return {
    ...limits,
    requests: (keep?.requests ?? 0) + size.requests,
    tokens: (keep?.tokens ?? 0) + size.tokens,
    grantRequests: size.requests,
    grantTokens: size.tokens,
    ...tats,
    expiresAt: now + LEASE_MS,
  };
}

export interface LeasedAdmission {
  request: TakeResult;
  tokens: TakeResult;
  /** Half the block is spent: ask for the next one now, before the requests need it. */
  refill: boolean;
}

/**
 * One request admitted from the lease (its slot and its estimate taken from `lease`), or
 * null when the lease cannot: absent, expired, of other limits, or short of either unit.
 */
export function admitFromLease(lease: Lease | undefined, requestLimit: number, tokenLimit: number, estimate: number, now: number): LeasedAdmission | null {
  if (!lease || lease.expiresAt <= now || lease.requestLimit !== requestLimit || lease.tokenLimit !== tokenLimit) return null;
  if (lease.requests < 1 || lease.tokens < estimate) return null;
  lease.requests -= 1;
  lease.tokens -= estimate;
  return {
    request: leasedResult(lease.requestTat, lease.requests, requestLimit, now, 1),
    tokens: leasedResult(lease.tokenTat, lease.tokens, tokenLimit, now, estimate),
    refill: lease.requests * 2 < lease.grantRequests || lease.tokens * 2 < lease.grantTokens,
  };
}

/** The headers as if the units still held went back to the row now. */
function leasedResult(tat: number, held: number, limit: number, now: number, cost: number): TakeResult {
  return gcraResult(tat - Math.max(0, held) * emissionInterval(limit), true, limit, now, cost);
}

/** Counts a key's exact admissions on this replica; true once it is hot enough to lease. */
export interface Heat {
  since: number;
  count: number;
}

export function warm(heat: Heat | undefined, now: number): { heat: Heat; hot: boolean } {
  const fresh = !heat || now - heat.since > HOT_WINDOW_MS;
  const next = fresh ? { since: now, count: 1 } : { since: heat.since, count: heat.count + 1 };
  return { heat: next, hot: next.count >= HOT_ADMISSIONS };
}
