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
 * must wait for the outcome), at most `perOrg` in flight for one organization (so one
 * org's slow or silent endpoints, each attempt holding its slot until the timeout,
 * cannot hold every slot while other orgs' deliveries are due), and no more than
 * `capacity`.
 */
export function pickSendable(
  due: readonly DueDelivery[],
  inFlight: { ids: ReadonlySet<string>; chains: ReadonlySet<string>; byOrg: ReadonlyMap<string, number> },
  capacity: number,
  perOrg: number,
): DueDelivery[] {
  const picked: DueDelivery[] = [];
  const chains = new Set(inFlight.chains);
  const byOrg = new Map(inFlight.byOrg);
  for (const candidate of due) {
    if (picked.length >= capacity) break;
    if (inFlight.ids.has(candidate.delivery.id)) continue;
    const org = candidate.subscription.orgId;
    const orgs = byOrg.get(org) ?? 0;
    if (orgs >= perOrg) continue;
    const key = orderingKey(candidate.delivery);
    if (key !== null) {
      if (chains.has(key)) continue;
      chains.add(key);
    }
    byOrg.set(org, orgs + 1);
    picked.push(candidate);
  }
  return picked;
}
