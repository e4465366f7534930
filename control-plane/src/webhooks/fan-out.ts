// Which subscriptions an event goes to, and which due deliveries may be sent now
// without breaking the per-subject order. Pure: the worker and the store call these.
import type { StoredEvent } from '../store/records.js';
import { ALL_EVENT_TYPES } from './event-types.js';
import type { DueDelivery, NewDelivery, WebhookSubscriptionRecord } from './webhook-store.js';

/**
 * An event reaches a subscription when it is enabled, was created before the event,
 * belongs to the event's org (events without an org, such as model deprecations, are
 * for every org) and wants the event's type.
 */
export function subscriptionWants(subscription: WebhookSubscriptionRecord, event: StoredEvent): boolean {
  if (subscription.status !== 'enabled') return false;
  if (event.seq <= subscription.fromSeq) return false;
  if (event.orgId !== null && event.orgId !== subscription.orgId) return false;
  return subscription.eventTypes.includes(ALL_EVENT_TYPES) || subscription.eventTypes.includes(event.type);
}

/** One delivery per (event, interested subscription), first attempt `firstDelayMs` after `now`. */
export function planFanOut(
  events: readonly StoredEvent[],
  subscriptions: readonly WebhookSubscriptionRecord[],
  options: { now: number; firstDelayMs: number; newId: () => string },
): NewDelivery[] {
  return events.flatMap((event) =>
    subscriptions
      .filter((subscription) => subscriptionWants(subscription, event))
      .map((subscription) => ({
        id: options.newId(),
        subscriptionId: subscription.id,
        eventSeq: event.seq,
        subject: event.subject,
        nextAttemptAt: options.now + options.firstDelayMs,
        createdAt: options.now,
      })),
  );
}

/** Deliveries that must go one at a time, in event order: same subscription, same subject. */
export function orderingKey(delivery: { subscriptionId: string; subject: string | null }): string | null {
  return delivery.subject === null ? null : `${delivery.subscriptionId}\u0000${delivery.subject}`;
}

/**
 * From due chain heads (oldest first), those to send now: not already in flight, at
 * most one per ordering chain, none for a chain with a send in flight (its next event
 * must wait for the outcome), at most `perOrg` in flight for one organization, and no
 * more than `capacity`.
 *
 * Slots go round-robin across organizations, least loaded first: each pick goes to the
 * org with the fewest attempts in flight (those already out plus those picked here),
 * the oldest head breaking ties. So an org with nothing in flight is never behind another
 * org's backlog: slow or silent endpoints, each attempt holding its slot until the
 * timeout, cost their own org its turns, not everyone's. Returned in `due`'s order.
 */
export function pickSendable(
  due: readonly DueDelivery[],
  inFlight: { ids: ReadonlySet<string>; chains: ReadonlySet<string>; byOrg: ReadonlyMap<string, number> },
  capacity: number,
  perOrg: number,
): DueDelivery[] {
  const chains = new Set(inFlight.chains);
  const load = new Map(inFlight.byOrg);
  const rank = new Map<DueDelivery, number>();
  // Each org's candidates, oldest first; orgs in the order of their oldest candidate.
  const queues = new Map<string, DueDelivery[]>();
  due.forEach((candidate, i) => {
    if (inFlight.ids.has(candidate.delivery.id)) return;
    rank.set(candidate, i);
    const org = candidate.subscription.orgId;
    const queue = queues.get(org);
    if (queue) queue.push(candidate);
    else queues.set(org, [candidate]);
  });
  const blocked = (candidate: DueDelivery): boolean => {
    const key = orderingKey(candidate.delivery);
    return key !== null && chains.has(key);
  };
  const picked = new Set<DueDelivery>();
  while (picked.size < capacity) {
    let best: { org: string; load: number; head: DueDelivery } | undefined;
    for (const [org, queue] of queues) {
      while (queue.length > 0 && blocked(queue[0]!)) queue.shift();
      const orgLoad = load.get(org) ?? 0;
      if (queue.length === 0 || orgLoad >= perOrg) {
        queues.delete(org);
        continue;
      }
      const head = queue[0]!;
      if (!best || orgLoad < best.load || (orgLoad === best.load && rank.get(head)! < rank.get(best.head)!)) best = { org, load: orgLoad, head };
    }
    if (!best) break;
    queues.get(best.org)!.shift();
    const key = orderingKey(best.head.delivery);
    if (key !== null) chains.add(key);
    load.set(best.org, best.load + 1);
    picked.add(best.head);
  }
  return due.filter((candidate) => picked.has(candidate));
}
