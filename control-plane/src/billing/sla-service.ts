// Applies the SLA rules (sla.ts) to what the store recorded: each instance's month so far
// (GET /v1/instances/{id}), and the credit lines issued automatically once a month has
// ended. A credit is issued at most once per instance and month (the store refuses a
// second), so the issuer may run on every replica and after every restart.
//
// A credit is a share of what the month was billed, so it waits until that is known. An
// on-demand instance whose node is away at the month end may yet have the hours it was
// away given back (its node comes back without the container, or is forgotten) or keep
// them (it comes back with it): its credit is held back and issued by issueHeldCredits
// once the instance has ended or its node is back with it.
import { newId, type Clock } from '@svc/shared';
import type { NodeStore, StoredHealthEvent } from '../store/node-store.js';
import type { LedgerStore, SlaInstance } from '../store/ledger-store.js';
import { NANOS_PER_MICRO } from './ledger.js';
import { billingPeriod, type BillingPeriod } from './periods.js';
import { availability, onDemandBilledUntil, outagesFromTimeline, slaCreditNanos, type Availability, type Interval } from './sla.js';

/** A provider-caused end shows as the instance leaving `ready` for its end, unasked, during (or just after) an outage of its node or GPUs. */
const END_AFTER_OUTAGE_MS = 60_000;
const TIMELINE_LIMIT = 10_000;

export interface InstanceSla extends Availability {
  period: string;
}

export class SlaService {
  constructor(
    private readonly store: { ledger: LedgerStore; nodes: NodeStore },
    private readonly clock: Clock,
  ) {}

  /** The instance's availability in the current month so far; null for an unknown id. */
  async forInstance(instanceId: string): Promise<InstanceSla | null> {
    const [instance] = await this.store.ledger.slaInstances({ instanceId });
    if (!instance) return null;
    const period = billingPeriod(this.clock.now());
    return { period: period.id, ...(await this.measure(instance, period)) };
  }

  /**
   * Issues the credit lines owed for `period` (a month that has ended); returns how many
   * were new. An instance whose bill for the month is not settled yet (billSettled) is
   * held back for issueHeldCredits.
   */
  async issueCredits(period: BillingPeriod): Promise<number> {
    let issued = 0;
    const now = this.clock.now();
    const timelines = new Map<string, Promise<StoredHealthEvent[]>>();
    for (const instance of await this.store.ledger.slaInstances({ from: period.start, to: period.end })) {
      const events = await this.timeline(instance, timelines);
      if (!billSettled(instance, outagesFromTimeline(events, []), now)) continue;
      if (await this.issue(instance, period, outagesFromTimeline(events, instance.gpuUuids))) issued++;
    }
    return issued;
  }

  /**
   * Issues the credits issueCredits held back, for instances whose bill has settled since:
   * on-demand instances of the month before the current one (running, or ended since its
   * start), for each earlier month of theirs that may have been held (mayHaveBeenHeld).
   * Safe to repeat: the store keeps one credit per instance and month. Run by the billing
   * tick every hour; returns how many were new.
   */
  async issueHeldCredits(): Promise<number> {
    let issued = 0;
    const now = this.clock.now();
    const last = previousPeriod(now);
    const timelines = new Map<string, Promise<StoredHealthEvent[]>>();
    for (const instance of await this.store.ledger.slaInstances({ from: last.start, to: last.end })) {
      if (instance.mode !== 'on_demand' || instance.readyAt === null) continue;
      const events = await this.timeline(instance, timelines);
      const nodeOutages = outagesFromTimeline(events, []);
      if (!billSettled(instance, nodeOutages, now)) continue;
      for (let period = billingPeriod(instance.readyAt); period.end <= last.end; period = billingPeriod(period.end)) {
        if (!mayHaveBeenHeld(instance, nodeOutages, period)) continue;
        if (await this.issue(instance, period, outagesFromTimeline(events, instance.gpuUuids))) issued++;
      }
    }
    return issued;
  }

