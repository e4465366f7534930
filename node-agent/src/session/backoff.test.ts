import { describe, expect, it } from 'vitest';
import { Backoff, backoffDelay, RECONNECT_BACKOFF } from './backoff.js';

describe('backoffDelay', () => {
  it.each([
    // attempt, random, expected ms
    [0, 1, 100],
    [0, 0, 50],
    [1, 1, 200],
    [3, 1, 800],
    [6, 1, 6400],
    [7, 1, 10_000], // 12,800 capped
    [50, 1, 10_000],
    [50, 0, 5_000],
  ])('attempt %i with random %f waits %i ms', (attempt, random, expected) => {
    expect(backoffDelay(attempt, RECONNECT_BACKOFF, () => random)).toBe(expected);
  });

  it('stays within 100 ms .. 10 s whatever the jitter', () => {
    for (let attempt = 0; attempt < 40; attempt++) {
      const delay = backoffDelay(attempt);
      expect(delay).toBeGreaterThanOrEqual(50);
      expect(delay).toBeLessThanOrEqual(10_000);
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
