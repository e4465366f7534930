import { describe, expect, it } from 'vitest';
import { isOverdue, isSchedulable, nextNodeStatus, statusLabel, storeVerdict, wasStalled, type StoreVerdict } from './node-status.js';

describe('nextNodeStatus', () => {
  it.each([
    ['enrolled', 'session_started', 'ready'],
    ['enrolled', 'deadline_missed', 'enrolled'],
    ['ready', 'deadline_missed', 'unreachable'],
    ['ready', 'message_received', 'ready'],
    ['unreachable', 'session_started', 'ready'],
    ['unreachable', 'message_received', 'ready'],
    ['unreachable', 'deadline_missed', 'unreachable'],
  ] as const)('%s + %s -> %s', (status, event, expected) => {
    expect(nextNodeStatus(status, event)).toBe(expected);
  });
});

describe('isOverdue', () => {
  it('is overdue only strictly past the deadline, and never for a node never seen', () => {
    expect(isOverdue(1000, 1000 + 15_000, 15_000)).toBe(false);
    expect(isOverdue(1000, 1000 + 15_001, 15_000)).toBe(true);
    expect(isOverdue(null, 10 ** 12, 15_000)).toBe(false);
  });

  it.each([
    // last seen, watching since, now, overdue: silence counts from the later of the two
    [1_000, null, 16_001, true],
    [1_000, 0, 16_001, true], // a node seen after this process started: its own silence
    [1_000, 100_000, 100_500, false], // restarted 99 s later: not the node's silence
    [1_000, 100_000, 115_000, false], // a full deadline from the restart, to the millisecond
    [1_000, 100_000, 115_001, true], // and not a moment longer
    [120_000, 100_000, 130_000, false], // heard from again after the restart
  ])('last seen %i, watching since %s, at %i: overdue %s', (lastSeen, since, now, overdue) => {
    expect(isOverdue(lastSeen, now, 15_000, since)).toBe(overdue);
  });
});

describe('isSchedulable and statusLabel', () => {
  const ready = { status: 'ready', cordoned: false, draining: false } as const;
  it('only ready, uncordoned, undrained nodes take new work', () => {
    expect(isSchedulable(ready)).toBe(true);
    expect(isSchedulable({ ...ready, cordoned: true })).toBe(false);
    expect(isSchedulable({ ...ready, draining: true })).toBe(false);
    expect(isSchedulable({ ...ready, status: 'unreachable' })).toBe(false);
    expect(isSchedulable({ ...ready, status: 'enrolled' })).toBe(false);
  });
  it('takes no new work on a node whose disk is under pressure; older agents send no such fact', () => {
    expect(isSchedulable({ ...ready, hostFacts: { disk_pressure: true } })).toBe(false);
    expect(isSchedulable({ ...ready, hostFacts: { disk_pressure: false } })).toBe(true);
    expect(isSchedulable({ ...ready, hostFacts: { hostname: 'gpu-1' } })).toBe(true);
    expect(isSchedulable({ ...ready, hostFacts: null })).toBe(true);
    expect(statusLabel({ ...ready, hostFacts: { disk_pressure: true } })).toBe('ready,disk-pressure');
    expect(statusLabel({ ...ready, cordoned: true, hostFacts: { disk_pressure: true } })).toBe('ready,cordoned,disk-pressure');
  });
  it('labels flags beside the status, draining over cordoned', () => {
    expect(statusLabel(ready)).toBe('ready');
    expect(statusLabel({ ...ready, cordoned: true })).toBe('ready,cordoned');
    expect(statusLabel({ ...ready, status: 'unreachable', cordoned: true, draining: true })).toBe('unreachable,draining');
  });
});

describe('wasStalled', () => {
  it.each([
    [1_000, 15_000, false], // a sweep on time
    [7_500, 15_000, false], // half a deadline late: still the nodes' silence
    [7_501, 15_000, true],
    [4_000, 2_000, false], // short deadlines: a loaded host's late timers are not a stall
    [5_001, 2_000, true],
  ])('a sweep %i ms after the last, deadline %i ms: stalled %s', (gap, deadline, stalled) => {
    expect(wasStalled(gap, deadline)).toBe(stalled);
  });
});

describe('storeVerdict (a node overdue in this replica\'s memory)', () => {
  const deadline = 15_000;
  const now = 100_000;
  it.each<[string, Parameters<typeof storeVerdict>[1], number | null, StoreVerdict]>([
    ['the holder flushed a recent last-seen: adopted, not marked', { status: 'ready', lastSeenAt: 95_000 }, null, { mark: false, status: 'ready', lastSeenAt: 95_000 }],
    ['silent in the store too: marked', { status: 'ready', lastSeenAt: 80_000 }, null, { mark: true }],
    ['another replica marked it already: adopted as unreachable, not marked twice', { status: 'unreachable', lastSeenAt: 80_000 }, null, { mark: false, status: 'unreachable', lastSeenAt: 80_000 }],
    ['the store is behind this memory: memory counts', { status: 'ready', lastSeenAt: 10_000 }, null, { mark: true }],
    ['never seen in the store: memory counts', { status: 'ready', lastSeenAt: null }, null, { mark: true }],
    ['silent in the store, but this replica only started watching recently', { status: 'ready', lastSeenAt: 80_000 }, 90_000, { mark: false, status: 'ready', lastSeenAt: 80_000 }],
    ['gone from the store: marked as before', undefined, null, { mark: true }],
  ])('%s', (_, stored, watchingSince, expected) => {
    expect(storeVerdict(70_000, stored, now, deadline, watchingSince)).toEqual(expected);
  });
});
