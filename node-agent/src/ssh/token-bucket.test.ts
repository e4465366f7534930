import { describe, expect, it } from 'vitest';
import { linkBuckets, TokenBucket } from './token-bucket.js';

describe('TokenBucket', () => {
  it.each([
    // [what, steps as [ms since start, bytes taken, wait expected]]
    ['a full bucket lends its burst at once', [[0, 1000, 0]]],
    ['past the burst: wait until the debt is paid at the rate', [[0, 1500, 500]]],
    ['it refills at the rate, up to the burst', [[0, 1000, 0], [500, 500, 0], [500, 1, 1], [5000, 1000, 0]]],
    ['debt adds up', [[0, 1000, 0], [0, 1000, 1000], [0, 1000, 2000], [1000, 0, 1000]]],
  ] as const)('%s', (_what, steps) => {
    let t = 0;
    // 1,000 bytes a second, 1,000 at once.
    const bucket = new TokenBucket(1000, 1000, () => t);
    for (const [at, bytes, wait] of steps) {
      t = at;
      expect(bucket.take(bytes)).toBe(wait);
    }
  });

  it('sizes a link: 40 Mbit/s is 5 MB a second each way, 256 KiB at once', () => {
    let t = 0;
    const { in: inbound, out } = linkBuckets(40, () => t);
    expect(inbound.take(256 * 1024)).toBe(0);
    expect(inbound.take(5_000_000)).toBe(1000);
    expect(out.take(256 * 1024)).toBe(0); // the other way has its own
    t = 1000; // refilled, but only to its burst
    expect(out.take(256 * 1024)).toBe(0);
    expect(out.take(1_250_000)).toBe(250);
  });
});
