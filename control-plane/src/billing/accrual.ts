// On-demand compute is billed in the period it runs, not only when the instance ends:
// while an instance is ready or draining, its seconds are charged hourly (and at every
// month's end, before that month's invoices are finalized) up to the boundary, and its
// end charges only what is left. Pure arithmetic; the store applies it inside the
// transaction that writes the line (store/*/instance-store.ts), so an accrual and a
// termination never bill the same second twice.
//
// An instance keeps one number, `billed_seconds`: how many of its seconds since `ready`
// its on_demand lines cover. A line takes it from `billed` to `total` and costs the
// difference of the cumulative prices, so however many lines an instance has they sum
// to exactly the price of its whole run at one charge (no rounding drift), and the 60 s
// minimum applies to that whole run (its end), never to a single line.
import type { ChargeRecord } from '../instances/instance-record.js';
import { ON_DEMAND_MINIMUM_SECONDS } from './pricing.js';
import { billingPeriod } from './periods.js';

/** Running instances are billed up to each full hour. */
export const ACCRUAL_STEP_MS = 3_600_000;

/** Whole seconds (rounded up) an instance ready at `readyAt` has run by `at`; never negative. */
export function secondsRun(readyAt: number, at: number): number {
  return Math.ceil(Math.max(0, at - readyAt) / 1000);
}

/** What an on-demand run of `seconds` costs at one charge: per second, rounded to the micro-dollar once. */
export function onDemandPriceMicros(rateMicrosPerGpuHour: number, gpus: number, seconds: number): number {
  return Math.round((rateMicrosPerGpuHour * gpus * seconds) / 3600);
}

/** Seconds billed for a whole run that ended at `end`: per second, at least 60. */
export function finalSeconds(readyAt: number, end: number): number {
  return Math.max(ON_DEMAND_MINIMUM_SECONDS, secondsRun(readyAt, end));
}

/**
 * The boundaries to bill running instances up to at `now`: the start of the current month
 * (closing the month that ended, even when the last hourly run was long before it) and
 * the start of the current hour. Each is dated 1 ms before itself, in the hour it closes.
 */
export function accrualBoundaries(now: number): number[] {
  const month = billingPeriod(now).start;
  const hour = Math.floor(now / ACCRUAL_STEP_MS) * ACCRUAL_STEP_MS;
  return hour === month ? [month] : [month, hour];
}

/** The instance as a line is priced: its rate, GPUs and SKU, and what it was billed already. */
export interface OnDemandState {
  orgId: string;
  instanceId: string;
  sku: string;
  gpus: number;
  rateMicros: number;
  billedSeconds: number;
}

/**
 * The on_demand line that takes an instance from `billedSeconds` to `totalSeconds`, or
 * null when there is nothing to bill. `accrual`: a running instance billed up to a
 * boundary (only forward); otherwise its end, which may also give back seconds that
 * accruals billed past when the container really stopped (a node that was away reported
 * an earlier stop): a negative line, as money comes back in an append-only ledger.
 */
export function onDemandLine(
  state: OnDemandState,
  totalSeconds: number,
  line: { id: string; createdAt: number; accrual: boolean },
): ChargeRecord | null {
  const seconds = totalSeconds - state.billedSeconds;
  if (seconds === 0 || (line.accrual && seconds < 0)) return null;
  const amountMicros = onDemandPriceMicros(state.rateMicros, state.gpus, totalSeconds) - onDemandPriceMicros(state.rateMicros, state.gpus, state.billedSeconds);
  const what = `${state.gpus} x ${state.sku}`;
  const description = line.accrual
    ? `${seconds} s on demand of ${what}, running, billed to ${new Date(line.createdAt + 1).toISOString()}`
    : seconds > 0
      ? `${seconds} s on demand of ${what}`
      : `${-seconds} s on demand of ${what} given back: billed past when it stopped`;
  return { id: line.id, orgId: state.orgId, instanceId: state.instanceId, kind: 'on_demand', amountMicros, description, createdAt: line.createdAt };
}
