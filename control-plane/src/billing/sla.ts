// Per-instance availability over a billing month and the credit owed when it misses the
// SLA (99.5% on-demand, 99.9% reserved). Pure rules over what the control plane
// recorded: when the instance was ready, how it ended, and the provider-caused outages
// of its node (unreachable) and GPUs (unhealthy).
//
// - The instance "should have been ready" from its first ready moment to its end, within
//   the month. An end the tenant caused (terminate, expiry, its own process exiting)
//   closes the window; an end the provider caused (node lost or forgotten, GPU fault, an
//   operator terminating it)
//   does not: a reservation should have run to its expiry, so the rest is downtime; an
//   on-demand instance is not billed after its end, so only the outage before it counts.
// - An on-demand window also ends where its billing ended: a node that came back without
//   its container has the hours it was away given back, and a credit is a share of what
//   was billed, never of time the tenant did not pay for.
// - Downtime is the union of the provider-caused outages inside the window.
// - Credit: a share of what the instance's hours in the month are worth at its rate.

export type InstanceMode = 'on_demand' | 'reserved';

export interface Interval {
  start: number;
  /** null: still going on. */
  end: number | null;
}

export interface SlaInputs {
  mode: InstanceMode;
  readyAt: number | null;
  /** When it stopped being served (terminated or failed); null while it runs. */
  endedAt: number | null;
  endedByProvider: boolean;
  /** Reservations: when the reserved time ends. */
  expiresAt: number | null;
  /** On-demand, once it has ended: where its billing ended (billing/billing-end.ts); null otherwise. */
  billedUntil: number | null;
  outages: readonly Interval[];
}

export interface Availability {
  /** Milliseconds it should have been ready in the period (so far). */
  expectedMs: number;
  downMs: number;
  /** 0..1; 1 when nothing was expected. */
  availability: number;
  target: number;
  met: boolean;
}

export const SLA_TARGETS: Record<InstanceMode, number> = { on_demand: 0.995, reserved: 0.999 };

/** Credit as a share of the period's value, by how far availability fell (first row that applies). */
export const CREDIT_SCHEDULE: ReadonlyArray<{ below: number; share: number }> = [
  { below: 0.95, share: 1 },
  { below: 0.99, share: 0.3 },
  { below: Number.POSITIVE_INFINITY, share: 0.1 },
];

function clip(interval: Interval, from: number, to: number, now: number): [number, number] | null {
  const start = Math.max(interval.start, from);
  const end = Math.min(interval.end ?? now, to);
  return end > start ? [start, end] : null;
}

/** Total length of the union of intervals, clipped to [from, to). */
export function unionLength(intervals: readonly Interval[], from: number, to: number, now: number): number {
  const spans = intervals
    .map((i) => clip(i, from, to, now))
    .filter((s): s is [number, number] => s !== null)
    .sort((a, b) => a[0] - b[0]);
  let total = 0;
  let cursor = -Infinity;
  for (const [start, end] of spans) {
    const s = Math.max(start, cursor);
    if (end > s) total += end - s;
    cursor = Math.max(cursor, end);
  }
  return total;
}

export function availability(inputs: SlaInputs, period: { start: number; end: number }, now: number): Availability {
  const target = SLA_TARGETS[inputs.mode];
  if (inputs.readyAt === null) return { expectedMs: 0, downMs: 0, availability: 1, target, met: true };
  const from = Math.max(inputs.readyAt, period.start);
  // A reservation should be ready until it expires, not after.
  let lifeEnd = Math.min(
    inputs.endedAt ?? Number.POSITIVE_INFINITY,
    inputs.mode === 'reserved' && inputs.expiresAt !== null ? inputs.expiresAt : Number.POSITIVE_INFINITY,
    // An on-demand instance is owed nothing for time it was not billed for.
    inputs.mode === 'on_demand' && inputs.billedUntil !== null ? inputs.billedUntil : Number.POSITIVE_INFINITY,
  );
  const outages = [...inputs.outages];
  if (inputs.endedAt !== null && inputs.endedByProvider && inputs.mode === 'reserved' && inputs.expiresAt !== null && inputs.expiresAt > inputs.endedAt) {
    lifeEnd = inputs.expiresAt;
    outages.push({ start: inputs.endedAt, end: inputs.expiresAt });
  }
  const to = Math.min(period.end, now, lifeEnd);
  if (to <= from) return { expectedMs: 0, downMs: 0, availability: 1, target, met: true };
  const expectedMs = to - from;
  const downMs = unionLength(outages, from, to, now);
  const value = 1 - downMs / expectedMs;
  return { expectedMs, downMs, availability: value, target, met: value >= target };
}

/**
 * Where an on-demand instance's billing ended: its lines bill `billedSeconds` since `ready`
 * (net of what its end gave back). Null while it runs (accruals lag by up to an hour, and
 * the month-end accrual runs before credits are issued), for reservations (paid up front
 * for their reserved time), and for an instance never ready.
 */
export function onDemandBilledUntil(mode: InstanceMode, readyAt: number | null, endedAt: number | null, billedSeconds: number): number | null {
  if (mode !== 'on_demand' || readyAt === null || endedAt === null) return null;
  return readyAt + billedSeconds * 1000;
}

/** The credit owed, in nano-dollars: a share of `ratePerHourNanos` times the expected hours. */
export function slaCreditNanos(result: Availability, ratePerHourNanos: number): number {
  if (result.met || result.expectedMs === 0) return 0;
  const share = CREDIT_SCHEDULE.find((row) => result.availability < row.below)!.share;
  return Math.round((ratePerHourNanos * result.expectedMs * share) / 3_600_000);
}

/**
 * Provider-caused outages from a node's health timeline (oldest first): the node
 * unreachable (node_down → node_up), or any of `gpuUuids` unhealthy (an event with
 * healthy=false → one with healthy=true).
 */
export function outagesFromTimeline(
  events: ReadonlyArray<{ kind: string; gpuUuid: string | null; healthy: boolean | null; at: number }>,
  gpuUuids: readonly string[],
): Interval[] {
  const out: Interval[] = [];
  let nodeDownSince: number | null = null;
  const gpuDownSince = new Map<string, number>();
  const mine = new Set(gpuUuids);
  for (const e of events) {
    if (e.kind === 'node_down' && nodeDownSince === null) nodeDownSince = e.at;
    else if (e.kind === 'node_up' && nodeDownSince !== null) {
      out.push({ start: nodeDownSince, end: e.at });
      nodeDownSince = null;
    } else if (e.gpuUuid !== null && mine.has(e.gpuUuid) && e.healthy !== null) {
      const since = gpuDownSince.get(e.gpuUuid);
      if (!e.healthy && since === undefined) gpuDownSince.set(e.gpuUuid, e.at);
      else if (e.healthy && since !== undefined) {
        out.push({ start: since, end: e.at });
        gpuDownSince.delete(e.gpuUuid);
      }
    }
  }
  if (nodeDownSince !== null) out.push({ start: nodeDownSince, end: null });
  for (const since of gpuDownSince.values()) out.push({ start: since, end: null });
  return out;
}
