import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RETRY_SCHEDULE,
  MAX_RETRY_AFTER_MS,
  backoffDelay,
  decideAfterAttempt,
  parseDuration,
  parseRetryAfter,
  parseSchedule,
  type AttemptOutcome,
} from './retry-schedule.js';

const schedule = parseSchedule(DEFAULT_RETRY_SCHEDULE);
const now = Date.UTC(2026, 0, 1);
const failed = (statusCode: number | null, retryAfter?: string): AttemptOutcome => ({
  statusCode,
  error: statusCode === null ? 'ECONNREFUSED' : null,
  retryAfter,
  durationMs: 3,
});

describe('retry schedule', () => {
  it('reads durations', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('5s')).toBe(5000);
    expect(parseDuration('5m')).toBe(300_000);
    expect(parseDuration('2h')).toBe(7_200_000);
    expect(() => parseDuration('5 minutes')).toThrow(/not a duration/);
  });

  it('defaults to the Standard Webhooks example and gives up after about a day', () => {
    expect(schedule).toEqual([0, 5e3, 300e3, 1800e3, 7200e3, 18000e3, 36000e3, 36000e3]);
    const total = schedule.reduce((a, b) => a + b, 0);
    expect(total / 3600e3).toBeGreaterThan(24);
    expect(total / 3600e3).toBeLessThan(30);
  });

  it('spreads each wait by +/-20% jitter', () => {
    expect(backoffDelay(schedule, 2, 0)).toBe(240_000);
    expect(backoffDelay(schedule, 2, 0.5)).toBe(300_000);
    expect(backoffDelay(schedule, 2, 0.999999)).toBeCloseTo(360_000, -1);
    expect(backoffDelay(schedule, schedule.length, 0.5)).toBeNull();
  });
});

describe('Retry-After', () => {
  it('reads delay-seconds and HTTP dates, caps long ones and ignores garbage', () => {
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter(new Date(now + 90_000).toUTCString(), now)).toBe(90_000);
    expect(parseRetryAfter(new Date(now - 90_000).toUTCString(), now)).toBe(0);
    expect(parseRetryAfter('999999', now)).toBe(MAX_RETRY_AFTER_MS);
    expect(parseRetryAfter('soon', now)).toBeNull();
    expect(parseRetryAfter(undefined, now)).toBeNull();
  });
});

describe('after an attempt', () => {
  const decide = (outcome: AttemptOutcome, failedBefore = 0) =>
    decideAfterAttempt({ outcome, failedBefore, schedule, now, random: 0.5 });

  it('only a 2xx is delivered', () => {
    expect(decide(failed(200))).toEqual({ kind: 'succeeded' });
    expect(decide(failed(204))).toEqual({ kind: 'succeeded' });
    expect(decide(failed(301)).kind).toBe('retry');
    expect(decide(failed(400)).kind).toBe('retry');
    expect(decide(failed(500)).kind).toBe('retry');
    expect(decide(failed(null)).kind).toBe('retry');
  });

  it('walks the schedule: 5 s after the first failure, 5 min after the second', () => {
    expect(decide(failed(500), 0)).toEqual({ kind: 'retry', at: now + 5_000 });
    expect(decide(failed(500), 1)).toEqual({ kind: 'retry', at: now + 300_000 });
    expect(decide(failed(500), 6)).toEqual({ kind: 'retry', at: now + 36_000_000 });
  });

  it('gives up when the last attempt of the schedule fails', () => {
    const decision = decide(failed(503), schedule.length - 1);
    expect(decision).toMatchObject({ kind: 'give_up' });
    expect(decision.kind === 'give_up' && decision.reason).toContain('HTTP 503');
  });

  it('410 Gone disables the subscription at once', () => {
    expect(decide(failed(410))).toMatchObject({ kind: 'disable' });
  });

  it('Retry-After pushes the next attempt later than the backoff, never earlier', () => {
    expect(decide(failed(429, '120'))).toEqual({ kind: 'retry', at: now + 120_000 });
    expect(decide(failed(503, '1'), 1)).toEqual({ kind: 'retry', at: now + 300_000 });
  });
});
