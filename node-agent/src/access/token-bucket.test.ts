import { describe, expect, it } from 'vitest';
import { LinkBudget, LinkBuckets, TokenBucket } from './token-bucket.js';

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
    const { in: inbound, out } = new LinkBuckets(40, () => t);
    expect(inbound.take(256 * 1024)).toBe(0);
    expect(inbound.take(5_000_000)).toBe(1000);
    expect(out.take(256 * 1024)).toBe(0); // the other way has its own
    t = 1000; // refilled, but only to its burst
    expect(out.take(256 * 1024)).toBe(0);
    expect(out.take(1_250_000)).toBe(250);
  });

  it('changes its rate from now on, keeping what it earned up to the new burst', () => {
    let t = 0;
    const link = new LinkBuckets(40, () => t);
    expect(link.in.take(256 * 1024 + 5_000_000)).toBe(1000); // a second in debt at 5 MB/s
    t = 500;
    link.mbps = 80; // half of it paid at the old rate; the rest at 10 MB/s
    expect(link.mbps).toBe(80);
    expect(link.in.take(0)).toBe(250);
    link.mbps = 8; // and 1 MB/s from here: 2.5 MB of debt
    expect(link.in.take(0)).toBe(2500);
    t = 3000;
    expect(link.in.take(0)).toBe(0); // paid
    t = 4000;
    expect(link.in.take(256 * 1024)).toBe(0); // refilled to its burst, not to a second of 1 MB/s
    expect(link.in.take(1)).toBe(1);
  });
});

describe('LinkBudget', () => {
  it.each([
    ['alone, an instance gets the whole budget when its own bandwidth is more', 1000, 1, 400],
    ['no bandwidth of its own: the budget', null, 1, 400],
    ['shared equally among those using it', 1000, 4, 100],
    ['never more than its own bandwidth', 50, 1, 50],
    ['nobody counted yet still means one', 1000, 0, 400],
  ] as const)('%s', (_what, ownMbps, sharers, expected) => {
    expect(new LinkBudget(400).linkOf({}, ownMbps, sharers).mbps).toBe(expected);
  });

  it("keeps one link per registration, its rate following the count", () => {
    const budget = new LinkBudget(400);
    const registration = {};
    const link = budget.linkOf(registration, null, 1);
    expect(budget.linkOf(registration, null, 2)).toBe(link);
    expect(link.mbps).toBe(200);
    expect(budget.linkOf({}, null, 2)).not.toBe(link); // a restarted instance's new registration
  });
});
