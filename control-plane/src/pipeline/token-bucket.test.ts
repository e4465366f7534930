import { describe, expect, it } from 'vitest';
import { formatResetDuration, take } from './token-bucket.js';

describe('token bucket', () => {
  it('allows `limit` requests at once, then refuses until a token refills', () => {
    let bucket;
    const results = [];
    for (let i = 0; i < 4; i++) {
      const r = take(bucket, 3, 0);
      bucket = r.bucket;
      results.push(r.result);
    }
    expect(results.map((r) => r.allowed)).toEqual([true, true, true, false]);
    expect(results.map((r) => r.remaining)).toEqual([2, 1, 0, 0]);
    // 3 per minute: one token every 20 s.
    expect(results[3]!.retryAfterMs).toBe(20_000);
    expect(take(bucket, 3, 19_999).result.allowed).toBe(false);
    expect(take(bucket, 3, 20_000).result.allowed).toBe(true);
  });

  it('never holds more than the limit after a long idle time', () => {
    const { bucket } = take(undefined, 10, 0);
    const later = take(bucket, 10, 3_600_000);
    expect(later.result.remaining).toBe(9);
  });

  it('reports the time until the bucket is full', () => {
    const { result } = take(undefined, 1200, 0);
    expect(result.resetMs).toBe(50);
  });
});

describe('formatResetDuration', () => {
  it.each([
    [20, '20ms'],
    [999.2, '1000ms'],
    [1500, '1.5s'],
    [59_000, '59s'],
    [60_000, '1m0s'],
    [361_000, '6m1s'],
  ])('%d ms -> %s', (ms, text) => expect(formatResetDuration(ms)).toBe(text));
});
