import { describe, expect, it } from 'vitest';
import { RestartBackoff, restartDelayMs } from './restart-backoff.js';

describe('replica restart backoff', () => {
  it('doubles from 1 s to at most 60 s', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7, 20].map((a) => restartDelayMs(a))).toEqual([1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]);
  });

  it('keeps growing while the replica keeps failing, and starts over after a stable period', () => {
    const backoff = new RestartBackoff();
    expect([backoff.next(0), backoff.next(5_000), backoff.next(0), backoff.next(119_999)]).toEqual([1000, 2000, 4000, 8000]);
    expect(backoff.next(120_000)).toBe(1000);
    expect(backoff.next(0)).toBe(2000);
  });

  it('takes another policy', () => {
    const backoff = new RestartBackoff({ initialMs: 10, maxMs: 25, multiplier: 3, stableMs: 100 });
    expect([backoff.next(0), backoff.next(0), backoff.next(0)]).toEqual([10, 25, 25]);
  });
});
