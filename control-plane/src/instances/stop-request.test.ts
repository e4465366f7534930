import { describe, expect, it } from 'vitest';
import { requestStop, stopOverdue, stopTiming, type StopRequest } from './stop-request.js';

const T = 1_000_000;
const GRACE = 60_000;

describe('requestStop', () => {
  it.each<[string, StopRequest | null, Parameters<typeof requestStop>[1], StopRequest]>([
    ['a first graceful request', null, 'graceful', { force: false, at: T, sentAt: null }],
    ['a first forced request', null, 'force', { force: true, at: T, sentAt: null }],
    ['a resend keeps the first request and its time', { force: false, at: T - 5, sentAt: T - 5 }, 'resend', { force: false, at: T - 5, sentAt: T - 5 }],
    ['a repeated graceful request keeps the deadline', { force: false, at: T - 5, sentAt: T - 5 }, 'graceful', { force: false, at: T - 5, sentAt: T - 5 }],
    ['force escalates a graceful stop in flight', { force: false, at: T - 5, sentAt: T - 5 }, 'force', { force: true, at: T - 5, sentAt: T - 5 }],
    ['nothing de-escalates a forced stop', { force: true, at: T - 5, sentAt: null }, 'graceful', { force: true, at: T - 5, sentAt: null }],
  ])('%s', (_, recorded, action, expected) => {
    expect(requestStop(recorded, action, T)).toEqual(expected);
  });

  it('remembers the first moment a reconnecting node was found without the container', () => {
    const first = requestStop(null, 'force', T, T - 3_600_000);
    expect(first.unseenSince).toBe(T - 3_600_000);
    expect(requestStop(first, 'resend', T + 1, T).unseenSince).toBe(T - 3_600_000);
  });
});

describe('stopTiming', () => {
  it.each<[string, StopRequest, number, { timeoutMs: number; force: boolean }]>([
    ['sent at once: the whole grace', { force: false, at: T, sentAt: null }, T, { timeoutMs: GRACE, force: false }],
    ['re-sent 20 s later (agent restarted during the grace): what is left', { force: false, at: T, sentAt: T }, T + 20_000, { timeoutMs: 40_000, force: false }],
    ['re-sent after the grace: a kill', { force: false, at: T, sentAt: T }, T + 90_000, { timeoutMs: 0, force: true }],
    ['forced: a kill', { force: true, at: T, sentAt: null }, T, { timeoutMs: 0, force: true }],
  ])('%s', (_, stop, now, expected) => {
    expect(stopTiming(stop, now, GRACE)).toEqual(expected);
  });
});

describe('stopOverdue', () => {
  it.each<[string, StopRequest, number, boolean]>([
    ['never sent', { force: false, at: T, sentAt: null }, T, true],
    ['sent, within the grace', { force: false, at: T, sentAt: T }, T + 59_000, false],
    ['sent, grace over but not yet the confirmation time', { force: false, at: T, sentAt: T }, T + 80_000, false],
    ['sent, grace and confirmation time over', { force: false, at: T, sentAt: T }, T + 90_000, true],
    ['re-sent just now', { force: false, at: T, sentAt: T + 89_000 }, T + 90_000, false],
    ['forced, unconfirmed for the confirmation time', { force: true, at: T, sentAt: T }, T + 30_000, true],
  ])('%s', (_, stop, now, expected) => {
    expect(stopOverdue(stop, now, GRACE, 30_000)).toBe(expected);
  });
});
