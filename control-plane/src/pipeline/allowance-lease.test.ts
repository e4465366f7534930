import { describe, expect, it } from 'vitest';
import { admitFromLease, grant, HOT_ADMISSIONS, HOT_WINDOW_MS, LEASE_MS, leaseSize, MAX_LEASE_REQUESTS, warm, type Lease } from './allowance-lease.js';

const NOW = 1_000_000;

describe('leaseSize', () => {
  it.each([
    // requests/min, tokens/min, estimate -> block
    [1_200, 2_000_000, 100, { requests: 18, tokens: 1_800 }],
    [12_000, 20_000_000, 46, { requests: 187, tokens: 8_602 }],
    [100_000_000, 20_000_000, 46, { requests: MAX_LEASE_REQUESTS, tokens: MAX_LEASE_REQUESTS * 46 }],
    // a tiny limit still leases one slot at a time
    [10, 2_000_000, 100, { requests: 1, tokens: 100 }],
    // tokens capped at 1/64 of the token limit
    [1_200, 64_000, 500, { requests: 18, tokens: 1_000 }],
    // an estimate above the token block: no lease, exact steps
    [1_200, 64_000, 1_001, null],
  ])('%i req/min, %i tokens/min, estimate %i -> %j', (requests, tokens, estimate, expected) => {
    expect(leaseSize(requests, tokens, estimate)).toEqual(expected);
  });
});

describe('admitFromLease', () => {
  const limits = { requestLimit: 1_200, tokenLimit: 60_000 };
  // The rows after the grant: 18 slots of 50 ms and 1,800 tokens of 1 ms taken from full buckets.
  const fresh = (): Lease => grant(undefined, { requests: 18, tokens: 1_800 }, limits, { requestTat: NOW + 18 * 50, tokenTat: NOW + 1_800 }, NOW);

  it('admits from the block and reports the rows as if the unspent units went back now', () => {
    const lease = fresh();
    const first = admitFromLease(lease, 1_200, 60_000, 100, NOW)!;
    expect(first.request).toMatchObject({ allowed: true, limit: 1_200, remaining: 1_199 });
    expect(first.tokens).toMatchObject({ allowed: true, limit: 60_000, remaining: 59_900 });
    expect(first.refill).toBe(false);
    expect(lease).toMatchObject({ requests: 17, tokens: 1_700 });
  });

  it('asks for the next block once half of either unit is spent', () => {
    const lease = fresh();
    const refills = Array.from({ length: 10 }, () => admitFromLease(lease, 1_200, 60_000, 100, NOW)!.refill);
    // 1,800 tokens at 100 each: below half after the 10th; 18 slots: below half after the 10th.
    expect(refills).toEqual([false, false, false, false, false, false, false, false, false, true]);
  });

  it.each<[string, (l: Lease) => void, number, number, number]>([
    ['expired', () => {}, 1_200, 60_000, NOW + LEASE_MS],
    ['of another request limit (tier changed)', () => {}, 12_000, 60_000, NOW],
    ['of another token limit', () => {}, 1_200, 600_000, NOW],
    ['out of slots', (l) => (l.requests = 0), 1_200, 60_000, NOW],
    ['short of tokens for this estimate', (l) => (l.tokens = 99), 1_200, 60_000, NOW],
  ])('refuses a lease %s, taking nothing', (_why, change, requestLimit, tokenLimit, now) => {
    const lease = fresh();
    change(lease);
    const before = { ...lease };
    expect(admitFromLease(lease, requestLimit, tokenLimit, 100, now)).toBeNull();
    expect(lease).toEqual(before);
    expect(admitFromLease(undefined, 1_200, 60_000, 100, NOW)).toBeNull();
  });

  it('a grant adds to what is held of the same limits, and drops what is held of others', () => {
    const lease = fresh();
    admitFromLease(lease, 1_200, 60_000, 100, NOW);
    const more = grant(lease, { requests: 18, tokens: 1_800 }, limits, { requestTat: NOW + 36 * 50, tokenTat: NOW + 3_600 }, NOW + 400);
    expect(more).toMatchObject({ requests: 35, tokens: 3_500, grantRequests: 18, expiresAt: NOW + 400 + LEASE_MS });
    const other = grant(lease, { requests: 187, tokens: 8_000 }, { requestLimit: 12_000, tokenLimit: 60_000 }, { requestTat: NOW, tokenTat: NOW }, NOW);
    expect(other).toMatchObject({ requests: 187, tokens: 8_000 });
  });
});

describe('warm', () => {
  it(`makes a key hot at its ${HOT_ADMISSIONS}th exact admission within ${HOT_WINDOW_MS} ms, and cools it after`, () => {
    let heat;
    const hot: boolean[] = [];
    for (let i = 0; i < HOT_ADMISSIONS; i++) {
      const step = warm(heat, NOW + i * 100);
      heat = step.heat;
      hot.push(step.hot);
    }
    expect(hot).toEqual([...Array(HOT_ADMISSIONS - 1).fill(false), true]);
    // A pause longer than the window starts counting again.
    expect(warm(heat, NOW + 100 * HOT_ADMISSIONS + HOT_WINDOW_MS).hot).toBe(false);
  });

  it('a key admitted now and then never gets hot', () => {
    let heat;
    for (let i = 0; i < 50; i++) {
      const step = warm(heat, NOW + i * (HOT_WINDOW_MS / 4));
      heat = step.heat;
      expect(step.hot).toBe(false);
    }
  });
});
