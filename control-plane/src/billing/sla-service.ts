// Applies the SLA rules (sla.ts) to what the store recorded: each instance's month so far
// (GET /v1/instances/{id}), and the credit lines issued automatically once a month has
// ended. A credit is issued at most once per instance and month (the store refuses a
// second), so the issuer may run on every replica and after every restart.
import { newId, type Clock } from '@svc/shared';
import type { NodeStore } from '../store/node-store.js';
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

  /** Issues the credit lines owed for `period` (a month that has ended); returns how many were new. */
  async issueCredits(period: BillingPeriod): Promise<number> {
    let issued = 0;
    for (const instance of await this.store.ledger.slaInstances({ from: period.start, to: period.end })) {
      const result = await this.measure(instance, period);
      const amountNanos = slaCreditNanos(result, instance.rateMicros * instance.gpus * NANOS_PER_MICRO);
      if (amountNanos === 0) continue;
      const percent = (result.availability * 100).toFixed(3);
      const added = await this.store.ledger.addCredit({
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
      if (added) issued++;
    }
    return issued;
  }

  private async measure(instance: SlaInstance, period: BillingPeriod): Promise<Availability> {
    const outages = await this.outages(instance);
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

  private async outages(instance: SlaInstance): Promise<Interval[]> {
    if (instance.nodeId === null) return [];
    const events = (await this.store.nodes.listHealthEvents(instance.nodeId, TIMELINE_LIMIT)).reverse();
    return outagesFromTimeline(events, instance.gpuUuids);
  }
}

/** The month before the one `now` is in: the one whose credits are due. */
export function previousPeriod(now: number): BillingPeriod {
  return billingPeriod(billingPeriod(now).start - 1);
}
