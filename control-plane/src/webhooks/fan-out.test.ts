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

  // Slots go round-robin across orgs, least loaded first: an org with nothing in flight is
  // never behind another org's backlog. Each row: the due heads (oldest first, as
  // `${org}${n}`), attempts in flight per org, capacity, perOrg, and what is picked.
  const orgOf = (id: string) => `org_${id[0]}`;
  const heads = (ids: string[]) => ids.map((id) => due(id, `wh_${id[0]}`, null, orgOf(id)));
  it.each([
    {
      name: 'four orgs with silent endpoints hold 15 of 16 slots and an older backlog: the freed slot goes to the idle org',
      due: ['a1', 'a2', 'b1', 'b2', 'c1', 'c2', 'd1', 'd2', 'v1'],
      byOrg: { org_a: 3, org_b: 4, org_c: 4, org_d: 4 },
      capacity: 1,
      perOrg: 4,
      picked: ['v1'],
    },
    {
      name: 'idle orgs: one each, oldest first, before anyone gets a second',
      due: ['a1', 'a2', 'a3', 'b1', 'c1'],
      byOrg: {},
      capacity: 3,
      perOrg: 4,
      picked: ['a1', 'b1', 'c1'],
    },
    {
      name: 'then fill: the remaining slots go round again',
      due: ['a1', 'a2', 'a3', 'b1', 'c1'],
      byOrg: {},
      capacity: 5,
      perOrg: 4,
      picked: ['a1', 'a2', 'a3', 'b1', 'c1'],
    },
    {
      name: 'equally idle orgs: the older head wins the last slot',
      due: ['b1', 'a1', 'b2'],
      byOrg: {},
      capacity: 1,
      perOrg: 4,
      picked: ['b1'],
    },
    {
      name: 'the less loaded org first, whatever the age',
      due: ['a1', 'a2', 'b1'],
      byOrg: { org_a: 2, org_b: 1 },
      capacity: 1,
      perOrg: 4,
      picked: ['b1'],
    },
    {
      name: 'loads even out: 2 in flight against 0 takes two slots to match',
      due: ['a1', 'a2', 'b1', 'b2', 'b3'],
      byOrg: { org_a: 2 },
      capacity: 3,
      perOrg: 4,
      picked: ['a1', 'b1', 'b2'],
    },
    {
      name: 'an org at its share gets nothing, even with free slots',
      due: ['a1', 'b1'],
      byOrg: { org_a: 4 },
      capacity: 5,
      perOrg: 4,
      picked: ['b1'],
    },
  ])('$name', ({ due: ids, byOrg, capacity, perOrg, picked }) => {
    const result = pickSendable(heads(ids), { ...none, byOrg: new Map(Object.entries(byOrg)) }, capacity, perOrg);
    expect(result.map((p) => p.delivery.id)).toEqual(picked);
  });

  it('a blocked chain head does not cost its org its turn: the next head of that org goes', () => {
    const chains = new Set([orderingKey({ subscriptionId: 'wh_a', subject: 'ins_1' })!]);
    const picked = pickSendable(
      [due('a1', 'wh_a', 'ins_1', 'org_a'), due('a2', 'wh_a', 'ins_2', 'org_a'), due('b1', 'wh_b', null, 'org_b')],
      { ...none, chains },
      2,
      4,
    );
    expect(picked.map((p) => p.delivery.id)).toEqual(['a2', 'b1']);
  });
});
