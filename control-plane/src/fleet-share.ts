// Limits the whole fleet of control-plane processes shares without asking the database on
// each request: a model-server replica's in-flight slots (and so each organization's share
// of them). Every process on one database takes an even part, as Envoy's circuit breakers
// are sized per proxy; the parts add up to the limit exactly, the remainder going to the
// first processes in a stable order. This needs a load balancer that spreads requests
// evenly (round robin or least connections), which the shipped HAProxy configuration does.

/** How many control-plane processes share the database now, and this one's place among them. */
export interface Membership {
  /** Processes present, this one included; at least 1. */
  count: number;
  /** 0-based, stable while the set of processes stays the same. */
  rank: number;
}

export const ALONE: Membership = { count: 1, rank: 0 };

/**
 * This process's part of `limit`. At least 1 even when there are more processes than
 * units: a process that could never send a request anywhere would refuse all its traffic,
 * which is worse than a limit overrun by a few.
 */
export function partOf(limit: number, { count, rank }: Membership): number {
  if (count <= 1) return limit;
  const base = Math.floor(limit / count);
  const extra = rank < limit % count ? 1 : 0;
  return Math.max(1, base + extra);
}

/**
 * A process's view of the fleet from the seats taken (store/postgres/advisory-leadership.ts:
 * the sessions holding the shared seat lock, in a stable order) and its own seat.
 */
export function membershipOf(seats: readonly number[], mine: number): Membership {
  const rank = seats.indexOf(mine);
  // Not seated (yet): it counts itself in, last, so its part is never larger than it will be.
  return rank === -1 ? { count: seats.length + 1, rank: seats.length } : { count: seats.length, rank };
}