  /** Issues `instance`'s credit for `period` if one is owed; true when it is new. */
  private async issue(instance: SlaInstance, period: BillingPeriod, outages: Interval[]): Promise<boolean> {
    const result = this.measureWith(instance, period, outages);
    const amountNanos = slaCreditNanos(result, instance.rateMicros * instance.gpus * NANOS_PER_MICRO);
    if (amountNanos === 0) return false;
    const percent = (result.availability * 100).toFixed(3);
    return this.store.ledger.addCredit({
      id: newId('credit'),
      orgId: instance.orgId,
      kind: 'sla_credit',
      amountNanos,
      instanceId: instance.id,
      period: period.id,
      description: `SLA credit: instance ${instance.id} was available ${percent}% in ${period.id} (target ${(result.target * 100).toFixed(1)}%)`,
      createdBy: null,
      createdAt: this.clock.now(),
    });
  }

  private async measure(instance: SlaInstance, period: BillingPeriod): Promise<Availability> {
    return this.measureWith(instance, period, outagesFromTimeline(await this.timeline(instance, new Map()), instance.gpuUuids));
  }

  private measureWith(instance: SlaInstance, period: BillingPeriod, outages: Interval[]): Availability {
    // The provider ended it: an operator terminated it, or it left ready for its end,
    // unasked, while its node or GPU was down (or just after: its node came back without it).
    const leftAt = instance.leftReadyAt;
    const endedByProvider =
      instance.endedAt !== null &&
      (instance.terminatedByOperator ||
        (instance.leftReadyUnasked && leftAt !== null && outages.some((o) => leftAt >= o.start && leftAt <= (o.end ?? Infinity) + END_AFTER_OUTAGE_MS)));
    return availability(
      {
        mode: instance.mode,
        readyAt: instance.readyAt,
        endedAt: instance.endedAt,
        endedByProvider,
        expiresAt: instance.expiresAt,
        billedUntil: onDemandBilledUntil(instance.mode, instance.readyAt, instance.endedAt, instance.billedSeconds),
        outages,
      },
      period,
      this.clock.now(),
    );
  }

  /** The health timeline of the instance's node, oldest first; read once per node and call (`cache`). */
  private async timeline(instance: SlaInstance, cache: Map<string, Promise<StoredHealthEvent[]>>): Promise<StoredHealthEvent[]> {
    const nodeId = instance.nodeId;
    if (nodeId === null) return [];
    let events = cache.get(nodeId);
    if (!events) {
      events = this.store.nodes.listHealthEvents(nodeId, TIMELINE_LIMIT).then((newestFirst) => newestFirst.reverse());
      cache.set(nodeId, events);
    }
    return events;
  }
}

/**
 * Whether what an instance was billed up to `now` is final, so its credit may be issued.
 * Reservations are paid up front, and an ended instance's end billed it: settled. A
 * running on-demand instance is settled while `ready` with its node here: not while its
 * node is away (`nodeOutages` still open) or back less than a minute ago (its Hello may
 * not be handled yet), nor while draining; until then its end may give back hours
 * already billed (billing/billing-end.ts).
 */
export function billSettled(instance: Pick<SlaInstance, 'mode' | 'endedAt' | 'status'>, nodeOutages: readonly Interval[], now: number): boolean {
  if (instance.mode !== 'on_demand' || instance.endedAt !== null) return true;
  if (instance.status !== 'ready') return false;
  return !nodeOutages.some((o) => o.end === null || o.end > now - END_AFTER_OUTAGE_MS);
}

/**
 * Whether issueCredits may have held back an on-demand instance's credit for `period`: it
 * was still running at the month's end, and ended within the next month or its node was
 * away at some moment from just before the month's end to the next month's end.
 */
export function mayHaveBeenHeld(instance: Pick<SlaInstance, 'mode' | 'endedAt'>, nodeOutages: readonly Interval[], period: BillingPeriod): boolean {
  if (instance.mode !== 'on_demand' || (instance.endedAt !== null && instance.endedAt <= period.end)) return false;
  const next = billingPeriod(period.end);
  if (instance.endedAt !== null && instance.endedAt < next.end) return true;
  return nodeOutages.some((o) => o.start < next.end && (o.end ?? Number.POSITIVE_INFINITY) > period.end - END_AFTER_OUTAGE_MS);
}

/** The month before the one `now` is in: the one whose credits are due. */
export function previousPeriod(now: number): BillingPeriod {
  return billingPeriod(billingPeriod(now).start - 1);
}
