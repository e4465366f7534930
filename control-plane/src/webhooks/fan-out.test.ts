import { describe, expect, it } from 'vitest';
import type { StoredEvent } from '../store/records.js';
import { orderingKey, pickSendable, planFanOut, subscriptionWants } from './fan-out.js';
import type { DueDelivery, WebhookSubscriptionRecord } from './webhook-store.js';

const sub = (over: Partial<WebhookSubscriptionRecord> = {}): WebhookSubscriptionRecord => ({
  id: 'wh_a',
  orgId: 'org_1',
  url: 'https://hooks.example.com',
  eventTypes: ['*'],
  description: null,
  status: 'enabled',
  disabledReason: null,
  createdAt: 0,
  fromSeq: 0,
  ...over,
});

const event = (over: Partial<StoredEvent> = {}): StoredEvent => ({
  seq: 1,
  id: 'evt_1',
  type: 'key.revoked',
  orgId: 'org_1',
  subject: 'key_1',
  data: {},
  createdAt: 0,
  ...over,
});

describe('which subscriptions get an event', () => {
  it('same org, wanted type, enabled, created before the event', () => {
    expect(subscriptionWants(sub(), event())).toBe(true);
    expect(subscriptionWants(sub({ eventTypes: ['key.revoked'] }), event())).toBe(true);
    expect(subscriptionWants(sub({ eventTypes: ['instance.lifecycle'] }), event())).toBe(false);
    expect(subscriptionWants(sub({ orgId: 'org_2' }), event())).toBe(false);
    expect(subscriptionWants(sub({ status: 'disabled' }), event())).toBe(false);
    expect(subscriptionWants(sub({ fromSeq: 1 }), event({ seq: 1 }))).toBe(false);
  });

  it('events without an org go to every org', () => {
    const broadcast = event({ orgId: null, type: 'model.deprecation_announced' });
    expect(subscriptionWants(sub({ orgId: 'org_1' }), broadcast)).toBe(true);
    expect(subscriptionWants(sub({ orgId: 'org_2' }), broadcast)).toBe(true);
  });

  it('plans one delivery per (event, interested subscription)', () => {
    let n = 0;
    const planned = planFanOut(
      [event({ seq: 5 }), event({ seq: 6, type: 'instance.lifecycle', subject: 'ins_1' })],
      [sub({ id: 'wh_all' }), sub({ id: 'wh_keys', eventTypes: ['key.revoked'] }), sub({ id: 'wh_other', orgId: 'org_2' })],
      { now: 1000, firstDelayMs: 0, newId: () => `dlv_${++n}` },
    );
    expect(planned.map((d) => [d.subscriptionId, d.eventSeq, d.subject])).toEqual([
      ['wh_all', 5, 'key_1'],
      ['wh_keys', 5, 'key_1'],
      ['wh_all', 6, 'ins_1'],
    ]);
    expect(planned.every((d) => d.nextAttemptAt === 1000 && d.createdAt === 1000)).toBe(true);
  });
});

describe('which due deliveries are sent now', () => {
  const due = (id: string, subscriptionId: string, subject: string | null, orgId = 'org_1'): DueDelivery => ({
    delivery: {
      id,
      subscriptionId,
      eventSeq: 1,
      subject,
      status: 'pending',
      attemptCount: 0,
      failedInRun: 0,
      nextAttemptAt: 0,
      createdAt: 0,
      finishedAt: null,
    },
    subscription: sub({ id: subscriptionId, orgId }),
    event: event({ subject, orgId }),
  });
  const none = { ids: new Set<string>(), chains: new Set<string>(), byOrg: new Map<string, number>() };

  it('one per (subscription, subject) chain; subjects and subscriptions are independent', () => {
    const picked = pickSendable(
      [due('a', 'wh_1', 'ins_1'), due('b', 'wh_1', 'ins_1'), due('c', 'wh_1', 'ins_2'), due('d', 'wh_2', 'ins_1')],
      none,
      10,
      10,
    );
    expect(picked.map((p) => p.delivery.id)).toEqual(['a', 'c', 'd']);
  });

  it('nothing for a chain with an attempt in flight, nor a delivery already in flight', () => {
    const chains = new Set([orderingKey({ subscriptionId: 'wh_1', subject: 'ins_1' })!]);
    const picked = pickSendable([due('b', 'wh_1', 'ins_1'), due('x', 'wh_1', null), due('y', 'wh_1', null)], { ids: new Set(['x']), chains, byOrg: new Map() }, 10, 10);
    expect(picked.map((p) => p.delivery.id)).toEqual(['y']);
  });

  it('events without a subject are not ordered, and capacity bounds the batch', () => {
    const picked = pickSendable([due('a', 'wh_1', null), due('b', 'wh_1', null), due('c', 'wh_1', null)], none, 2, 10);
    expect(picked.map((p) => p.delivery.id)).toEqual(['a', 'b']);
  });

  it('at most `perOrg` in flight for one org, counting those already out: the others\' due deliveries get the rest', () => {
    const flood = ['a1', 'a2', 'a3', 'a4'].map((id) => due(id, 'wh_a', null, 'org_a'));
    const picked = pickSendable([...flood, due('b1', 'wh_b', null, 'org_b'), due('c1', 'wh_c', null, 'org_c')], { ...none, byOrg: new Map([['org_a', 1]]) }, 10, 2);
    expect(picked.map((p) => p.delivery.id)).toEqual(['a1', 'b1', 'c1']);
  });
});
