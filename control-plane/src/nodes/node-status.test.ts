import { describe, expect, it } from 'vitest';
import { isOverdue, isSchedulable, nextNodeStatus, statusLabel } from './node-status.js';

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
  it('labels flags beside the status, draining over cordoned', () => {
    expect(statusLabel(ready)).toBe('ready');
    expect(statusLabel({ ...ready, cordoned: true })).toBe('ready,cordoned');
    expect(statusLabel({ ...ready, status: 'unreachable', cordoned: true, draining: true })).toBe('unreachable,draining');
  });
});
