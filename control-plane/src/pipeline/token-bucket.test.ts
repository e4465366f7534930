import { describe, expect, it } from 'vitest';
import { credit, formatResetDuration, peek, take } from './token-bucket.js';

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

describe('token bucket with a cost (tokens per minute)', () => {
  it('takes the cost at once and refuses a cost the bucket cannot cover yet', () => {
    const first = take(undefined, 600, 0, 500);
    expect(first.result).toMatchObject({ allowed: true, remaining: 100 });
    const second = take(first.bucket, 600, 0, 200);
    // 600 per minute refills 10 a second: the 100 missing take 10 s.
    expect(second.result).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 10_000 });
    expect(take(second.bucket, 600, 10_000, 200).result.allowed).toBe(true);
  });

  it('shows a cost above the limit the time to a full bucket, never a shorter wait', () => {
    const { result } = take(take(undefined, 600, 0, 600).bucket, 600, 0, 5_000);
    expect(result.allowed).toBe(false);
    expect(result.retryAfterMs).toBe(60_000);
  });

  it('credits back what an estimate over-counted, up to the limit', () => {
    const { bucket } = take(undefined, 600, 0, 500);
    expect(peek(credit(bucket, 600, 0, 300), 600, 0).remaining).toBe(400);
    expect(peek(credit(bucket, 600, 0, 10_000), 600, 0).remaining).toBe(600);
  });

  it('goes below zero when real usage passed the estimate, and later takes wait it out', () => {
    const { bucket } = take(undefined, 600, 0, 600);
    const owed = credit(bucket, 600, 0, -300);
    expect(peek(owed, 600, 0).remaining).toBe(0);
    // 300 owed + 10 wanted at 10 per second.
    expect(take(owed, 600, 0, 10).result.retryAfterMs).toBe(31_000);
    expect(take(owed, 600, 31_000, 10).result.allowed).toBe(true);
  });
});
