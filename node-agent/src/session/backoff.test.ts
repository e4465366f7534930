import { describe, expect, it } from 'vitest';
import { Backoff, backoffDelay, RECONNECT_BACKOFF } from './backoff.js';

describe('backoffDelay', () => {
  it.each([
    // attempt, random, expected ms
    [0, 1, 100],
    [0, 0, 0],
    [0, 0.5, 50],
    [1, 1, 200],
    [2, 1, 400],
    [3, 1, 800],
    [4, 1, 1_000], // 1,600 capped
    [50, 1, 1_000],
    [50, 0.25, 250],
  ])('attempt %i with random %f waits %i ms', (attempt, random, expected) => {
    expect(backoffDelay(attempt, RECONNECT_BACKOFF, () => random)).toBe(expected);
  });

  it('follows a configured cap', () => {
    expect(backoffDelay(10, { ...RECONNECT_BACKOFF, maxMs: 5_000 }, () => 1)).toBe(5_000);
    expect(backoffDelay(10, { ...RECONNECT_BACKOFF, maxMs: 250 }, () => 1)).toBe(250);
  });

  it('stays within 0 .. 1 s by default whatever the jitter', () => {
    for (let attempt = 0; attempt < 40; attempt++) {
      const delay = backoffDelay(attempt);
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(delay).toBeLessThanOrEqual(1_000);
    }
  });
});

describe('Backoff', () => {
  it('grows per attempt and starts over after reset', () => {
    const backoff = new Backoff(RECONNECT_BACKOFF, () => 1);
    expect([backoff.next(), backoff.next(), backoff.next()]).toEqual([100, 200, 400]);
    backoff.reset();
    expect(backoff.next()).toBe(100);
  });
});
